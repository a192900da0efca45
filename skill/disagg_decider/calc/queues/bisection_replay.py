"""A bisection on [0, top] replayed with fewer exact tests: the same answer, found faster.

`load_bisection` halves a load bracket 16 times, testing P(miss) > 1% at each midpoint. Every
midpoint it can visit belongs to one fixed set of floats: the grid G of the bisection tree on
[0, top] (`bisection_grid`, each value computed exactly as the loop computes it, (lo + hi) / 2
in floats), whose leaves partition [0, top] as G[0] = 0 < G[1] < ... < G[2^n] = top. With a test
that is monotone in the load, the bisection returns G[k] for the one k where G[k] passes (or k
is 0) and G[k + 1] misses (or is `top`); which midpoints it visited on the way does not matter.
(Monotone as computed, in floats: the load test is in exact arithmetic, and rounding could
only break that where P lies within a few ulps of the tail at two neighbouring grid points;
no answer differs over the bisections `benchmarks/replay_rounds.py` and `tests/test_replay.py`
capture.)

So any search over the indices of G that only ever tests grid points finds the same k. Here:
two grid points per round, around an estimate of the crossing (a regula falsi on
log((P - P0) / (tail - P0)), P0 the miss probability at no load, with the Illinois correction;
from the second round the secant through the last round's two points) and half the estimate's
last move beyond it, so a secant walking up one side lands a point past the crossing. On the
examples' single-pool bisections that is 3-5 rounds (median 4) instead of 16 tests. Entries
still open after `ESTIMATED_ROUNDS` rounds halve their index bracket, so every search ends.

Only for one or two entries in plain floats (`load_bisection.REPLAY_ENTRIES`): a round lasts
as long as the slowest entry's search and its bookkeeping is per entry, so on three or more the
16-step loop is cheaper; and in numpy each round's bookkeeping cost as many calls as the tests
it saved (measured: a vectorised replay made decisions slower).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from functools import cache

import numpy as np

ESTIMATED_ROUNDS = 12  # rounds of estimates before plain halving of the index bracket
# The estimates' log ratio is clamped to +-this, so P at or below P0, or infinite, still gives
# a usable secant; the tests compare P itself.
LOG_CLAMP = 50.0


@cache
def bisection_grid(top: float, steps: int) -> np.ndarray:
    """Every value `lo` or `hi` of a `steps`-step bisection on [0, top] can take, ascending.

    Built level by level as the bisection computes its midpoints, so each is the same float.
    Leaf k's bracket is (G[k], G[k + 1]); the last entry is `top` itself.
    """
    lo, hi = np.zeros(1), np.full(1, float(top))
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        lo, hi = np.stack([lo, mid], axis=1).ravel(), np.stack([mid, hi], axis=1).ravel()
    grid = np.append(lo, float(top))
    grid.setflags(write=False)
    return grid


def replay(
    probability: Callable[[list[float]], list[float]],
    grid: list[float],
    p_low: list[float],
    p_top: list[float],
    tail: float,
) -> list[float]:
    """The bisection's answer G[k] per entry (`grid`: G as floats), for a test "P > tail"
    increasing along the grid.

    `probability` takes every entry's first load, then every entry's second, and gives P at
    each. G[0] counts as passing and G[-1] as missing, as the bisection takes them; `p_low`
    and `p_top` (P at no load and at the top) only seed the first estimate: nothing but an
    exact test at a grid point decides a step.
    """
    m, last = len(p_low), len(grid) - 1
    ka, kb = [0] * m, [last] * m
    p0 = [_offset(p, tail) for p in p_low]
    la = [min(_log_ratio(p, tail, o), 0.0) for p, o in zip(p_low, p0, strict=True)]
    lb = [max(_log_ratio(p, tail, o), 0.0) for p, o in zip(p_top, p0, strict=True)]
    stale = [0] * m
    pairs: list[tuple[float, float, float, float] | None] = [None] * m
    prev: list[float | None] = [None] * m
    rounds = 0
    while any(b - a > 1 for a, b in zip(ka, kb, strict=True)):
        rounds += 1
        points: list[tuple[int, int]] = []
        for i in range(m):
            a, b = ka[i], kb[i]
            if b - a <= 1:
                points.append((a, a))
                continue
            if rounds > ESTIMATED_ROUNDS:  # halving: G[j - 1] and G[j] around the middle
                j = (a + b + 1) // 2
                x = grid[j]
            else:
                frac = la[i] / (la[i] - lb[i]) if la[i] != lb[i] else 0.5
                frac = frac if math.isfinite(frac) else 0.5
                x = grid[a] + min(max(frac, 0.0), 1.0) * (grid[b] - grid[a])
                if pairs[i] is not None:  # the secant through the last round's two points
                    x1, l1, x2, l2 = pairs[i]
                    if (l2 - l1) * (x2 - x1) > 0:
                        secant = x2 - l2 * (x2 - x1) / (l2 - l1)
                        if grid[a] < secant < grid[b]:
                            x = secant
                j = bisect.bisect_left(grid, x)
            beyond = x if prev[i] is None else x + 0.5 * (x - prev[i])
            if rounds > ESTIMATED_ROUNDS:
                beyond = x
            prev[i] = x
            ahead = beyond >= x
            first = j - 1 if ahead else j
            j2 = bisect.bisect_left(grid, beyond)
            second = max(j2, first + 1) if ahead else min(j2 - 1, first - 1)
            hi_k = max(b - 1, a + 1)
            points.append((min(max(first, a + 1), hi_k), min(max(second, a + 1), hi_k)))
        # Every entry's first point, then every entry's second.
        p = probability([grid[f] for f, _ in points] + [grid[s] for _, s in points])
        for i, (first, second) in enumerate(points):
            a0, b0 = ka[i], kb[i]
            if b0 - a0 <= 1:
                continue
            pairs[i] = (
                grid[first],
                _log_ratio(p[i], tail, p0[i]),
                grid[second],
                _log_ratio(p[m + i], tail, p0[i]),
            )
            for k, pk in ((first, p[i]), (second, p[m + i])):
                lp = _log_ratio(pk, tail, p0[i])
                if pk > tail:
                    if k < kb[i]:
                        kb[i], lb[i] = k, max(lp, 0.0)
                elif k > ka[i]:
                    ka[i], la[i] = k, min(lp, 0.0)
            low, top = ka[i] != a0, kb[i] != b0
            if low and not top:
                stale[i] = max(stale[i], 0) + 1
            elif top and not low:
                stale[i] = min(stale[i], 0) - 1
            elif low and top:
                stale[i] = 0
            if stale[i] >= 2:
                lb[i] /= 2.0
            elif stale[i] <= -2:
                la[i] /= 2.0
    return [grid[a] for a in ka]


def _log_ratio(p: float, tail: float, p0: float) -> float:
    """log((P - P0) / (tail - P0)), clamped: the estimates' axis, nothing exact is read off it.

    P0 (the miss probability at no load, `_offset`) is subtracted: a pool that misses 0.6%
    idle spends most of the bracket near 0.6% and then climbs, and the climb is what is close
    to exponential in the load. P at or below P0 (or nan) reads as the lowest value."""
    if not p - p0 > 0.0:
        return -LOG_CLAMP
    return min(max(math.log((p - p0) / (tail - p0)), -LOG_CLAMP), LOG_CLAMP)


def _offset(p_low: float, tail: float) -> float:
    """The P0 `_log_ratio` subtracts: P near no load where it is a finite share of the tail."""
    return p_low if 0.0 <= p_low < tail * (1.0 - 1e-6) else 0.0
