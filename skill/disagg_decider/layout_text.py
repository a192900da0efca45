"""The layout and its routing threshold in words, for the summary, the terminal and reports.

The crossover (the p50 prompt above which an always-disaggregated split beats colocated) and
the threshold (which requests of this traffic to send to a prefill pool) answer different
questions; one sentence states both so they never read as a contradiction.
"""

from __future__ import annotations

from disagg_decider.calc.result import ConditionalResult


def layout_sentence(
    cond: ConditionalResult | None, crossover_prompt_tokens: int | None, split: bool = True
) -> str:
    """The crossover and the routing threshold in one sentence: they answer different questions
    (at which p50 prompt a whole split wins; which requests of this mix to send to a split).
    With `split` False (the verdict stays colocated) a layout with a prefill pool is not the
    plan, so no sentence: the summary lists it among the alternatives."""
    if cond is None or not cond.feasible or (not split and cond.layout != "colocated"):
        return ""
    return _sentence(cond, crossover_prompt_tokens)


def _sentence(cond: ConditionalResult, crossover_prompt_tokens: int | None) -> str:
    cross = (
        f"always-disaggregated wins over colocated above a p50 prompt of "
        f"{crossover_prompt_tokens} tokens"
        if crossover_prompt_tokens is not None
        else "always-disaggregated never wins over colocated on the crossover grid"
    )
    if cond.layout == "conditional":
        return (
            f"Layout: conditional ({cross}; this traffic does best routing only prompts above "
            f"{cond.threshold_tokens} uncached tokens, {cond.share_to_prefill:.0%} of requests, "
            f"to {cond.prefill_replicas} prefill x TP{cond.prefill_tp} and prefilling the rest on "
            f"{cond.decode_replicas} decode x TP{cond.decode_tp}: "
            f"{cond.goodput_per_gpu:.3f} req/s per GPU, the largest threshold within 1% of the "
            "best)."
        )
    if cond.layout == "disaggregated":
        return (
            f"Layout: always-disaggregated ({cross}, and no routing threshold above 0 comes "
            "within 1% of its goodput, so every request goes to the prefill pool)."
        )
    return (
        f"Layout: colocated ({cross}; no routing threshold gives more than 1% over no prefill "
        "pool at all)."
    )
