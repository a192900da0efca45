"""Interactivity (output tokens/s per user = 1000 / TPOT ms): grids, Pareto points, the band.

The field publishes disaggregation results as throughput per GPU against tokens/s per user and
compares the layouts at the same interactivity. This module holds the arithmetic on such curves
that both `decide frontier` (`frontier.py`, a fine sweep) and the verdict's
`interactivity_band` (a coarse sweep, `band_curves`) use: no physics, only the calculator's
numbers at each TPOT target set side by side.

The band is where the always-disaggregated split serves at least the rulebook's `min_gain`
times the colocated goodput per GPU (the comparison rule `gain-above-minimum` makes at one
target), including where only the split meets the targets. Its edges are where the two fronts
cross: each front is read log-linearly in tokens/s per user between grid points, so the gain is
exactly the margin at an edge.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import cache

import numpy as np

from disagg_decider.calc.result import Analysis, InteractivityBand
from disagg_decider.workload import Resolved

DEFAULT_LOW_TPS_USER = 10.0
DEFAULT_HIGH_TPS_USER = 400.0
DEFAULT_POINTS = 16
# The verdict's band is read off every third point of the default grid (6 points, a factor of
# about 2.1 apart) plus the workload's own target: about 2 decisions' worth of CPU
# (benchmarks/decide_cpu.py), where the 16-point grid would cost 5.
BAND_POINTS = 6
DEFAULT_MARGIN = 1.1  # the rulebook's min_gain where a rulebook does not define it


def tps_grid(low: float, high: float, points: int) -> np.ndarray:
    """`points` tokens/s-per-user values, log-spaced from `low` to `high`, ascending."""
    if points == 1:
        return np.array([float(low)])
    return np.geomspace(low, high, points)


@cache
def band_grid() -> np.ndarray:
    """The verdict's coarse grid: every third point of the default frontier grid. Built once
    (read-only): `np.geomspace` costs about half a millisecond, and every decision reads it."""
    fine = tps_grid(DEFAULT_LOW_TPS_USER, DEFAULT_HIGH_TPS_USER, DEFAULT_POINTS)
    grid = fine[:: (DEFAULT_POINTS - 1) // (BAND_POINTS - 1)].copy()
    grid.setflags(write=False)
    return grid


def at_tpot(
    r: Resolved, tpot_ms: float, ttft_ms: float | None = None, basis: str | None = None
) -> Resolved:
    """The resolved workload with other targets (and SLO basis); catalog entries are shared,
    so the variants are searched together."""
    slo: dict = {"tpot_ms": float(tpot_ms)}
    if ttft_ms is not None:
        slo["ttft_ms"] = float(ttft_ms)
    if basis is not None:
        slo["basis"] = basis
    w = r.workload.model_copy(update={"slo": r.workload.slo.model_copy(update=slo)})
    return dataclasses.replace(r, workload=w)


def split_wins(colocated: float, split: float, margin: float) -> bool:
    """The split serves at least `margin` times colocation, or it alone meets the targets."""
    if not split > 0:
        return False
    return not colocated > 0 or split >= margin * colocated


def pareto_mask(tps_user: Sequence[float], per_gpu: Sequence[float]) -> list[bool]:
    """Points no other point matches or beats on both axes (and serving something).

    A point is dropped when a point at higher interactivity serves at least as much per GPU:
    that layout also meets the looser target. What is left falls as interactivity rises.
    """
    order = sorted(range(len(tps_user)), key=lambda i: tps_user[i], reverse=True)
    keep = [False] * len(tps_user)
    best = 0.0
    for i in order:
        if per_gpu[i] > best:
            keep[i] = True
            best = per_gpu[i]
    return keep


def crossing(x0: float, x1: float, c0: float, c1: float, s0: float, s1: float, margin: float):
    """Where split / colocated = margin between two grid points, fronts log-linear in log x.

    All four values must be positive; returns None when the ratio does not cross there.
    """
    f0 = math.log(s0 / c0) - math.log(margin)
    f1 = math.log(s1 / c1) - math.log(margin)
    if f0 == f1 or ((f0 > 0) == (f1 > 0) and f0 != 0 and f1 != 0):
        return None
    t = f0 / (f0 - f1)
    return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))


def front_at(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """A front read log-linearly at x between its grid points (both neighbours positive)."""
    lx = np.log(np.asarray(xs, dtype=float))
    with np.errstate(divide="ignore"):  # a point that serves nothing reads as -inf
        ly = np.log(np.asarray(ys, dtype=float))
    return float(np.exp(np.interp(math.log(x), lx, ly)))


def band_intervals(
    tps_user: Sequence[float], colocated: Sequence[float], split: Sequence[float], margin: float
) -> list[tuple[float, float, bool, bool]]:
    """Every interval where the split wins: (low, high, reaches grid low, reaches grid high).

    `tps_user` ascending. An edge between two points where both fronts serve is their crossing;
    where a front stops serving, the edge is the last point the split was seen to win.
    """
    n = len(tps_user)
    wins = [split_wins(c, s, margin) for c, s in zip(colocated, split, strict=True)]
    out = []
    i = 0
    while i < n:
        if not wins[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and wins[j + 1]:
            j += 1
        low = _edge(tps_user, colocated, split, margin, i - 1, i) if i > 0 else tps_user[0]
        high = _edge(tps_user, colocated, split, margin, j, j + 1) if j < n - 1 else tps_user[-1]
        out.append((low, high, i == 0, j == n - 1))
        i = j + 1
    return out


def _edge(xs, cs, ss, margin: float, a: int, b: int) -> float:
    """The band's edge between points a and b (one wins, the other does not)."""
    win_side = b if split_wins(cs[b], ss[b], margin) else a
    if min(cs[a], cs[b], ss[a], ss[b]) > 0:
        x = crossing(xs[a], xs[b], cs[a], cs[b], ss[a], ss[b], margin)
        if x is not None:
            return x
    return xs[win_side]


def band_from_curve(
    tps_user: Sequence[float],
    colocated: Sequence[float],
    split: Sequence[float],
    margin: float,
    target_tps_user: float,
    basis: str,
) -> InteractivityBand | None:
    """The band around the target: the interval holding it, else the nearest one; None if the
    split wins nowhere on the grid. The target must be one of the points."""
    intervals = band_intervals(tps_user, colocated, split, margin)
    if not intervals:
        return None
    k = list(tps_user).index(target_tps_user)
    inside = split_wins(colocated[k], split[k], margin)

    def distance(iv) -> float:
        low, high = iv[0], iv[1]
        if low <= target_tps_user <= high:
            return 0.0
        return min(abs(math.log(target_tps_user / low)), abs(math.log(target_tps_user / high)))

    low, high, at_low, at_high = min(intervals, key=distance)
    return InteractivityBand(
        low_tokens_per_s_per_user=low,
        high_tokens_per_s_per_user=high,
        reaches_grid_low=at_low,
        reaches_grid_high=at_high,
        target_tokens_per_s_per_user=target_tps_user,
        target_inside=inside,
        margin=margin,
        grid_low_tokens_per_s_per_user=float(min(tps_user)),
        grid_high_tokens_per_s_per_user=float(max(tps_user)),
        grid_points=len(tps_user),
        basis=basis,
    )


@dataclasses.dataclass(frozen=True)
class GainCurve:
    """Both modes' goodput per GPU at each tokens/s per user (ascending; own target merged)."""

    tps_user: list[float]
    colocated: list[float]
    split: list[float]
    target_tps_user: float
    basis: str

    def band(self, margin: float) -> InteractivityBand | None:
        return band_from_curve(
            self.tps_user, self.colocated, self.split, margin, self.target_tps_user, self.basis
        )


@cache
def band_tpot_ms() -> tuple[float, ...]:
    """The TPOT targets (ms) of the band's grid, as `band_curves` sets them."""
    return tuple(float(1e3 / u) for u in band_grid())


def band_curves(
    resolved: Sequence[Resolved],
    analyses: Sequence[Analysis],
    searched: Sequence[list[tuple[float, float]] | None] | None = None,
) -> list[GainCurve]:
    """Each workload's two fronts on the coarse grid, its own analysis at its own target.

    On the p99 basis the grid's targets go through the calculator's search alone
    (`calc.layouts.search.search`, as the crossover's prompt grid does): its goodput within the
    budget per GPU is the verdict's, without sizing pools for the rate, the report-only p99s or the
    conditional layout. `searched[i]`, where given, holds workload i's grid points already
    searched with its own decision (`compare.analyze_banded`, `band_tpot_ms`); the rest are
    searched here. Static-basis and heterogeneous workloads take the two-mode analysis
    (`analyze_many(modes_only=True)`).
    """
    grid = band_grid()
    searched = searched if searched is not None else [None] * len(resolved)
    todo = [i for i, rows in enumerate(searched) if rows is None]
    variants = [at_tpot(resolved[i], 1e3 / u) for i in todo for u in grid]
    found = _served_per_gpu(variants)
    served: list[list[tuple[float, float]]] = [rows or [] for rows in searched]
    for n, i in enumerate(todo):
        served[i] = found[n * len(grid) : (n + 1) * len(grid)]
    curves = []
    for i, (r, own) in enumerate(zip(resolved, analyses, strict=True)):
        rows = served[i]
        target = 1e3 / r.workload.slo.tpot_ms
        mine = (_served(own.colocated), _served(own.disaggregated))
        points = sorted(
            [(float(u), x) for u, x in zip(grid, rows, strict=True) if not math.isclose(u, target)]
            + [(target, mine)],
            key=lambda p: p[0],
        )
        curves.append(
            GainCurve(
                tps_user=[u for u, _ in points],
                colocated=[x[0] for _, x in points],
                split=[x[1] for _, x in points],
                target_tps_user=target,
                basis=r.workload.slo.basis,
            )
        )
    return curves


def _served_per_gpu(variants: Sequence[Resolved]) -> list[tuple[float, float]]:
    """(colocated, always-disaggregated) goodput per GPU of each workload; 0 where it misses."""
    from disagg_decider.calc.compare import BLOCK_WORKLOADS, analyze_many
    from disagg_decider.calc.layouts.layout_choices import group_key
    from disagg_decider.calc.layouts.search import members_of, search

    out: list[tuple[float, float] | None] = [None] * len(variants)
    slow = [
        i
        for i, r in enumerate(variants)
        if r.workload.cluster.heterogeneous or r.workload.slo.basis != "p99-under-load"
    ]
    picked = [variants[i] for i in slow]
    for i, v, a in zip(slow, picked, _two_modes(picked, analyze_many), strict=True):
        a = on_basis(v, a)
        out[i] = (_served(a.colocated), _served(a.disaggregated))
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(variants):
        if out[i] is None:
            groups.setdefault(group_key(r), []).append(i)
    for members in groups.values():
        for start in range(0, len(members), BLOCK_WORKLOADS):
            block = members[start : start + BLOCK_WORKLOADS]
            m = members_of([variants[i] for i in block])
            found = search(m.first, m.rows([np.array([p]) for p in m.prompt_p50]), m.layouts)
            for k, i in enumerate(block):
                gpus = float(m.budget[k])
                out[i] = (float(found.colo_within[k]) / gpus, float(found.disagg_within[k]) / gpus)
    return out  # type: ignore[return-value]


def _two_modes(variants: Sequence[Resolved], analyze_many) -> list[Analysis]:
    """Both modes of each workload; heterogeneous ones with all their pools searched at once.

    `hetero.analyze_heterogeneous` searches a workload's two pools with the function it is
    given: here one that hands back pools already searched together (every target's prefill
    and decode pools in one `analyze_many` call) instead of two calls per target.
    """
    from disagg_decider.calc.modes import hetero

    two = [v.workload.cluster.heterogeneous for v in variants]
    pools = [
        hetero.pool_resolved(v, role)
        for v, h in zip(variants, two, strict=True)
        if h
        for role in hetero.ROLES
    ]
    searched = dict(zip(map(_pool_key, pools), analyze_many(pools, modes_only=True), strict=True))

    def lookup(rs: Sequence[Resolved], modes_only: bool = True) -> list[Analysis]:
        return [searched[_pool_key(x)] for x in rs]

    one = [v for v, h in zip(variants, two, strict=True) if not h]
    plain = iter(analyze_many(one, modes_only=True))
    return [
        hetero.analyze_heterogeneous(v, lookup) if h else next(plain)
        for v, h in zip(variants, two, strict=True)
    ]


def _pool_key(r: Resolved) -> tuple[str, str]:
    return (r.gpu.id, r.workload.model_dump_json())


def _served(mode) -> float:
    return float(mode.goodput_per_gpu) if mode.feasible else 0.0


def band_sentence(band: InteractivityBand | None, target_tps_user: float) -> str:
    """Where the workload's target sits against the band, in one sentence for the summary."""
    if band is None:
        return (
            f"Swept over TPOT targets ({DEFAULT_LOW_TPS_USER:g}-{DEFAULT_HIGH_TPS_USER:g} "
            "tokens/s per user), the split never serves the rulebook's min_gain over "
            f"colocation; your {target_tps_user:.0f} tokens/s per user is no exception."
        )
    low = f"{band.low_tokens_per_s_per_user:.0f}"
    high = f"{band.high_tokens_per_s_per_user:.0f}"
    low = f"{low} or fewer" if band.reaches_grid_low else low
    high = f"{high} or more" if band.reaches_grid_high else high
    if band.target_inside:
        where = "inside"
    elif target_tps_user < band.low_tokens_per_s_per_user:
        where = "below it"
    else:
        where = "above it"
    return (
        f"The split wins by {band.margin:g}x or more from {low} to {high} tokens/s per user "
        f"(1000 / TPOT ms); your {target_tps_user:.0f} is {where}."
    )


def on_basis(r: Resolved, a: Analysis) -> Analysis:
    """`slo.basis: static` re-sizes both modes as static-batch planners do (calc/static.py)."""
    if r.workload.slo.basis != "static":
        return a
    from disagg_decider.calc.static import static_analysis

    return static_analysis(r, a)
