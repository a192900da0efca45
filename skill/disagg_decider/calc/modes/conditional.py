"""Conditional disaggregation: a prefill pool for long uncached prompts, local prefill for the rest.

Dynamo's router (`eff_isl_threshold`, policy `isl_bounding`) and llm-d's `prefix-based-pd-decider`
(`nonCachedTokens`) send a request to the prefill pool only when its uncached prompt exceeds a
threshold T; shorter prompts are prefilled by the decode worker itself, chunked into its decode
batch (the interference `colocated` prices). So the layout is two pools:

- decode workers: colocated replicas that decode every request but prefill only those with
  u <= T uncached tokens. Their prefill work per arriving request is E[u 1{u <= T}] (a
  zero-inflated service: the long requests queue for no local prefill), the TTFT of a short
  request is priced on the short part of the length distribution, and their KV memory and
  decode context are the whole mix's;
- a prefill pool (`pools.prefill_pool`) serving the long part, u > T, at the long share s of the
  rate, its TTFT including the KV transfer and the join.

Lengths are log-normal (per class for mixed traffic, `disagg_decider.classes`); the part of a
log-normal below or above T has closed-form partial moments, and each part is carried as the
log-normal with its mean and second moment (the calculator's one length shape).

The TTFT target counts all requests, as the SLO and the simulator do: the layout meets it while
s P(pooled TTFT > target) + (1 - s) P(local TTFT > target) <= 1% (`overall_ttft`). The search
and the walk over TP pairs price each part on its own p99 (an inner bound, cheap on the grid);
each threshold's best is then priced on the overall target (`conditional_rows.priced_rows`), and
the chosen layout reports the p99 over all requests with each part's own.

T = 0 is always-disaggregated and "no prefill pool" is colocated: the chooser takes both from
the modes already sized, so the layout's goodput is never below either. Among thresholds within
1% of the best goodput it picks the largest (fewest KV transfers).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable

import numpy as np

from disagg_decider.calc.layouts import budget
from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.search import pairs_allowed
from disagg_decider.calc.layouts.thresholds import (  # noqa: F401  (split_at, thresholds: public here too)
    THRESHOLD_POINTS,
    Candidate,
    Parts,
    amended,
    block_rows,
    candidates,
    candidates_many,
    split_at,
    thresholds,
)
from disagg_decider.calc.modes import conditional_report
from disagg_decider.calc.modes.conditional_choice import chosen_layout, chosen_threshold
from disagg_decider.calc.modes.conditional_report import settle, settle_many, settle_rows
from disagg_decider.calc.modes.conditional_rows import Lifted, priced_rows
from disagg_decider.calc.modes.conditional_sizing import sized_rows
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.calc.result import (
    ColocatedResult,
    ConditionalResult,
    DisaggregatedResult,
)
from disagg_decider.workload import Resolved

_GOODPUT = operator.attrgetter("goodput_rate_per_s")
_THRESHOLD = operator.attrgetter("threshold_tokens")


def tp_pairs(
    r: Resolved, colo: ColocatedResult, disagg: DisaggregatedResult
) -> list[tuple[int, int]]:
    """The TP pairs tried (the disaggregated mode's first): any prefill degree the engine allows
    with the decode workers at the colocated or the decode pool's degree. A prefill pool for a
    share of the requests may want a smaller degree than one for all of them. Plain TP only:
    DP-attention/EP layouts of MoE models are not combined with local prefill here."""
    return tp_pairs_many([(r, colo, disagg)])[0]


def tp_pairs_many(
    modes: list[tuple[Resolved, ColocatedResult, DisaggregatedResult]],
) -> list[list[tuple[int, int]]]:
    """`tp_pairs` of workloads sharing an engine (`layout_choices.group_key`, as the search's
    rows do): whether the model fits each degree read once for all of them (the engine's
    memory is element-wise in its TP and the same for every workload of the engine), every
    workload's pair rule in one call."""
    options = [_pair_options(r, c, d) for r, c, d in modes]
    asked = [(k, o) for k, o in enumerate(options) if o[1] and o[2]]
    if not asked:
        return [out for out, _, _ in options]
    first = modes[asked[0][0]][0]
    ps = sorted({p for _, (_, each, _) in asked for p in each})
    ds = sorted({d for _, (_, _, each) in asked for d in each})
    degrees = sorted({*ps, *ds})
    room = engine_for(first, np.array(degrees, dtype=float)).kv_capacity_bytes()
    fits = dict(zip(degrees, np.ravel(room > 0).tolist(), strict=True))
    # Every workload's pair rule on the union of degrees, its own budget (W, P, D).
    budgets = np.array([float(modes[k][0].workload.cluster.gpus) for k, _ in asked])
    allowed = pairs_allowed(
        first.workload.engine, np.array(ps), np.array(ds), budgets[:, None, None]
    ).tolist()
    at_p, at_d = {p: i for i, p in enumerate(ps)}, {d: j for j, d in enumerate(ds)}
    for (_, (out, mine_p, mine_d)), rule in zip(asked, allowed, strict=True):
        for p in mine_p:
            for d in mine_d:
                if (p, d) not in out and rule[at_p[p]][at_d[d]] and fits[p] and fits[d]:
                    out.append((p, d))
    return [out for out, _, _ in options]


def _pair_options(
    r: Resolved, colo: ColocatedResult, disagg: DisaggregatedResult
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """(the disaggregated mode's pair where it is plain TP, the prefill degrees and the decode
    degrees tried with it), pins and the cluster's floor and node applied."""
    from disagg_decider.calc.layouts.layout_choices import TP_CANDIDATES, pinned_layouts

    w = r.workload
    limit = min(w.cluster.gpus, w.cluster.gpus_per_node)
    pins = pinned_layouts(w)

    def options(role: str, default: list[int]) -> list[int]:
        pin = pins[role]
        if pin is None:
            return default
        return [pin.tp] if pin.tp_only else []

    floor = budget.min_replica_gpus(w.cluster.gpus)  # large clusters: `calc/layouts/budget.py`
    tps = [int(t) for t in TP_CANDIDATES if floor <= t <= limit]
    plain = lambda m, side: getattr(m, f"{side}dp", 1) == 1 and getattr(m, f"{side}ep", 1) == 1  # noqa: E731
    decode_tps = {colo.tp} if plain(colo, "") else set()
    if plain(disagg, "decode_"):
        decode_tps.add(disagg.decode_tp)
    out = []
    if plain(disagg, "prefill_") and plain(disagg, "decode_"):
        out.append((disagg.prefill_tp, disagg.decode_tp))
    ps = options("prefill", tps)
    ds = options("decode", sorted(decode_tps))
    return out, ps, ds


def best_per_threshold(r: Resolved, found: list[Candidate]) -> dict[float, Candidate]:
    """Per threshold, the best TP pair, settled: candidates are checked in the order of their
    grid goodput (an upper bound) until the best checked one is at least the next bound."""
    groups = _by_threshold(found)
    # Each threshold's top candidate, all checked at once; the rest only where a lower bound
    # could still beat the checked one (rare).
    return _best_of_groups(r, groups, settle_many(r, [group[0] for group in groups.values()]))


def _by_threshold(found: list[Candidate]) -> dict[float, list[Candidate]]:
    """Candidates per threshold, best grid goodput first."""
    # Stable sorts: within a threshold, ties keep the order found.
    ordered = sorted(found, key=_THRESHOLD)
    return {
        t: sorted(group, key=_GOODPUT, reverse=True)
        for t, group in itertools.groupby(ordered, key=_THRESHOLD)
    }


def _best_of_groups(
    r: Resolved, groups: dict[float, list[Candidate]], firsts: list[Candidate]
) -> dict[float, Candidate]:
    return _lifted([r], _best_of_many(r, [(r, groups, firsts)]))[0]


def _best_of_many(
    first: Resolved,
    searched: list[tuple[Resolved, dict[float, list[Candidate]], list[Candidate]]],
) -> list[dict[float, Candidate]]:
    """Per workload (all sharing `first`'s engine) and threshold, the best settled candidate.

    Each threshold's group is walked in order of grid goodput (an upper bound on the settled
    one): the next candidate is settled while its bound beats the best settled so far. Groups
    are independent, so each round settles the next candidate of every group still walking
    in one bisection (`settle_rows`), rather than one at a time; each group still takes the
    same candidates in the same order, so the same best.
    """
    best = [dict(zip(groups, firsts, strict=True)) for _, groups, firsts in searched]
    walking = [(w, t, 1) for w, (_, groups, _) in enumerate(searched) for t in groups]
    while walking:
        rows, keys = [], []
        for w, t, k in walking:
            r, group = searched[w][0], searched[w][1][t]
            if k < len(group) and best[w][t].goodput_rate_per_s < group[k].goodput_rate_per_s:
                rows.append((r, group[k]))
                keys.append((w, t, k))
        settled = settle_rows(first, rows) if len(rows) > 1 else [settle(*row) for row in rows]
        for (w, t, _), c in zip(keys, settled, strict=True):
            if c.goodput_rate_per_s > best[w][t].goodput_rate_per_s:
                best[w][t] = c
        walking = [(w, t, k + 1) for w, t, k in keys]
    return [{t: c for t, c in by_t.items() if c.goodput_rate_per_s > 0} for by_t in best]


def _lifted(
    resolved: list[Resolved], best: list[dict[float, Candidate]]
) -> list[dict[float, Candidate]]:
    """`_lifted_rows` without the rows."""
    return _lifted_rows(resolved, best)[0]


def _lifted_rows(
    resolved: list[Resolved], best: list[dict[float, Candidate]]
) -> tuple[list[dict[float, Candidate]], Lifted | None]:
    """Each workload's best candidate per threshold (`_best_of_many`; all sharing the first
    workload's engine), its goodput priced on the overall TTFT target
    (`conditional_rows.priced_rows`), all in one search; with the rows they were priced on
    (None where there was none), for the report. The walk settles part by part, a lower
    bound on the lifted goodput: which TP pair and split each threshold takes is chosen as
    before, then lifted."""
    kept = [(w, t) for w, by_t in enumerate(best) for t in by_t]
    out: list[dict[float, Candidate]] = [{} for _ in best]
    if not kept:
        return out, None
    lifted = priced_rows(resolved[0], [(resolved[w], best[w][t]) for w, t in kept])
    for (w, t), c in zip(kept, lifted.candidates, strict=True):
        out[w][t] = c
    return out, lifted


def evaluate(
    r: Resolved, colo: ColocatedResult, disagg: DisaggregatedResult, search: bool = True
) -> ConditionalResult:
    """The conditional layout: the best threshold with its pools, T = 0 and no pool included.

    Without `search` (heterogeneous inventories, where a decode worker's GPU is not the prefill
    pool's) only the two modes are compared, and the reasons say so.
    """
    found: list[Candidate] = []
    if search and (colo.feasible or disagg.feasible):
        pairs = tp_pairs(r, colo, disagg)
        found = candidates(r, pairs)
    return chosen_layout(r, colo, disagg, best_per_threshold(r, found), search)


def evaluate_many_later(
    resolved: list[Resolved],
    colos: list[ColocatedResult],
    disaggs: list[DisaggregatedResult],
    p99s: DeferredP99,
) -> Callable[[list[ColocatedResult], list[DisaggregatedResult]], list[ConditionalResult]]:
    """`evaluate` with its search for workloads sharing an engine (`layout_choices.group_key`), in
    order (the thresholds and TP pairs of all of them searched together), the chosen layouts'
    report-only p99 bisections added to `p99s`.

    The choice reads only the modes' goodputs and layouts, never their p99s; so the modes may
    come with their p99s still to solve. Once `p99s` is solved, the returned function takes the
    modes as reported (their p99s filled in) and gives the results.
    """
    modes = list(zip(resolved, colos, disaggs, strict=True))
    tried = [k for k, (_, c, d) in enumerate(modes) if c.feasible or d.feasible]
    pairs: list[list[tuple[int, int]]] = [[] for _ in modes]
    for k, found in zip(tried, tp_pairs_many([modes[k] for k in tried]), strict=True):
        pairs[k] = found
    groups = [_by_threshold(f) for f in candidates_many(resolved, pairs)]
    # Every workload's top candidate per threshold in one bisection, as `best_per_threshold`
    # checks them (a workload with one threshold through `settle`, as there).
    pooled = [
        (r, g[0])
        for r, gs in zip(resolved, groups, strict=True)
        if len(gs) > 1
        for g in gs.values()
    ]
    settled = iter(settle_rows(resolved[0], pooled) if pooled else [])
    searched = []
    for r, gs in zip(resolved, groups, strict=True):
        tops = [g[0] for g in gs.values()]
        firsts = [next(settled) for _ in tops] if len(tops) > 1 else settle_many(r, tops)
        searched.append((r, gs, firsts))
    best, lifted = _lifted_rows(resolved, _best_of_many(resolved[0], searched))
    out = [(r, c, d, by_t) for (r, c, d), by_t in zip(modes, best, strict=True)]
    # The chosen conditional layouts' p99s at each workload's rate, all in one pass.
    picks = [chosen_threshold(c, d, by_t) for _, c, d, by_t in out]
    chosen = [(r, by_t[t]) for (r, _, _, by_t), t in zip(out, picks, strict=True) if t is not None]
    # Each sized for its workload's rate (`conditional_sizing`), as the modes are.
    at = None if lifted is None or not chosen else lifted.index([c for _, c in chosen])
    sized, priced = sized_rows(resolved[0], chosen, lifted)
    chosen = list(zip([r for r, _ in chosen], sized, strict=True))
    reports = (
        conditional_report.report_rows(resolved[0], chosen, p99s, lifted, at, priced)
        if chosen
        else list
    )

    def layouts(
        colos: list[ColocatedResult], disaggs: list[DisaggregatedResult]
    ) -> list[ConditionalResult]:
        reported = iter(reports())
        return [
            chosen_layout(r, c, d, by_t, True, None if t is None else next(reported))
            for (r, _, _, by_t), c, d, t in zip(out, colos, disaggs, picks, strict=True)
        ]

    return layouts
