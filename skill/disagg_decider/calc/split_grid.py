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


def first_grid(budget: float, p_tp: int, d_tp: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first pass's sizes for n thresholds: (x (n, X), used (n, X)); X = 0 where no split
    holds a replica of each role."""
    most = most_prefill(budget, p_tp, d_tp)
    if most < 1:
        return np.zeros((n, 0)), np.zeros((n, 0), dtype=bool)
    grid = _spread(1, most, GRID_SIZES)
    return np.broadcast_to(grid, (n, grid.size)).copy(), np.ones((n, grid.size), dtype=bool)


def refine(
    x: np.ndarray, used: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The next pass's sizes around each threshold's best (first maximum of `total` over its
    used sizes), as (x, used), and whether every best already has its whole neighbours priced
    (then the next pass would find the same bests)."""
    grids, settled = [], True
    for t in range(x.shape[0]):
        sizes, values = x[t, used[t]], total[t, used[t]]
        if not sizes.size or values.max() <= 0:
            grids.append(sizes[:1])
            continue
        j = int(values.argmax())
        lo = int(sizes[max(j - 1, 0)])
        hi = int(sizes[min(j + 1, sizes.size - 1)])
        if hi - lo <= 2 and np.all(np.diff(sizes[max(j - 1, 0) : j + 2]) <= 1):
            grids.append(sizes[max(j - 1, 0) : j + 2])
            continue
        settled = False
        grids.append(_spread(lo, hi))
    return (*_rows(grids), settled)
