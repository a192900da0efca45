"""Whether a p99 of wait + service-side time meets a limit, without always solving for it.

`colocated_load.rate_within_targets` tries 16 loads per row in each of three rounds and keeps only
whether each meets the TTFT target. `queueing.p99_of_sum_ms` bisects the time 16 times to find
the p99; the answer it returns is the final upper end `hi` of a bracket [lo, hi] whose ends
only move inwards (lo never falls, hi never rises: each midpoint lies between them). So for any
test `within(x)` that is monotone (true up to some x, false above it), after any step:

- `within(hi)` true  -> the final hi is <= this hi, so `within(final)` is true;
- `within(lo)` false -> the final hi is >= this lo, so `within(final)` is false.

Rows decided that way leave the bisection; the rest run all 16 steps and are tested on the
final hi, exactly as before. Every step a row takes is the same arithmetic on the same values
as in `p99_of_sum_ms`, so the answer is the one `within(p99_of_sum_ms(...))` gives, bit for bit
(the golden outputs check it); only the rows' bisections are cut short.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.queues.array_helpers import (
    broadcast,
    broadcast_flat,
    broadcast_shape,
    shape_of,
)
from disagg_decider.calc.queues.load_bisection import BISECTIONS
from disagg_decider.calc.queues.normal_quantiles import (
    FEW_ROWS,
    P99_TAIL,
    NodeGrid,
    Row,
    finite_ascending,
    weighted_exp_sum,
)
from disagg_decider.calc.queues.queueing import node_quantile, wait_tail

CHECK_EVERY = 2  # bisection steps between checks: a check costs about half a step

Within = Callable[[np.ndarray, np.ndarray], np.ndarray]


@np.errstate(divide="ignore", invalid="ignore")
def p99_of_sum_within(rate_per_ms, servers, mean_service_ms, scv, nodes_ms, within: Within):
    """`within(p99_of_sum_ms(...).ravel(), rows)` per flat entry, bisecting only undecided rows.

    `within(x, rows)` tests values `x` of the flat entries `rows`; it must be monotone in x
    (true up to a limit, false above it: e.g. "a non-decreasing function of x <= target").
    Entries whose p99 is infinite (saturated pool) are tested at inf, as `p99_of_sum_ms`
    reports them.
    """
    c_wait, theta = wait_tail(rate_per_ms, servers, mean_service_ms, scv)
    s = np.asarray(nodes_ms, dtype=float)
    shape = broadcast_shape(shape_of(c_wait), s.shape[:-1])
    k = s.shape[-1]

    def flat(a) -> np.ndarray:
        return broadcast_flat(a, shape)

    c_wait, theta = flat(c_wait), flat(theta)
    # The bracket exactly as `p99_of_sum_ms` starts it.
    lo = flat(node_quantile(s, P99_TAIL)).copy()
    w995 = np.where(theta > 0, np.log(np.maximum(c_wait / 0.005, 1.0)) / theta, np.inf)
    hi = flat(node_quantile(s, 0.005)) + w995
    hi = np.where(np.isfinite(hi), hi, lo)

    ok = np.zeros(lo.size, dtype=bool)
    live = theta > 0
    dead = (~live).nonzero()[0]  # `np.flatnonzero` of a flat mask, without its Python calls
    if dead.size:
        ok[dead] = within(np.full(dead.size, np.inf), dead)
    rows = live.nonzero()[0]
    if not rows.size:
        return ok
    s_rows = broadcast(s, (*shape, k)).reshape(-1, k)[rows]
    lo, hi, c_wait = lo[rows], hi[rows], c_wait[rows]
    neg_theta = -theta[rows][:, None]
    no_wait = 1.0 - c_wait  # the subtraction every step made, made once per row
    grid: NodeGrid | None = None  # laid out for the rows left, when next needed
    step = 0
    while step < BISECTIONS:
        if grid is None:
            if rows.size <= FEW_ROWS and _in_floats(s_rows, lo, hi):
                rows_left = _Rows(rows, lo, hi, c_wait, no_wait, neg_theta, s_rows)
                return _finish_in_floats(rows_left, step, within, ok)
            grid = NodeGrid(s_rows, (rows.size,))
        step += 1
        mid = (lo + hi) / 2.0
        tail_wait = weighted_exp_sum(neg_theta * np.maximum(mid[:, None] - s_rows, 0.0))
        over = no_wait * grid.exceed(mid) + c_wait * tail_wait > P99_TAIL
        lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
        if step % CHECK_EVERY or step == BISECTIONS:
            continue
        keep = _settle(within, ok, rows, lo, hi)
        if keep is None:
            continue
        if not keep.any():
            return ok
        rows, lo, hi, c_wait = rows[keep], lo[keep], hi[keep], c_wait[keep]
        s_rows, neg_theta, no_wait = s_rows[keep], neg_theta[keep], no_wait[keep]
        grid = None
    ok[rows] = within(hi, rows)
    return ok


def _settle(
    within: Within, ok: np.ndarray, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray | None:
    """One check of the bracket, shared by the array and the float loops: rows whose upper end
    already meets the target pass (set in `ok`), rows whose lower end misses it fail (stay
    False). Returns which rows to keep bisecting, or None when no row was decided."""
    passed = within(hi, rows)
    failed = ~within(lo, rows)
    done = passed | failed
    if not done.any():
        return None
    ok[rows[passed]] = True
    return ~done


def _in_floats(s_rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether `_finish_in_floats` may take these rows: finite ascending nodes
    (`normal_quantiles.Row`) and a finite bracket, so every midpoint is finite or +inf, where
    `Row.exceed` is the grid's."""
    return finite_ascending(s_rows) and bool(np.isfinite(lo).all() & np.isfinite(hi).all())


@dataclass
class _Rows:
    """The rows still bisected, as the array loop holds them."""

    rows: np.ndarray  # their flat entries
    lo: np.ndarray
    hi: np.ndarray
    c_wait: np.ndarray
    no_wait: np.ndarray
    neg_theta: np.ndarray  # (n, 1)
    s_rows: np.ndarray  # (n, 25)


def _finish_in_floats(left: _Rows, steps_done: int, within: Within, ok: np.ndarray) -> np.ndarray:
    """The array loop's remaining steps for a few rows, their scalar arithmetic in floats.

    Each step is the array loop's on each row: the tail sum over the nodes still numpy's (the
    same subtraction, clamp, product, exp and pairwise sum on the same rows), P(S' > mid) by
    `normal_quantiles.Row` (the grid's bits), then the same products, sum and comparison in floats;
    the checks call `within` on the same brackets. So every row ends where the array loop ends it.
    """
    rows, s_rows, neg_theta = left.rows, left.s_rows, left.neg_theta
    nodes = [Row(row) for row in s_rows.tolist()]
    lo, hi = left.lo.tolist(), left.hi.tolist()
    c_wait, no_wait = left.c_wait.tolist(), left.no_wait.tolist()
    for step in range(steps_done + 1, BISECTIONS + 1):
        mid = [(a + b) / 2.0 for a, b in zip(lo, hi, strict=True)]
        gap = np.subtract(np.array(mid)[:, None], s_rows)
        np.maximum(gap, 0.0, out=gap)
        np.multiply(neg_theta, gap, out=gap)
        tail_wait = weighted_exp_sum(gap).tolist()
        for i, row in enumerate(nodes):
            if no_wait[i] * row.exceed(mid[i]) + c_wait[i] * tail_wait[i] > P99_TAIL:
                lo[i] = mid[i]
            else:
                hi[i] = mid[i]
        if step % CHECK_EVERY or step == BISECTIONS:
            continue
        keep = _settle(within, ok, rows, np.array(lo), np.array(hi))
        if keep is None:
            continue
        if not keep.any():
            return ok
        rows, s_rows, neg_theta = rows[keep], s_rows[keep], neg_theta[keep]
        kept = keep.tolist()
        nodes = [v for v, k in zip(nodes, kept, strict=True) if k]
        lo = [v for v, k in zip(lo, kept, strict=True) if k]
        hi = [v for v, k in zip(hi, kept, strict=True) if k]
        c_wait = [v for v, k in zip(c_wait, kept, strict=True) if k]
        no_wait = [v for v, k in zip(no_wait, kept, strict=True) if k]
    ok[rows] = within(np.array(hi), rows)
    return ok
