"""What Dynamo's conditional-disaggregation router can and cannot route, in deploy's words.

Dynamo keeps a prompt on the decode worker only if its uncached part is under the threshold
AND under `eff_isl_ratio_threshold` (at most 1.0) of the prompt, so a prompt with nothing
cached always goes to the prefill pool (calc/modes/local_prefill_share.py). Where the verdict's
conditional layout keeps a material share of such prompts local (`Verdict.dynamo_layout` is
`disaggregated`), Dynamo is emitted with the always-split pools; llm-d, which routes on the uncached
length alone, keeps the conditional layout.
"""

from __future__ import annotations

from disagg_decider.verdict import Verdict


def dynamo_needs_always_split(v: Verdict) -> bool:
    """The verdict's best layout is conditional but Dynamo's router cannot run it as sized."""
    return v.layout == "conditional" and v.dynamo_layout == "disaggregated"


def _cold(v: Verdict) -> str:
    share = v.metrics.conditional_cold_local_share or 0.0
    return f"{share:.0%} of requests"


def always_split_warning(v: Verdict) -> str:
    """Why the Dynamo files carry the always-split pools (stderr and the README)."""
    k = v.conditional
    t = k.threshold_tokens if k is not None else None
    return (
        f"Dynamo's router cannot run the verdict's conditional layout (T = {t} uncached tokens): "
        f"it prefills {_cold(v)} locally with nothing cached, and Dynamo keeps a prompt local "
        "only when part of it is cached (eff_isl/prompt < eff_isl_ratio_threshold, at most "
        "1.0), so it would send them to a prefill pool not sized for them. Emitting the "
        "always-disaggregated pools instead (no conditional-disagg config). The conditional "
        "layout runs on llm-d (`--target llm-d`: prefix-based-pd-decider routes on uncached "
        "length alone); on Dynamo, policy isl_or_load keeps cold prompts local only while the "
        "prefill worker is busy, which these pools are not sized for."
    )


def ratio_note(v: Verdict) -> str:
    """What eff_isl_ratio_threshold 1.0 does where the conditional config is emitted."""
    share = v.metrics.conditional_cold_local_share
    cold = (
        f" The calculator's layout keeps {share:.0%} of requests local with nothing cached "
        "(classes with prefix_cache_hit_rate 0), below the rulebook's material_cold_local_share; "
        "Dynamo sends those to the prefill pool."
        if share
        else " Every class here has part of its prompts cached, so the ratio check passes."
    )
    return (
        "\nThe router's `eff_isl_ratio_threshold` is 1.0, the loosest Dynamo accepts: a prompt "
        "stays on the decode worker only if its uncached tokens are under the threshold AND part "
        "of it is cached on that worker (eff_isl/prompt < 1.0); a prompt with nothing cached "
        "always goes to the prefill pool (ai-dynamo/dynamo lib/kv-router/src/"
        "conditional_disagg.rs)." + cold
    )
