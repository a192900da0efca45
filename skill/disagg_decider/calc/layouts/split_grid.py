"""The splits of a cluster the conditional layout's search prices: at most `GRID_SIZES` per
threshold and pass, whatever the cluster's size.

A (threshold, TP pair)'s best split of the budget maximises min(P(x), D(x)) over x prefill
replicas, P the prefill pool's rate (non-decreasing in x) and D the decode workers' on the
y(x) = floor((budget - x p_tp) / d_tp) replicas left (non-increasing in x: y only steps down
and a larger pool carries at least what a smaller one does). That minimum rises, then falls:
it is unimodal. So where a cluster allows more than `GRID_SIZES` prefill sizes, the search
prices `BRACKET_SIZES` of them spread over 1 .. most, keeps each threshold's best and the two
sizes beside it, and prices that bracket again (`refine`), until the sizes around each best
are whole neighbours: each pass leaves about 2 / 15 of the bracket, so 100,000 GPUs take
six. The best found is the one trying every x finds (the first maximum: a
size left of the bracket is below its left end, which is below the best, and one right of
it is no higher than its right end), at a cost that grows with the log of the cluster.
A cluster with at most `GRID_SIZES` sizes is priced at every one in one pass, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

GRID_SIZES = 64  # a cluster with at most this many prefill sizes is priced at every one
BRACKET_SIZES = 16  # sizes a bracket is priced at per pass on a larger one


def most_prefill(budget: float, p_tp: int, d_tp: int) -> int:
    """The most prefill replicas a split can have and keep one decode replica."""
    return max(int((budget - d_tp) // p_tp), 0)


def decode_left(budget: float, x: np.ndarray, p_tp: int, d_tp: int) -> np.ndarray:
    """The decode replicas the rest of the budget holds beside x prefill replicas."""
    return np.floor((budget - x * p_tp) / d_tp)


def _spread(lo: int, hi: int, most: int = BRACKET_SIZES) -> np.ndarray:
    """Every whole size in lo .. hi if at most `most`, else `BRACKET_SIZES` of them spread
    evenly, both ends kept."""
    if hi - lo + 1 <= most:
        return np.arange(lo, hi + 1, dtype=float)
    return np.unique(np.round(np.linspace(lo, hi, BRACKET_SIZES)))


def _rows(grids: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-threshold size lists as one (n, X) array padded with 1, and which entries are real."""
    widest = max(g.size for g in grids)
    x = np.ones((len(grids), widest))
    used = np.zeros((len(grids), widest), dtype=bool)
    for t, g in enumerate(grids):
        x[t, : g.size], used[t, : g.size] = g, True
    return x, used


def prices_every_size(budget: float, p_tp: int, d_tp: int) -> bool:
    """Whether `first_grid` prices every split the budget allows: then `refine` settles on
    the first pass (each best's whole neighbours are priced), so it need not be asked."""
    return most_prefill(budget, p_tp, d_tp) <= GRID_SIZES


def first_grid(budget: float, p_tp: int, d_tp: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first pass's sizes for n thresholds: (x (n, X), used (n, X)); X = 0 where no split
    holds a replica of each role."""
    most = most_prefill(budget, p_tp, d_tp)
    if most < 1:
        return np.zeros((n, 0)), np.zeros((n, 0), dtype=bool)
    grid = _spread(1, most, GRID_SIZES)
    x = np.empty((n, grid.size))
    x[...] = grid  # the grid on every threshold's row
    return x, np.ones((n, grid.size), dtype=bool)


def refine(
    x: np.ndarray, used: np.ndarray, total: np.ndarray, gap: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The next pass's sizes around each threshold's best (first maximum of `total` over its
    used sizes), as (x, used), and whether every best already has its whole neighbours priced
    (then the next pass would find the same bests).

    `gap` (P - D at each size, optional) places most of a bracket's sizes around where P and D
    cross, read off a line through the priced sizes (`_crossing`): on a large cluster both are
    nearly straight, so the next bracket is a few sizes wide. The bracket's ends are always
    priced, so the best stays inside it whatever the estimate.
    """
    done = _all_settled(x, used, total)
    if done is not None:
        return (*done, True)
    grids, settled = [], True
    for t in range(x.shape[0]):
        sizes, values = x[t, used[t]], total[t, used[t]]
        if not sizes.size or values.max() <= 0:
            grids.append(sizes[:1])
            continue
        j = int(values.argmax())
        near = slice(max(j - 1, 0), j + 2)
        lo, hi = int(sizes[near][0]), int(sizes[near][-1])
        if hi - lo <= 2 and np.all(np.diff(sizes[near]) <= 1):
            grids.append(sizes[near])
            continue
        settled = False
        at = None if gap is None else _crossing(sizes[near], gap[t, used[t]][near])
        grids.append(_spread(lo, hi) if at is None else _around(lo, hi, at))
    return (*_rows(grids), settled)


def _all_settled(
    x: np.ndarray, used: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """`refine`'s (x, used) where every threshold's best already has its whole neighbours
    priced (the last pass of every search, and the only one on a cluster of at most
    `GRID_SIZES` sizes), in a few array operations over all thresholds instead of a dozen
    per threshold; None where some best does not (or the used sizes are not each row's
    first ones, as every pass leaves them): then `refine`'s loop decides.

    The same rows as the loop's: a row with no size priced keeps none, one whose best is
    not above 0 its first size, any other the best and the sizes beside it."""
    n, width = x.shape
    if n == 0 or width == 0 or (used[:, 1:] > used[:, :-1]).any():
        return None
    count = used.sum(axis=1)
    rows = np.arange(n)
    values = np.where(used, total, -np.inf)
    best = values.argmax(axis=1)
    dead = (count == 0) | (values[rows, best] <= 0)
    start = np.where(dead, 0, np.maximum(best - 1, 0))
    stop = np.where(dead, np.minimum(count, 1), np.minimum(best + 2, count))
    at = np.minimum(start[:, None] + np.arange(3), width - 1)
    near = x[rows[:, None], at]
    inside = np.arange(3) < (stop - start)[:, None]
    steps = np.diff(near, axis=1)
    wide = (near[rows, stop - start - 1] - near[:, 0] > 2) | ((steps > 1) & inside[:, 1:]).any(
        axis=1
    )
    if (wide & ~dead).any():
        return None
    widest = int((stop - start).max())
    return np.where(inside, near, 1.0)[:, :widest], inside[:, :widest]


def _crossing(sizes: np.ndarray, gap: np.ndarray) -> float | None:
    """Where a line between two neighbouring priced sizes takes P - D from <= 0 to > 0."""
    for k in range(sizes.size - 1):
        g0, g1 = gap[k], gap[k + 1]
        if g0 <= 0 < g1 and np.isfinite(g0) and np.isfinite(g1):
            return float(sizes[k] + (sizes[k + 1] - sizes[k]) * (-g0) / (g1 - g0))
    return None


def _around(lo: int, hi: int, at: float) -> np.ndarray:
    """Sizes over [lo, hi]: a third of `BRACKET_SIZES` (at least 4) spread evenly, ends
    included, so every pass shrinks the bracket whatever the estimate; the rest close around
    `at`, 1% of the bracket apart (whole neighbours where it is narrow enough)."""
    if hi - lo + 1 <= BRACKET_SIZES:
        return np.arange(lo, hi + 1, dtype=float)
    even = max(4, BRACKET_SIZES // 3)  # a bracket of W > 3 then shrinks to <= 2 ceil(W / 3)
    inner = max(BRACKET_SIZES - even, 1)
    step = max(1.0, (hi - lo) / 100.0)
    start = np.clip(round(at - step * (inner - 1) / 2.0), lo, hi)
    near = np.clip(np.round(start + step * np.arange(inner)), lo, hi)
    return np.unique(np.concatenate((np.round(np.linspace(lo, hi, even)), near)))


def best_sizes(
    price: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], most: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(value, size) of each entry's first best size in 1 .. most[e], for a goodput that rises
    then falls with the size (`refine`'s condition); value <= 0 where nothing is served.

    `price(sizes)` takes sizes (E, G) and returns (goodput, gap) there, gap the rising side's
    cap less the falling side's (<= 0 before they cross). Entries with at most `GRID_SIZES`
    sizes are priced at every one; larger ones in brackets narrowed pass by pass.
    """
    most = np.asarray(most, dtype=int).ravel()
    x, used = _rows([_spread(1, max(int(m), 1), GRID_SIZES) for m in most])
    used &= most[:, None] >= 1
    while True:
        total, gap = price(x)
        total = np.where(used, total, -np.inf)
        x_next, used_next, settled = refine(x, used, total, np.where(used, gap, np.nan))
        if settled:
            break
        x, used = x_next, used_next
    k = total.argmax(axis=1)
    at = np.arange(most.size)
    return total[at, k], x[at, k]
