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

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from disagg_decider.calc.layouts import pins, rate_layout
from disagg_decider.calc.layouts.limits import limits_for_block
from disagg_decider.calc.layouts.pools import transfer_nodes_ms
from disagg_decider.calc.layouts.search import (
    Found,
    Members,
    engine_for,
    group_key,
    members_of,
    pinned_tps,
    search,
)
from disagg_decider.calc.modes import conditional, hetero
from disagg_decider.calc.physics import kv, parallel
from disagg_decider.calc.physics.kvpath import transfer_times
from disagg_decider.calc.queues.array_helpers import sorted_unique
from disagg_decider.calc.replicas import colocated_load, decode, ingress_queue, prefill
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.calc.result import Analysis, ColocatedResult, DisaggregatedResult
from disagg_decider.workload import Resolved

HOURS_PER_YEAR = 8760.0
CROSSOVER_POINTS = 11
CROSSOVER_MIN_PROMPT_TOKENS = 64  # the crossover grid's shortest prompt p50
BLOCK_WORKLOADS = 256  # workloads per search: big enough to spread numpy's per-call cost
ONE_PASS_WORKLOADS = 4  # up to this many, own prompts and crossover grid share one search
SIZING_REPLICAS = 64  # prefill pools are sized up to this many replicas beyond the cluster


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
            crossover = _crossover(
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
            _crossover(p, found.gain[k * stride : (k + 1) * stride]) for k, p in enumerate(prompts)
        ]
    else:
        found = search(members.first, members.rows(own_prompts, extra), members.layouts)
        rows = np.arange(len(resolved))
        crossovers = _crossovers(members, grid, own_prompts, found.gain[: len(resolved)])
    band = _band_served(found, members, extra)
    own = _Own.of(members, rows)
    # The modes' and the conditional layout's report-only p99 TTFTs, solved in one bisection
    # once every choice is made (`reported_ttft`).
    p99s = DeferredP99()
    colo, colo_ttft = _colocated_results(own, found, p99s)
    # The colocated pools to deploy: the fewest GPUs that carry the rate (`rate_layout`).
    fewest_t = rate_layout.fewest_gpus_layout(found, own.row, own.rate)
    fewest = (
        None
        if fewest_t is None
        else _colocated_results(own, replace(found, colo_best_t=fewest_t), p99s)
    )
    disagg, disagg_columns, disagg_ttft = _disaggregated_results(own, found)
    # The conditional search reads the best layouts (their goodput and TPs), as the gain does.
    layouts = None if modes_only else conditional.evaluate_many_later(resolved, colo, disagg, p99s)
    # The split's pools to deploy: the fewest GPUs that carry the rate (`rate_layout`).
    fewest_pair = rate_layout.fewest_gpus_pair(found, own.row, own.rate)
    if fewest_pair is not None:
        proposed = _disaggregated_results(own, replace(found, best_pair=fewest_pair))
        disagg, disagg_columns, disagg_ttft = rate_layout.presented_split(
            (disagg, disagg_columns, disagg_ttft), proposed
        )
    request = _per_request(own, disagg_columns)
    p99s.solve()
    colo, disagg = _with_ttft(colo, colo_ttft()), _with_ttft(disagg, disagg_ttft())
    if fewest is not None:
        colo = rate_layout.presented(colo, _with_ttft(fewest[0], fewest[1]()))
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
    gives what the whole grid gives, for about half the work.
    """
    sides = []
    for own, gain in zip(own_prompts, own_gain.tolist(), strict=True):
        sides.append(grid[grid < own[0]] if _wins(gain) else grid[grid >= own[0]])
    gains = np.empty(0)
    if any(len(side) for side in sides):
        gains = search(members.first, members.rows(sides), members.layouts).gain
    out, start = [], 0
    for own, gain, side in zip(own_prompts, own_gain, sides, strict=True):
        curve = np.concatenate([[gain], gains[start : start + len(side)]])
        out.append(_crossover(np.concatenate([own, side]), curve))
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


def crossover_grid(r: Resolved) -> np.ndarray:
    return _log_grid(min(r.model.max_context_tokens, 131072))


@cache
def _log_grid(top: int) -> np.ndarray:
    grid = sorted_unique(np.round(np.geomspace(CROSSOVER_MIN_PROMPT_TOKENS, top, CROSSOVER_POINTS)))
    grid.setflags(write=False)
    return grid


def crossover_from_curve(prompts: np.ndarray, gains: np.ndarray, own_prompt: float) -> int | None:
    """Where disaggregation starts to win, seen from the workload's own prompt length.

    Whole replicas on a fixed budget make the gain curve step up and down, so "the" crossover
    is read relative to the workload: if disaggregation wins at its own prompt, the lower end
    of that winning stretch; if not, the first longer prompt where it would win. The crossing
    is log-interpolated between grid points; None when it never wins on the grid.
    """
    prompts = np.asarray(prompts, dtype=float).tolist()  # a dozen points: plain Python is faster
    gains = np.asarray(gains, dtype=float).tolist()
    wins = [_wins(g) for g in gains]
    if not any(wins):
        return None
    own = min(bisect_left(prompts, own_prompt), len(prompts) - 1)
    if wins[own]:
        start = own
        while start > 0 and wins[start - 1]:
            start -= 1
    elif True in wins[own:]:
        start = wins.index(True, own)
    else:
        return None
    return _stretch_start(prompts, gains, start)


def winning_stretches(prompts, gains) -> list[tuple[int, int]]:
    """Each stretch of the curve where disaggregation wins, as (from, to) prompt tokens: `from`
    where the gain crosses 1, log-interpolated as `crossover_from_curve` reads it (so the
    crossover is one of them on the same grid), `to` the stretch's last winning grid point."""
    prompts = np.asarray(prompts, dtype=float).tolist()
    gains = np.asarray(gains, dtype=float).tolist()
    wins = [_wins(g) for g in gains]
    out = []
    for i, won in enumerate(wins):
        if won and (i == 0 or not wins[i - 1]):
            end = i
            while end + 1 < len(wins) and wins[end + 1]:
                end += 1
            out.append((_stretch_start(prompts, gains, i), round(prompts[end])))
    return out


def _stretch_start(prompts: list[float], gains: list[float], start: int) -> int:
    """Where a winning stretch starting at grid point `start` begins: the grid's first point,
    else the log-interpolated crossing from the losing point before it."""
    if start == 0:
        return int(prompts[0])
    return _log_crossing(prompts[start - 1], prompts[start], gains[start - 1], gains[start])


def _wins(gain: float) -> bool:
    """Disaggregation wins where it serves more per GPU (nan, neither meets the SLO, never)."""
    return gain > 1.0


def _crossover(prompts: np.ndarray, gains: np.ndarray) -> int | None:
    """The crossover on the grid with the workload's own prompt (index 0) merged in."""
    p, g = prompts.tolist(), gains.tolist()
    order = sorted(range(len(p)), key=p.__getitem__)
    return crossover_from_curve([p[i] for i in order], [g[i] for i in order], p[0])


def _log_crossing(lo: float, hi: float, g_lo: float, g_hi: float) -> int:
    """Prompt length where the gain reaches 1 between two grid points (log-linear)."""
    g_lo = 0.0 if math.isnan(g_lo) else float(g_lo)
    if not math.isfinite(g_hi) or g_hi <= g_lo:
        return round(hi)
    frac = min(max((1.0 - g_lo) / (g_hi - g_lo), 0.0), 1.0)
    return round(math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo))))


# --- the modes at each workload's own rate ---------------------------------------------------
#
# Vectorised over a block's workloads: arrays below have one entry per workload (W,), and the
# lengths and engines they use are columns (W, 1) so they broadcast against batch grids.


@dataclass(frozen=True)
class _Own:
    """Each workload's own row of a search, with its own rate and cost."""

    members: Members
    row: np.ndarray  # (W,) index of each workload's own-prompt row
    rate: np.ndarray  # requests per second
    usd_per_gpu_hour: np.ndarray
    lengths: Lengths  # fields (W, 1)

    @property
    def first(self) -> Resolved:
        return self.members.first

    @property
    def budget(self) -> np.ndarray:
        return self.members.budget

    @property
    def ttft_slo_ms(self) -> np.ndarray:
        return self.members.ttft_ms

    @property
    def tpot_slo_ms(self) -> np.ndarray:
        return self.members.tpot_ms

    @classmethod
    def of(cls, members: Members, rows: np.ndarray) -> _Own:
        everyone = np.arange(len(members.resolved))
        workloads = [r.workload for r in members.resolved]
        return cls(
            members=members,
            row=rows,
            rate=np.array([w.traffic.requests_per_second for w in workloads]),
            usd_per_gpu_hour=np.array([w.cost.usd_per_gpu_hour for w in workloads]),
            lengths=members.lengths(members.prompt_p50, everyone, (-1, 1)),
        )


def _replicas_needed(rate, per_replica):
    """Whole replicas that carry `rate`; 1 when a replica carries nothing (no size fits)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.ceil(rate / per_replica - 1e-9)
    return np.where(per_replica > 0, np.maximum(need, 1.0), 1.0)


def _colocated_results(
    o: _Own, f: Found, p99s: DeferredP99
) -> tuple[list[ColocatedResult], Callable[[], np.ndarray]]:
    """The records without their p99 TTFT, and the function that gives that column once
    `p99s` (where its bisection was added) is solved."""
    t = f.colo_best_t[o.row]
    tp = f.layouts["gpus"][t].astype(float)  # GPUs per replica
    chunk_i = f.colo_chunk_index[o.row, t]
    chunks = o.first.workload.efficiency.chunk_tokens
    cap = np.maximum(o.budget // tp, 1.0)
    at = (
        _engine_at(o.first, f.layouts, t),
        o.lengths,
        o.ttft_slo_ms.reshape(-1, 1),
        o.tpot_slo_ms.reshape(-1, 1),
        np.asarray(chunks, dtype=float)[chunk_i].reshape(-1, 1),
    )

    # What one replica carries within the targets with the whole cluster behind the router,
    # then with the replicas the rate needs (fewer replicas pool less and queue more).
    # Each pool size's lines and batch grid are built once: the loads within the targets and
    # the reported latencies are read off the same rows (`servers` is the size `on` holds).
    def within_at(servers: np.ndarray, rate_hi: np.ndarray):
        on = colocated_load.lines_and_grid(*at, servers.reshape(-1, 1))
        rate = colocated_load.rate_within_targets(*at, servers.reshape(-1, 1), rate_hi, on=on)
        return rate, on

    per_replica, on = within_at(cap, f.colo_rate[o.row, t])
    feasible = (per_replica > 0) & (o.budget // tp >= 1)
    within = np.where(feasible, cap * per_replica, 0.0)
    need = _replicas_needed(o.rate, per_replica)
    servers, carried = cap, per_replica
    for _ in range(4):  # more replicas carry more each; a few rounds settle the count
        replicas = np.where(feasible, np.minimum(need, cap), cap)
        if not np.array_equal(replicas, servers):
            carried, on = within_at(replicas, per_replica)
            servers = replicas
        more = np.where(carried > 0, np.maximum(need, _replicas_needed(o.rate, carried)), need)
        if np.array_equal(more, need):
            break
        need = more
    replicas = np.where(feasible, np.minimum(need, cap), cap)
    if not np.array_equal(replicas, servers):
        carried, on = within_at(replicas, per_replica)
    fits = feasible & (need <= cap)
    load = np.minimum(o.rate / replicas, carried)
    ttft_terms, ttft_of, tpot = colocated_load.latency_terms(
        *at, load, replicas.reshape(-1, 1), on=on
    )
    ttft_p99 = p99s.add(*ttft_terms)
    served = np.minimum(o.rate, replicas * carried)
    columns = {
        "feasible": feasible,
        "fits_cluster": fits,
        "gpus": (replicas * tp).astype(int),
        "gpus_needed_for_rate": np.where(feasible, need * tp, np.nan),
        "max_rate_per_s": within,
        "goodput_per_gpu": within / o.budget,
        "ttft_p99_ms": np.full(len(o.row), np.nan),  # filled in once solved (`_with_ttft`)
        "tpot_p99_ms": np.where(feasible, tpot, np.nan),
        **_layout_columns("", f.layouts, t),
        "replicas": replicas.astype(int),
        "chunk_tokens": np.asarray(chunks)[chunk_i],
        "max_batch": _whole(f.colo_batch[o.row, t]),
    }
    records = _records(ColocatedResult, columns, _costs(o, replicas * tp, served))
    return records, lambda: np.where(feasible, ttft_of(ttft_p99.value), np.nan)


def _disaggregated_results(
    o: _Own, f: Found
) -> tuple[list[DisaggregatedResult], dict[str, np.ndarray], Callable[[], np.ndarray]]:
    """The records without their p99 TTFT, the columns they were built from (the per-request
    figures use them), and the function that gives the p99 TTFT column. That column is priced
    here (the prefill pool's wait and the KV link's, `ingress_queue`), not in `DeferredP99`'s
    batch; a function all the same, read as the colocated column is."""
    i, j = f.best_pair[o.row, 0], f.best_pair[o.row, 1]
    p_tp, d_tp = f.layouts["gpus"][i].astype(float), f.layouts["gpus"][j].astype(float)
    p_atp, d_atp = f.layouts["tp"][i].astype(float), f.layouts["tp"][j].astype(float)
    d_rate = f.decode_rate[o.row, i, j]
    feasible = f.pair_served[o.row, i, j] > 0
    p_engine = _engine_at(o.first, f.layouts, i)
    d_engine = _engine_at(o.first, f.layouts, j)
    everyone = np.arange(len(o.row))
    path = o.members.path.take(everyone, (-1, 1))
    mix = (
        o.members.mix
    )  # mixed traffic: each mixed member's own row (`calc/replicas/mixed_members.py`)
    own = None if mix is None else mix.own(o.members.prompt_p50, everyone)
    most = np.maximum(np.floor((o.budget - d_tp) / p_tp), 1.0)
    # The search priced this pair's prefill pool at the workload's own prompt (`prefill_pool`,
    # element by element: the bits it would get built again here), and some of its rates.
    rates = f.prefill_rates.at((o.row, i, j))
    pool = rates.pool
    all_rows = np.ones(len(o.row), dtype=bool)
    # Replicas the rate needs even beyond the cluster (reported when it does not fit); 1 where
    # one replica serves nothing, as for decode.
    one = rates(np.ones(len(o.row)), all_rows)
    needed, rates = rates.sizing(o.rate, np.maximum(most, SIZING_REPLICAS), one)
    x = np.where(one > 0, needed, 1.0)
    y = _replicas_needed(o.rate, d_rate)
    # Transfers into one decode receiver queue for its NICs: the pools grow where that wait
    # pushes the p99 TTFT past the target (`ingress_queue`).
    d_dp = f.layouts["dp"][j].astype(float)
    t_nodes = _transfer_nodes_ms(o, p_engine, path, p_atp, d_atp)
    sized = feasible & (one > 0) & (d_rate > 0)
    x, y, ttft_sized = ingress_queue.grow_for_transfer_wait(
        pool, x, y, p_tp, d_tp, d_dp, o.rate, t_nodes, o.ttft_slo_ms, sized
    )
    needed = np.where(feasible, x * p_tp + y * d_tp, np.nan)
    fits = feasible & (x * p_tp + y * d_tp <= o.budget)
    # Short of GPUs, the plan is the best split of the cluster; with no feasible split, the
    # smallest pair (one replica each), which the verdict never presents as a plan.
    x = np.where(fits, x, np.where(feasible, f.best_x[o.row, i, j], 1.0))
    y = np.where(fits, y, np.where(feasible, f.best_y[o.row, i, j], 1.0))
    # The chosen size's rate: read off the search's table or the sizing, bisected elsewhere.
    p_rate = rates(x, all_rows)
    if mix is None:
        u99 = o.lengths.prompt_p99 * o.lengths.uncached_share
        p99_compute = prefill.p99_prefill_ms(p_engine, o.lengths)
    else:  # a mixed member's own row: its mix's p99 uncached prompt, with its cached prefix
        u99, cached99 = mix.p99_at(o.lengths, own, everyone)
        p99_compute = prefill.prefill_ms(p_engine, u99, cached99)
    _, _, transfer_p99 = transfer_times(
        o.first, path, u99, p99_compute, p_atp.reshape(-1, 1), d_atp.reshape(-1, 1)
    )
    transfer_p99 = np.ravel(transfer_p99)
    receivers = np.maximum(y, 1.0) * d_dp
    # Short of GPUs, the cluster's split carries what fits the target with both waits.
    short = feasible & ~fits
    short_load, short_ttft = ingress_queue.short_split_load(
        pool, x, receivers, t_nodes, np.minimum(o.rate, p_rate), short
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        p_load = np.where(short, short_load, np.minimum(o.rate, p_rate))
        d_load = np.minimum(o.rate / np.maximum(y, 1.0), d_rate)
    step = decode.step_at_rate_ms(d_engine, o.lengths, d_load)
    # The join is priced at batch 1, as the pool's TTFT budget prices it, so a split loaded to
    # its prefill capacity reports the TTFT it was sized for; its transfers wait for the
    # decode receivers' NICs at the load the prefill pool passes on.
    ttft_p99 = np.where(short, short_ttft, ttft_sized)
    served = np.minimum(p_load, y * d_rate)
    gpus = x * p_tp + y * d_tp
    within = f.disagg_within[o.row]
    columns = {
        "feasible": feasible,
        "fits_cluster": fits,
        "gpus": gpus.astype(int),
        "gpus_needed_for_rate": needed,
        "max_rate_per_s": within,
        "goodput_per_gpu": within / o.budget,
        "ttft_p99_ms": np.full(len(o.row), np.nan),  # filled in once solved (`_with_ttft`)
        "tpot_p99_ms": np.where(
            feasible,
            decode.tpot_p99_at_rate_ms(
                d_engine,
                o.lengths,
                d_load,
                None if mix is None else mix.batch_at(own, everyone, (-1, 1)),
            ),
            np.nan,
        ),
        **_layout_columns("prefill_", f.layouts, i),
        **_layout_columns("decode_", f.layouts, j),
        "prefill_replicas": x.astype(int),
        "decode_replicas": y.astype(int),
        "prefill_gpus": (x * p_tp).astype(int),
        "decode_gpus": (y * d_tp).astype(int),
        "max_batch": _whole(f.decode_batch[o.row, j]),
        "transfer_ms_p99": transfer_p99,
    }
    records = _records(DisaggregatedResult, columns, _costs(o, gpus, served))
    columns = {**columns, "decode_step_ms": np.where(feasible, step, np.nan)}
    return records, columns, lambda: np.where(feasible, ttft_p99, np.nan)


def _transfer_nodes_ms(o: _Own, p_engine, path, p_atp, d_atp) -> np.ndarray:
    """Each workload's KV transfer time alone at the prompt quantiles (W, K), as its prefill
    pool prices it (`pools.transfer_nodes_ms`; a mixed member reads its own row's lengths)."""
    return np.asarray(
        transfer_nodes_ms(
            o.first, p_engine, o.lengths, path, p_atp.reshape(-1, 1), d_atp.reshape(-1, 1)
        ),
        dtype=float,
    )


def _with_ttft(records: list, ttft_p99_ms: np.ndarray) -> list:
    """The records with their p99 TTFT (NaN stands for None, as in `_records`)."""
    return [
        r.model_copy(update={"ttft_p99_ms": None if v != v else v})
        for r, v in zip(records, np.ravel(ttft_p99_ms).tolist(), strict=True)
    ]


def _engine_at(first: Resolved, layouts: dict[str, np.ndarray], index: np.ndarray):
    """The engine of each workload's chosen layout, as columns (W, 1)."""
    tp, dp, ep = (layouts[k][index].astype(float).reshape(-1, 1) for k in ("tp", "dp", "ep"))
    return engine_for(first, tp, dp, ep)


def _layout_columns(prefix: str, layouts: dict[str, np.ndarray], index: np.ndarray) -> dict:
    """tp (attention TP), dp, ep and the layout's label for the chosen candidates."""
    tp, dp, ep = (layouts[k][index].astype(int) for k in ("tp", "dp", "ep"))
    labels = [parallel.label(*v) for v in zip(tp.tolist(), dp.tolist(), ep.tolist(), strict=True)]
    return {
        f"{prefix}tp": tp,
        f"{prefix}dp": dp,
        f"{prefix}ep": ep,
        f"{prefix}layout": np.array(labels, dtype=object),
    }


def _whole(batch: np.ndarray) -> np.ndarray:
    """Whole sequences in an interpolated batch; rounding noise (364.99999...) is not a loss."""
    return np.floor(batch + 1e-6).astype(int)


def _records(model, columns: dict[str, np.ndarray], extra: list[dict]) -> list:
    """One record per workload from columns of equal length; NaN stands for None."""
    names = list(columns)
    rows = zip(*(np.asarray(c).tolist() for c in columns.values()), strict=True)
    return [
        model(**{n: None if v != v else v for n, v in zip(names, row, strict=True)}, **more)
        for row, more in zip(rows, extra, strict=True)
    ]


def _per_request(o: _Own, disagg: dict[str, np.ndarray]) -> dict[str, list]:
    """The per-request figures at the p50 prompt after prefix-cache hits, per workload.

    `disagg` holds the disaggregated columns: the sized TP degrees and operating point.
    """
    first = o.first
    model, kv_dtype = first.model, first.workload.kv_dtype
    p_tp = disagg["prefill_tp"].astype(float).reshape(-1, 1)  # attention TP: KV senders
    d_tp = disagg["decode_tp"].astype(float).reshape(-1, 1)

    def engine(role: str):
        dp, ep = (disagg[f"{role}_{k}"].astype(float).reshape(-1, 1) for k in ("dp", "ep"))
        tp = disagg[f"{role}_tp"].astype(float).reshape(-1, 1)
        return engine_for(first, tp, dp, ep)

    p_engine, d_engine = engine("prefill"), engine("decode")
    p50 = o.lengths.prompt_p50
    u50 = p50 * o.lengths.uncached_share
    prefill50 = prefill.prefill_ms(p_engine, u50, p50 - u50)
    path = o.members.path.take(np.arange(len(o.row)), (-1, 1))
    serial, layered, exposed = transfer_times(first, path, u50, prefill50, p_tp, d_tp)
    gb_per_s = path.gb_per_s(p_tp, d_tp)
    ctx = o.lengths.decode_context_mean
    # The step at the sized operating point, or at batch 1 where no size meets the SLO.
    tpot = disagg["decode_step_ms"].reshape(-1, 1)
    step = np.where(np.isnan(tpot), decode.decode_step_ms(d_engine, 1.0, ctx), tpot)
    size = kv.kv_bytes(model, kv_dtype, u50)
    per_token = kv.kv_bytes_per_token(model, kv_dtype, np.maximum(u50, 1.0))
    flat = lambda a: np.ravel(a).tolist()  # noqa: E731
    return {
        "kv_bytes_per_token": flat(per_token),
        "kv_bytes_per_request": flat(size),
        "kv_transfer_ms": flat(exposed),
        "kv_transfer_serialized_ms": flat(serial),
        "kv_transfer_layerwise_ms": flat(layered),
        "kv_transfer_path": [p.kind for p in o.members.paths],
        "kv_transfer_gb_per_s": flat(gb_per_s),
        "kv_transfer_rdma": [p.rdma for p in o.members.paths],
        "prefill_ms": flat(prefill50),
        "decode_step_ms": flat(step),
        "effective_prompt_tokens": flat(u50),
    }


# --- costs and warnings -----------------------------------------------------------------------


def _costs(o: _Own, gpus: np.ndarray, served_rate: np.ndarray) -> list[dict]:
    usd_per_hour = gpus * o.usd_per_gpu_hour
    mean_tokens = np.ravel(o.lengths.prompt_mean + o.lengths.output_mean)
    tokens_per_hour = served_rate * mean_tokens * 3600.0
    with np.errstate(divide="ignore", invalid="ignore"):
        per_million = np.where(tokens_per_hour > 0, usd_per_hour / tokens_per_hour * 1e6, np.nan)
    return [
        {
            "cost_per_million_tokens_usd": None if math.isnan(m) else m,
            "cost_per_year_usd": y,
        }
        for m, y in zip(per_million.tolist(), (usd_per_hour * HOURS_PER_YEAR).tolist(), strict=True)
    ]


def _gain_code(a: Analysis) -> float:
    """An analysis' gain as the search encodes it: inf where only disaggregation meets the
    SLOs, nan where neither does."""
    if a.gain is not None:
        return a.gain
    return np.inf if a.disaggregated.goodput_per_gpu > 0 else np.nan


def _gain(disagg: float, colo: float) -> float | None:
    """The goodput ratio where both modes serve something; None otherwise (never 0 or inf)."""
    return disagg / colo if colo > 0 and disagg > 0 else None
