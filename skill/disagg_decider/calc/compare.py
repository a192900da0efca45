"""Transfer versus gain: size both modes on the cluster and compare their goodput per GPU.

Both modes get the same GPU budget (`cluster.gpus`) in whole replicas. Goodput is the largest
request rate a mode serves within its p99 TTFT and TPOT targets; dividing by the whole budget
makes GPUs a mode cannot use, or a prefill pool idling on short prompts, count against it.

`calc/layouts/search.py` evaluates every configuration at once. Each workload gets a run of rows:
its own p50 prompt first, then a log-spaced grid from which the crossover (the prompt length where
disaggregation starts to win) is read, every mode re-optimised at every length. Workloads that
share an engine are searched together (`analyze_many`), so a batch pays numpy's fixed cost per
call once. This module turns each workload's rows into the verdict's numbers at its own rate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from disagg_decider.calc.crossover import crossover_grid, crossover_with_own, split_wins
from disagg_decider.calc.layouts import pins, rate_layout
from disagg_decider.calc.layouts.layout_choices import group_key, pinned_tps
from disagg_decider.calc.layouts.limits import limits_for_block
from disagg_decider.calc.layouts.search import Found, Members, members_of, search, within_context
from disagg_decider.calc.mode_entries import Own, presented_records
from disagg_decider.calc.mode_records import colocated_results, disaggregated_results, per_request
from disagg_decider.calc.modes import conditional, hetero
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.calc.result import Analysis
from disagg_decider.workload import Resolved

BLOCK_WORKLOADS = 256  # workloads per search: big enough to spread numpy's per-call cost
# Up to this many, own prompts and the whole crossover grid share one search: a second search
# costs ~3,000-4,500 Python-level calls, more than the grid's other side on blocks this small
# (measured on the mix's chat blocks: one pass 1-8% less CPU at 5-8 members, 3% more at 12).
ONE_PASS_WORKLOADS = 8


def analyze(r: Resolved) -> Analysis:
    return analyze_many([r])[0]


def analyze_many(resolved: Sequence[Resolved], *, modes_only: bool = False) -> list[Analysis]:
    """One `Analysis` per workload, in order, each equal to what `analyze` gives alone.

    Workloads that share an engine (`group_key`) are searched together, in blocks: a sweep
    over rates, lengths, SLOs or clusters costs a fraction of one search per workload.
    `modes_only` leaves out the crossover and the conditional layout (both None): the
    heterogeneous path needs only each pool's two modes, and prices the rest itself.
    """
    return analyze_banded(resolved, modes_only=modes_only)[0]


Served = list[tuple[float, float]]  # (colocated, always-disaggregated) goodput per GPU


def analyze_banded(
    resolved: Sequence[Resolved], band_tpot_ms: Sequence[float] = (), *, modes_only: bool = False
) -> tuple[list[Analysis], list[Served | None]]:
    """`analyze_many`, and each workload's two modes' goodput per GPU at each TPOT target of
    `band_tpot_ms` (the interactivity band's grid; 0 where a mode misses).

    The targets' rows ride in the block's own search (rows are searched independently, so
    each is what a search of that target alone gives) instead of a search of their own, which
    for one decision costs about as much as the decision's. None where the band is priced
    elsewhere (`interactivity.band_curves`): heterogeneous and static-basis workloads.
    """
    for r in resolved:
        pins.check(r)  # a pin that cannot run is a user error, before anything is priced
    out: list[Analysis | None] = [None] * len(resolved)
    served: list[Served | None] = [None] * len(resolved)
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(resolved):
        if r.workload.cluster.heterogeneous:  # two GPU types: calc/modes/hetero.py
            out[i] = hetero.analyze_heterogeneous(r, analyze_many)
            if modes_only:  # no crossover asked for: its gain curve is most of the cost
                continue
            grid = crossover_grid(r)
            gains = hetero.gain_curve(r, grid, analyze_many)
            own = r.workload.traffic.prompt_tokens.p50
            # The workload's own prompt merged into the grid, as for homogeneous clusters.
            crossover = crossover_with_own(
                np.concatenate([[own], grid]), np.concatenate([[_gain_code(out[i])], gains])
            )
            out[i] = out[i].model_copy(update={"crossover_prompt_tokens": crossover})
            continue
        groups.setdefault(group_key(r), []).append(i)
    for members in groups.values():
        # Neighbours in a block should allow the same TP degrees, so fewer degrees are searched.
        members.sort(key=lambda i: _tp_limits(resolved[i]))
        for start in range(0, len(members), BLOCK_WORKLOADS):
            block = members[start : start + BLOCK_WORKLOADS]
            analyses, band = _analyze_block([resolved[i] for i in block], modes_only, band_tpot_ms)
            for i, analysis, row in zip(block, analyses, band, strict=True):
                out[i], served[i] = analysis, row
    return out, served  # type: ignore[return-value]


def _tp_limits(r: Resolved) -> tuple:
    w = r.workload
    pins = pinned_tps(w).values()
    return (min(w.cluster.gpus, w.cluster.gpus_per_node), *(p or 0 for p in pins))


def _analyze_block(
    resolved: list[Resolved], modes_only: bool = False, band_tpot_ms: Sequence[float] = ()
) -> tuple[list[Analysis], list[Served | None]]:
    """Search every member's own prompt (and its band targets' rows), then the side of its
    crossover grid it needs."""
    members = members_of(resolved)
    own_prompts = [np.array([p]) for p in members.prompt_p50.tolist()]
    grid = crossover_grid(members.first)
    extra = None if modes_only else _band_rows(resolved, band_tpot_ms)
    if modes_only:
        # Rows are searched independently, so the own prompts alone give the same modes.
        found = search(members.first, members.rows(own_prompts), members.layouts)
        rows = np.arange(len(resolved))
        crossovers: list[int | None] = [None] * len(resolved)
    elif len(resolved) <= ONE_PASS_WORKLOADS:
        # Few workloads: numpy's fixed cost per call dominates, so one search takes the whole
        # grid along with the workloads' own prompts.
        prompts = [np.concatenate([p, grid]) for p in own_prompts]
        found = search(members.first, members.rows(prompts, extra), members.layouts)
        stride = 1 + len(grid)
        rows = np.arange(len(resolved)) * stride
        crossovers = [
            crossover_with_own(p, found.gain[k * stride : (k + 1) * stride])
            for k, p in enumerate(prompts)
        ]
    else:
        found = search(members.first, members.rows(own_prompts, extra), members.layouts)
        rows = np.arange(len(resolved))
        crossovers = _crossovers(members, grid, own_prompts, found.gain[: len(resolved)])
    band = _band_served(found, members, extra)
    own = Own.of(members, rows)
    # The modes' and the conditional layout's report-only p99 TTFTs, solved in one bisection
    # once every choice is made (`reported_ttft`).
    p99s = DeferredP99()
    (colo_priced, colo_pick), (disagg_priced, split_pick) = _modes_at_rate(own, found, p99s)
    everyone = range(len(resolved))
    colo, disagg = colo_priced.records(everyone), disagg_priced.records(everyone)
    # The conditional search reads the best layouts (their goodput and TPs), as the gain does.
    layouts = None if modes_only else conditional.evaluate_many_later(resolved, colo, disagg, p99s)
    request = per_request(own, {k: v[split_pick] for k, v in disagg_priced.figures.items()})
    p99s.solve()
    colo = presented_records(colo_priced, colo, colo_pick, rate_layout.CLUSTER_FIELDS)
    disagg = presented_records(disagg_priced, disagg, split_pick)
    limits = limits_for_block(members, colo, disagg)
    conds = [None] * len(resolved) if layouts is None else layouts(colo, disagg)
    out = []
    for k in range(len(resolved)):
        c, d, cond = colo[k], disagg[k], conds[k]
        out.append(
            Analysis(
                **{name: values[k] for name, values in request.items()},
                colocated=c,
                disaggregated=d,
                gain=_gain(d.goodput_per_gpu, c.goodput_per_gpu),
                crossover_prompt_tokens=crossovers[k],
                conditional=cond,
                conditional_disagg_threshold_tokens=cond.threshold_tokens if cond else None,
                limits=limits[k],
                warnings=members.warnings[k],
            )
        )
    return out, band


def _modes_at_rate(own: Own, found: Found, p99s: DeferredP99) -> tuple:
    """Each mode priced at every member's rate: ((colocated `PricedMode`, the entry each member
    presents), (the split's, likewise)). Its best layouts are entries 0..W-1 and, in the same
    call, the pools to deploy where another layout carries the rate on fewer GPUs
    (`rate_layout`) follow them: only the members whose proposal differs are priced again."""
    best_t = found.colo_best_t[own.row]
    fewest = rate_layout.fewest_gpus_layout(found, own.row, own.rate)
    moved_t, proposed_t = rate_layout.alternatives(best_t, fewest, own.row)
    colo = colocated_results(own.again(moved_t), found, p99s, np.concatenate([best_t, proposed_t]))
    best_pair = found.best_pair[own.row]
    fewest = rate_layout.fewest_gpus_pair(found, own.row, own.rate)
    moved_pair, proposed_pair = rate_layout.alternatives(best_pair, fewest, own.row)
    pairs = np.concatenate([best_pair, proposed_pair])
    split = disaggregated_results(own.again(moved_pair), found, pairs)
    return (
        (colo, rate_layout.presented(colo.columns, moved_t)),
        (split, rate_layout.presented(split.columns, moved_pair)),
    )


def _band_rows(resolved: list[Resolved], band_tpot_ms: Sequence[float]) -> tuple | None:
    """`Members.rows`' extra rows: each p99-basis member at each band target, member-major."""
    at = [k for k, r in enumerate(resolved) if r.workload.slo.basis == "p99-under-load"]
    if not band_tpot_ms or not at:
        return None
    targets = [float(t) for t in band_tpot_ms]
    return [k for k in at for _ in targets], targets * len(at)


def _band_served(found: Found, members: Members, extra: tuple | None) -> list[Served | None]:
    """The band rows' goodput per GPU of both modes, per member (the rows come last)."""
    out: list[Served | None] = [None] * len(members.resolved)
    if extra is None:
        return out
    first = len(found.gain) - len(extra[0])
    colo = found.colo_within[first:].tolist()
    split = found.disagg_within[first:].tolist()
    for k, c, d in zip(extra[0], colo, split, strict=True):
        gpus = float(members.budget[k])
        out[k] = [*(out[k] or []), (c / gpus, d / gpus)]
    return out


def _crossovers(
    members: Members, grid: np.ndarray, own_prompts: list[np.ndarray], own_gain: np.ndarray
) -> list[int | None]:
    """Each member's crossover, searching only the grid points it can depend on.

    `crossover_from_curve` reads below the workload's own prompt when disaggregation wins
    there (where does the winning stretch start?) and above it when it does not (where would
    it start winning?), so the other side is never searched. Rows are independent, so this
    gives what the whole grid gives, for about half the work. Nor are the rows whose p99
    request outruns the model's context (the longer prompts of a long-context workload): the
    search serves nothing there in either mode (gain nan), and so do these rows unsearched.
    """
    sides = []
    for own, gain in zip(own_prompts, own_gain.tolist(), strict=True):
        sides.append(grid[grid < own[0]] if split_wins(gain) else grid[grid >= own[0]])
    gains = np.full(sum(map(len, sides)), np.nan)
    if len(gains):
        rows = members.rows(sides)
        limit = members.first.model.max_context_tokens
        served = within_context(limit, rows.lengths, rows.class_context)
        if served.all():
            gains = search(members.first, rows, members.layouts).gain
        elif served.any():
            start = np.cumsum([0, *map(len, sides)])
            kept = [
                side[served[a:b]] for side, a, b in zip(sides, start[:-1], start[1:], strict=True)
            ]
            gains[served] = search(members.first, members.rows(kept), members.layouts).gain
    out, start = [], 0
    for own, gain, side in zip(own_prompts, own_gain, sides, strict=True):
        curve = np.concatenate([[gain], gains[start : start + len(side)]])
        out.append(crossover_with_own(np.concatenate([own, side]), curve))
        start += len(side)
    return out


def gain_curve(r: Resolved, prompt_tokens) -> np.ndarray:
    """Disaggregated over colocated goodput at each prompt p50, every mode re-optimised.

    The p99/p50 spread, outputs, rate, SLOs and cluster stay as in the workload. Returns inf
    where only disaggregation meets the SLO and nan where neither does.
    """
    prompts = np.asarray(prompt_tokens, dtype=float).reshape(-1)
    if r.workload.cluster.heterogeneous:
        return hetero.gain_curve(r, prompts, analyze_many)
    members = members_of([r])
    return search(r, members.rows([prompts]), members.layouts).gain


def _gain_code(a: Analysis) -> float:
    """An analysis' gain as the search encodes it: inf where only disaggregation meets the
    SLOs, nan where neither does."""
    if a.gain is not None:
        return a.gain
    return np.inf if a.disaggregated.goodput_per_gpu > 0 else np.nan


def _gain(disagg: float, colo: float) -> float | None:
    """The goodput ratio where both modes serve something; None otherwise (never 0 or inf)."""
    return disagg / colo if colo > 0 and disagg > 0 else None
