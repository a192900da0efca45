"""The verdict's summary: one paragraph a reviewer can paste, in the order a platform engineer acts
on it (the plan and its cost, why, a close call, the alternatives that carry the rate, the
limits), or, where no layout meets the targets, the first limit.

`decide.py` builds the verdict and calls `summarize` with its parts.
"""

from __future__ import annotations

from collections.abc import Sequence

from disagg_decider.calc.result import Analysis
from disagg_decider.interactivity import (
    band_sentence,
)
from disagg_decider.layout_text import layout_sentence
from disagg_decider.plan import Plan
from disagg_decider.plan_text import (
    alternative_text,
    alternatives_sentence,
    carrying_alternative,
    cost_text,
    layout_name,
    plan_limits,
    plan_sentence,
    why_split,
)
from disagg_decider.rules import engine
from disagg_decider.workload import Resolved


def summarize(
    r: Resolved,
    a: Analysis,
    outcome: engine.Outcome,
    dynamo_cold_share: float | None = None,
    band_swept: bool = False,
    *,
    plan: Plan | None = None,
    alternatives: Sequence[Plan] = (),
    close_call: str | None = None,
) -> str:
    """One paragraph a reviewer can paste, in the order a platform engineer acts on it: what to
    deploy and its cost (`plan`), then why (the rules and the labelled numbers), where a
    close call is flagged (`close_call`, the confidence block's sentence), then the other
    layouts with a cost only where they carry the rate, then what limits the plan.

    With nothing feasible the paragraph says no plan carries the rate and the first limit.
    `band_swept` adds where the TPOT target sits against the `interactivity_band`.
    `dynamo_cold_share` (set when Dynamo's router cannot run the conditional layout) says why
    Dynamo's plan is the always-split pools.
    """
    c, d = a.colocated, a.disaggregated
    w = r.workload
    rate, cluster = w.traffic.requests_per_second, w.cluster.gpus
    if not c.feasible and not d.feasible:
        first, *rest = [x.detail for x in a.limits] or ["none meets the p99 targets"]
        more = f" Limits: {'; '.join(rest)}." if rest else ""
        return f"No layout meets the targets: {first}. No plan carries the rate.{more}"
    colocate = outcome.decision == "colocate"
    numbers = (
        f"goodput split {_goodput(d)} vs colocated {_goodput(c)} req/s per GPU "
        f"(gain {_gain_text(a)}); "
        f"KV transfer {a.kv_transfer_ms:.1f} ms per request "
        f"({a.kv_bytes_per_request / 1e6:.0f} MB over {a.kv_transfer_path})"
    )
    why = _why_colocated(outcome) + _rate_sizing(r, a, outcome) if colocate else why_split(outcome)
    carrying = carrying_alternative(list(alternatives))
    if plan is None:  # colocate chosen, only a split meets the targets
        only = alternative_text(carrying, rate, cluster) if carrying else _split_layout(d)
        text = (
            f"No colocated layout meets the targets: {_limits_text(a, 'colocated')}; only a "
            f"split does ({only}), but {why} keeps it colocated. {numbers}."
        )
    else:
        text = plan_sentence(plan, rate, cluster)
        if not plan.carries_rate and carrying is not None:
            text += (
                f"; only the {layout_name(carrying)} carries the rate "
                f"({_count(carrying.gpus, 'GPU')}, {cost_text(carrying)})"
            )
        text += f". Why: {why}; {numbers}."
    if outcome.decision == "dynamo" and dynamo_cold_share is not None:
        text += " " + _dynamo_cold_text(a, dynamo_cold_share)
    sentence = layout_sentence(a.conditional, a.crossover_prompt_tokens, split=not colocate)
    if sentence:
        text += " " + sentence
    if a.interactivity_band is not None or band_swept:
        text += " " + band_sentence(a.interactivity_band, 1e3 / w.slo.tpot_ms)
    if close_call:
        text += " " + close_call
    if plan is not None:
        shown = [p for p in alternatives if plan.carries_rate or p is not carrying]
        alternatives_text = alternatives_sentence(shown, rate, cluster)
        if alternatives_text:
            text += " " + alternatives_text
        limits = plan_limits(a.limits, plan.layout)
        if limits:
            text += f" Limits: {limits}."
    return text


def _dynamo_cold_text(a: Analysis, cold_share: float) -> str:
    """Why Dynamo's plan is not the conditional layout, and where that layout runs."""
    k = a.conditional
    gain = (
        f" at {k.gain_over_disaggregated:.2f}x the always-split goodput"
        if k is not None and k.gain_over_disaggregated
        else ""
    )
    return (
        f"Not the conditional layout below: it prefills {cold_share:.0%} of requests locally "
        "with nothing cached, and Dynamo's router keeps a prompt local only when part of it is "
        "cached (eff_isl/prompt < eff_isl_ratio_threshold, at most 1.0), so on Dynamo they go "
        "to the prefill pool and every request splits (isl_or_load bypasses them only under "
        f"prefill load); llm-d's prefix-based-pd-decider routes on uncached length alone and "
        f"runs the conditional layout{gain}."
    )


def _why_colocated(outcome: engine.Outcome) -> str:
    if outcome.deciding_veto:
        return f"veto {outcome.deciding_veto.id} ({outcome.deciding_veto.title})"
    pushing = [f"{f.id} ({f.title})" for f in outcome.fired if f.pushes == "colocate"]
    if pushing:
        verb = "outweighs" if len(pushing) == 1 else "outweigh"
        return f"{', '.join(pushing)} {verb} the case for a split"
    return "no rule makes the case for a split"


def _rate_sizing(r: Resolved, a: Analysis, outcome: engine.Outcome) -> str:
    """Both modes' GPUs for the rate, where the deciding veto compared them (DSG020): a gain
    per GPU that the split still wins, so the reader sees why it does not count here."""
    veto = outcome.deciding_veto
    if veto is None or not any(x.metric == "gpus_saved_by_split" for x in veto.compared):
        return ""
    rate = r.workload.traffic.requests_per_second
    return (
        f": at {rate:g} req/s the split needs {a.disaggregated.gpus_needed_for_rate} GPUs, "
        f"colocated replicas {a.colocated.gpus_needed_for_rate}"
    )


def _split_layout(d) -> str:
    return (
        f"prefill {d.prefill_layout} x {d.prefill_replicas} + "
        f"decode {d.decode_layout} x {d.decode_replicas} ({_count(d.gpus, 'GPU')})"
    )


def _goodput(mode) -> str:
    return f"{mode.goodput_per_gpu:.3f}" if mode.feasible else "-"


_CAUSES = {
    "memory": "has no room in memory",
    "context": "exceeds the context",
    "slo": "meets no SLO",
}


def _gain_text(a: Analysis) -> str:
    """The gain, or why there is none: the infeasible mode's first limit (memory for a pin
    that leaves no room for KV, not the SLO)."""
    if a.gain is not None:
        return f"{a.gain:.2f}x"
    mode, who = (
        ("colocated", "colocated") if not a.colocated.feasible else ("disaggregated", "the split")
    )
    kinds = [x.kind for x in a.limits if x.mode in (mode, "both") and x.kind in _CAUSES]
    return f"n/a, {who} {_CAUSES[kinds[0] if kinds else 'slo']}"


def _limits_text(a: Analysis, mode: str | None) -> str:
    """The limits on `mode` (None: all of them), as one clause each."""
    chosen = [x for x in a.limits if mode is None or x.mode in (mode, "both")]
    return "; ".join(x.detail for x in chosen)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
