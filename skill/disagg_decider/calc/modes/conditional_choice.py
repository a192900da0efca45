"""The conditional layout chosen among always-disaggregated, each threshold's best and no prefill
pool: the largest threshold within 1% of the best goodput (`choose`), and the record that
reports it (`chosen_layout`), with the goodput curve over thresholds.

`conditional.py` walks the thresholds and hands each one's best here.
"""

from __future__ import annotations

import math

from disagg_decider.calc.layouts.thresholds import (
    Candidate,
)
from disagg_decider.calc.modes.conditional_report import report
from disagg_decider.calc.modes.conditional_sizing import sized_for_rate
from disagg_decider.calc.result import (
    ColocatedResult,
    ConditionalResult,
    DisaggregatedResult,
)
from disagg_decider.workload import Resolved

_NOT_SEARCHED = "heterogeneous pools: routing thresholds are not searched (one GPU type per role); "
NEAR_BEST = 0.99  # thresholds within 1% of the best goodput count as equally good


def choose(
    options: list[tuple[float | None, float]],
) -> int:
    """Index of the chosen (threshold, goodput): the largest threshold within 1% of the best.

    A threshold of None is "no prefill pool" (colocated), larger than any number; 0 is
    always-disaggregated. Fewer KV transfers for the same goodput is the better layout.
    """
    best = max([g for _, g in options])
    near = [i for i, (_, g) in enumerate(options) if g >= NEAR_BEST * best and g > 0]
    if not near:
        return 0
    return max(near, key=lambda i: math.inf if options[i][0] is None else options[i][0])


def threshold_options(
    colo: ColocatedResult, disagg: DisaggregatedResult, by_t: dict[float, Candidate]
) -> list[tuple[float | None, float]]:
    """(threshold, goodput) of always-disaggregated, every threshold and no prefill pool."""
    return [
        (0.0, disagg.max_rate_per_s if disagg.feasible else 0.0),
        *[(t, c.goodput_rate_per_s) for t, c in sorted(by_t.items())],
        (None, colo.max_rate_per_s if colo.feasible else 0.0),
    ]


def chosen_threshold(
    colo: ColocatedResult, disagg: DisaggregatedResult, by_t: dict[float, Candidate]
) -> float | None:
    """The chosen threshold when it is a conditional layout (neither 0 nor no pool), else None."""
    options = threshold_options(colo, disagg, by_t)
    t = options[choose(options)][0]
    return t if t is not None and t != 0.0 else None


def chosen_layout(
    r: Resolved,
    colo: ColocatedResult,
    disagg: DisaggregatedResult,
    by_t: dict[float, Candidate],
    search: bool,
    reported: Candidate | None = None,
) -> ConditionalResult:
    """The chosen layout among the settled best candidate per threshold and the two modes.

    `reported`, the chosen conditional candidate with its p99s (`report`), may be passed in by
    a caller that priced it already.
    """
    budget = float(r.workload.cluster.gpus)
    options = threshold_options(colo, disagg, by_t)
    # The points as the record's input, validated into `ThresholdPoint`s with the record in
    # one pass (the same points; some 0.4 us a point less than building each on its own).
    curve = [
        {
            "threshold_tokens": None if t is None else int(t),
            "goodput_per_gpu": g / budget,
            "share_to_prefill": (1.0 if t == 0.0 else 0.0 if t is None else by_t[t].long_share),
        }
        for t, g in options
    ]
    k = choose(options)
    t, best = options[k]
    common = {
        "curve": curve,
        "gain_over_colocated": _ratio(best, colo.max_rate_per_s if colo.feasible else 0.0),
        "gain_over_disaggregated": _ratio(best, disagg.max_rate_per_s if disagg.feasible else 0.0),
        "max_rate_per_s": best,
        "goodput_per_gpu": best / budget,
    }
    if t is None:
        return ConditionalResult(
            layout="colocated",
            feasible=colo.feasible,
            threshold_tokens=None,
            threshold_reason=(
                "no layout meets the p99 targets"
                if not colo.feasible
                else "no prefill pool: colocated replicas serve within 1% of the best goodput any "
                "threshold gives, with no KV transfers"
                if search
                else _NOT_SEARCHED + "colocated serves within 1% of always-disaggregated"
            ),
            share_to_prefill=0.0,
            prefill_tp=None,
            decode_tp=colo.tp,
            prefill_replicas=0,
            decode_replicas=colo.replicas,
            chunk_tokens=colo.chunk_tokens,
            ttft_p99_ms=colo.ttft_p99_ms,
            tpot_p99_ms=colo.tpot_p99_ms,
            **common,
        )
    if t == 0.0:
        return ConditionalResult(
            layout="disaggregated",
            feasible=disagg.feasible,
            threshold_tokens=0,
            threshold_reason=(
                "every request goes to the prefill pool: no threshold above 0 comes within 1% "
                "of always-disaggregated goodput"
                if search
                else _NOT_SEARCHED + "always-disaggregated serves more"
            ),
            share_to_prefill=1.0,
            chunk_tokens=None,
            **_pools_of(disagg),
            **common,
        )
    c = report(r, sized_for_rate(r, [(r, by_t[t])])[0]) if reported is None else reported
    return ConditionalResult(
        layout="conditional",
        feasible=True,
        threshold_tokens=int(t),
        threshold_reason=(
            f"the largest threshold within 1% of the best goodput per GPU: prompts above {int(t)} "
            f"uncached tokens ({c.long_share:.0%} of requests) go to the prefill pool, the rest "
            "prefill on the decode workers"
        ),
        share_to_prefill=c.long_share,
        chunk_tokens=c.chunk_tokens,
        **_pools_of(c),
        pooled_ttft_p99_ms=c.pooled_ttft_p99_ms,
        local_ttft_p99_ms=c.local_ttft_p99_ms,
        **common,
    )


def _pools_of(split) -> dict:
    """The two pools and their p99s, as a split's sizing reports them (the always-split mode's
    result or the conditional layout's report)."""
    names = ("prefill_tp", "decode_tp", "prefill_replicas", "decode_replicas")
    return {n: getattr(split, n) for n in (*names, "ttft_p99_ms", "tpot_p99_ms")}


def _ratio(a: float, b: float) -> float | None:
    return a / b if a > 0 and b > 0 else None
