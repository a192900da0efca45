"""Where a constraint stops holding along a grid of batch sizes.

Capacity is the largest batch that still meets every target. The calculator evaluates a
coarse geometric grid of batches at once; instead of rounding down to the last grid point
(which would under-state capacity by up to a grid step), it interpolates the normalised slack
of the binding constraint to where it crosses zero. Slack must fall as the batch grows, so the
feasible batches form a prefix of the grid.

Where the grid is large (the colocated comparator has a line of batches for every prompt, TP
and chunk size), `bisect_edge` finds the same crossing with log2(n) evaluations per line
instead of n, under the same prefix assumption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.queues.array_helpers import broadcast, clip, count_at_most

# The functions decorated with it run under it whole (`np.errstate` as a decorator: one
# Python call where the `with` statement makes three).
_QUIET = np.errstate(divide="ignore", invalid="ignore")


@_QUIET
def boundary_index(slack: np.ndarray) -> np.ndarray:
    """Fractional index along the last axis where slack crosses zero; -1 when none is >= 0."""
    ok = slack >= 0
    n = slack.shape[-1]
    first_bad = np.where(ok.all(axis=-1), n, ok.argmin(axis=-1))
    last_ok = first_bad - 1
    s_ok = _pick(slack, np.maximum(last_ok, 0))
    s_bad = _pick(slack, np.minimum(first_bad, n - 1))
    frac = (s_ok / (s_ok - s_bad)).clip(0.0, 1.0)
    frac = np.where((first_bad < n) & (frac == frac), frac, 0.0)  # nan (inf - inf) -> 0
    return np.where(last_ok >= 0, last_ok + frac, -1.0)


def value_at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Linear interpolation of `values` along the last axis at fractional `index` (>= 0)."""
    n = values.shape[-1]
    i = clip(index, 0.0, n - 1)
    lo = i.astype(int)
    hi = np.minimum(lo + 1, n - 1)
    v_lo, v_hi = _pick_pair(values, lo, hi)
    return v_lo + (i - lo) * (v_hi - v_lo)


def pick(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values[..., index[...]]: one element of the last axis per leading position."""
    if type(index) is not np.ndarray:
        index = np.asarray(index)
    shape = index.shape
    if values.shape[:-1] != shape:
        values = broadcast(values, (*shape, values.shape[-1]))
    flat = values.reshape(-1, values.shape[-1])
    return flat[np.arange(flat.shape[0]), index.reshape(-1)].reshape(shape)


def _pick(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """`pick` for indices known to lie in [0, k): the same elements read by their flat
    position with `take` (half the cost of 2-D fancy indexing on a dozen rows). The callers
    here clamp or construct their indices inside the axis.

    A flat index (one per row: nearly every call, ~90 a decision) is read without the
    reshapes of the index and the result, which only restore its own shape."""
    if type(index) is not np.ndarray:
        index = np.asarray(index)
    if index.ndim == 1:
        if values.ndim == 1:
            return values.take(index)
        n, k = index.shape[0], values.shape[-1]
        if values.shape[:-1] != index.shape:
            values = broadcast(values, (n, k))
        return values.reshape(-1).take(np.arange(0, n * k, k) + index)
    shape, k = index.shape, values.shape[-1]
    if values.ndim == 1:  # one row for every position: its elements at the indices
        return values.take(index.reshape(-1)).reshape(shape)
    if values.shape[:-1] != shape:
        values = broadcast(values, (*shape, k))
    n = index.size
    return values.reshape(-1).take(np.arange(0, n * k, k) + index.reshape(-1)).reshape(shape)


def _pick_pair(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
    """(`_pick(values, lo)`, `_pick(values, hi)`) for two indices of one shape: a 2-D grid's
    rows are laid out flat and their starts found once for both (the same elements)."""
    if type(lo) is not np.ndarray or type(hi) is not np.ndarray or lo.ndim != 1:
        return _pick(values, lo), _pick(values, hi)
    if values.ndim == 1:
        return values.take(lo), values.take(hi)
    n, k = lo.shape[0], values.shape[-1]
    if values.shape[:-1] != lo.shape:
        values = broadcast(values, (n, k))
    flat, starts = values.reshape(-1), np.arange(0, n * k, k)
    return flat.take(starts + lo), flat.take(starts + hi)


def slack(limit, value):
    """Normalised headroom of `value` under `limit`: >= 0 when the limit holds.

    A limit of zero (no KV room at all) leaves no headroom.
    """
    limit = np.asarray(limit, dtype=float)
    if (limit > 0).all():
        return 1.0 - value / limit
    safe = np.where(limit > 0, limit, 1.0)
    return np.where(limit > 0, 1.0 - value / safe, -np.inf)


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def interp_rows(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """`np.interp` row by row: x (N,), xp and fp (N, K), xp ascending along each row (fp may
    be one row (K,) shared by all).

    Outside a row's range the end values hold, as in `np.interp`.
    """
    k = xp.shape[-1]
    hi = clip(count_at_most(xp, x), 1, k - 1)
    lo = hi - 1
    (x0, x1), (y0, y1) = _pick_pair(xp, lo, hi), _pick_pair(fp, lo, hi)
    frac = clip((x - x0) / (x1 - x0), 0.0, 1.0)
    mid = y0 + frac * (y1 - y0)
    return np.where(frac >= 1.0, y1, np.where((frac > 0.0) & (frac == frac), mid, y0))


def littles_law_rows(
    rate: np.ndarray, batches: np.ndarray, steps: np.ndarray, per_step
) -> np.ndarray:
    """The step time at which each row carries `rate` (N,), batch and step linear between points.

    A row's grid holds batches (K,) with their step times (N, K); batch b at step s carries
    b / (per_step * s) requests per unit time (Little's law; `per_step` is (N, 1)). Capacity is
    read off the grid by interpolating batch and step linearly in the grid index
    (`boundary_index`, `value_at`), so the rate a batch carries is a ratio of two linear
    functions there. Inverting that ratio exactly, rather than interpolating the step linearly
    in the rate, gives back the very step the capacity was found at: a mode loaded to its
    capacity reports the TPOT its capacity was sized for, never a little more. Outside the
    grid the end values hold.
    """
    b = broadcast(batches, steps.shape)
    carried = b / (per_step * steps)
    k = steps.shape[-1]
    hi = clip(count_at_most(carried, rate), 1, k - 1)
    lo = hi - 1
    b0, b1, s0, s1 = _pick(b, lo), _pick(b, hi), _pick(steps, lo), _pick(steps, hi)
    scale = np.ravel(broadcast(per_step, (len(rate), 1)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # rate * scale * (s0 + f (s1 - s0)) = b0 + f (b1 - b0)
        frac = (rate * scale * s0 - b0) / ((b1 - b0) - rate * scale * (s1 - s0))
    frac = np.where(np.isfinite(frac), frac, 0.0).clip(0.0, 1.0)
    below = rate <= _pick(carried, np.zeros_like(lo))
    above = rate >= _pick(carried, np.full_like(lo, k - 1))
    mid = s0 + frac * (s1 - s0)
    return np.where(below, steps[..., 0], np.where(above, steps[..., -1], mid))


@dataclass(frozen=True)
class Edge:
    """Where slack crosses zero along each line of a grid, found by `bisect_edge`."""

    lo: np.ndarray  # last index with slack >= 0; -1 where none is
    hi: np.ndarray  # first index with slack < 0; n where every point holds
    frac: np.ndarray  # how far from lo towards hi the slack reaches zero
    at_lo: tuple[np.ndarray, ...]  # the evaluated values at lo (0 where lo is -1)
    at_hi: tuple[np.ndarray, ...]  # and at hi (0 where hi is n)

    def value(self, k: int) -> np.ndarray:
        """The k-th evaluated value interpolated at the crossing; 0 where no point holds.

        Rounded exactly as `value_at` at `boundary_index`'s fractional index, so bisection and
        the whole grid give the same bits.
        """
        v_lo, v_hi = self.at_lo[k], self.at_hi[k]
        index = self.lo + self.frac
        step = index - self.lo
        value = np.where(step >= 1.0, v_hi, v_lo + step * (v_hi - v_lo))
        return np.where(self.lo >= 0, value, 0.0)


def bisect_edge(
    at: Callable[[np.ndarray], tuple[np.ndarray, tuple[np.ndarray, ...]]],
    n: int,
    shape: tuple[int, ...],
    levels: int = 1,
) -> Edge:
    """The crossing `boundary_index` finds on a full grid, evaluating log2(n) points per line.

    `at(index)` evaluates one grid index per line (an int array of `shape`) and returns the
    slack there and the values to interpolate.

    `levels` > 1 asks `at` for the points of that many bisection steps at once: the
    2^levels - 1 indices a line's next steps may visit, along a new last axis (`shape` + (P,),
    `subtree_mids`), then walks them as the steps one at a time would: the same indices
    compared, the same values kept, in a fraction of the calls on more points
    (`levels_for`).
    """
    if levels <= 1:
        return _bisect_one_level(at, n, shape)
    lo = np.full(shape, -1).reshape(-1)
    hi = np.full(shape, n).reshape(-1)
    s_lo = s_hi = np.zeros(lo.shape)
    at_lo = at_hi = None  # the values, stacked: (V, N)
    points = 2**levels - 1
    base = np.arange(lo.size) * points
    while (hi - lo > 1).any():
        mids = subtree_mids(lo, hi, levels)  # (N, P)
        s_all, values_all = at(clip(mids, 0, n - 1).reshape((*shape, points)))
        s_flat, mid_flat = s_all.reshape(-1), mids.reshape(-1)
        v_flat = np.array(values_all, dtype=float).reshape(len(values_all), -1)
        if at_lo is None or at_hi is None:
            at_lo = at_hi = np.zeros((len(values_all), lo.size))
        node = base
        for _ in range(levels):
            still_open = hi - lo > 1
            mid, s_mid, values = mid_flat.take(node), s_flat.take(node), v_flat.take(node, axis=1)
            up = still_open & (s_mid >= 0)  # mid holds: the crossing is above it
            down = still_open & ~up
            at_lo, at_hi = np.where(up, values, at_lo), np.where(down, values, at_hi)
            lo, s_lo = np.where(up, mid, lo), np.where(up, s_mid, s_lo)
            hi, s_hi = np.where(down, mid, hi), np.where(down, s_mid, s_hi)
            # The next node: the child below (down) or above (up), `subtree_mids`' order.
            node = 2 * node - base + np.where(up, 2, 1)
    assert at_lo is not None and at_hi is not None, "a grid has at least one point"
    return _edge(
        lo.reshape(shape), hi.reshape(shape), s_lo, s_hi, tuple(at_lo), tuple(at_hi), n, shape
    )


def subtree_mids(lo: np.ndarray, hi: np.ndarray, levels: int) -> np.ndarray:
    """The midpoints bisection may visit in its next `levels` steps from (lo, hi) (N,): (N, P)
    with P = 2^levels - 1, breadth first: node j's midpoint splits its interval into the one
    of node 2j + 1 (below) and that of node 2j + 2 (above). A bracket of grid indices (ints)
    halves as `(lo + hi) // 2`, a continuous one (floats: `bisect_halves`) as `(lo + hi) / 2`."""
    on_grid = lo.dtype.kind in "iu"
    los, his, mids = [lo], [hi], []
    for j in range(2**levels - 1):
        mid = (los[j] + his[j]) // 2 if on_grid else (los[j] + his[j]) / 2.0
        mids.append(mid)
        los += [los[j], mid]
        his += [mid, his[j]]
    return np.stack(mids, axis=1)


def bisect_halves(holds: Callable[[np.ndarray], np.ndarray], lo, hi, steps: int, levels: int):
    """(lo, hi) of each entry (N,) after `steps` halvings: a step keeps the upper half where
    `holds` at the midpoint (lo = mid), else the lower (hi = mid). The loop of one midpoint
    per call, `levels` steps per call: `holds` answers at the 2^levels - 1 midpoints those
    steps may visit ((N, P), `subtree_mids`), then the steps walk them as the loop
    would, the same sums and halvings on the same values, so the same midpoints, answers and
    bits. `holds` must answer each entry as it would alone (the callers' tests are element by
    element), whatever else the call holds."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    while steps > 0:
        k = min(levels, steps)
        mids = subtree_mids(lo, hi, k)
        ok = holds(mids)
        width = mids.shape[1]
        flat_mids, flat_ok = mids.reshape(-1), ok.reshape(-1)
        base = np.arange(len(lo)) * width
        node = np.zeros(len(lo), dtype=np.int64)
        for _ in range(k):
            mid, up = flat_mids.take(base + node), flat_ok.take(base + node)
            lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
            node = 2 * node + np.where(up, 2, 1)
        steps -= k
    return lo, hi


def levels_for(lines: int, n: int, call_points: int) -> int:
    """How many bisection steps per evaluation suit `lines` lines on a grid of `n` points,
    where one evaluation costs as much in fixed calls as `call_points` points: the fewest
    evaluations of 2^levels - 1 points per line that the cost allows."""
    steps = max(int(n).bit_length(), 1)  # from (-1, n): width n + 1, halved each step

    def cost(k: int) -> int:
        return -(-steps // k) * (call_points + lines * (2**k - 1))

    return min(range(1, steps + 1), key=cost)


def _bisect_one_level(at, n: int, shape: tuple[int, ...]) -> Edge:
    """`bisect_edge` one step per evaluation."""
    lo = np.full(shape, -1)
    hi = np.full(shape, n)
    s_lo = s_hi = np.zeros(shape)
    at_lo = at_hi = None  # the values, stacked: (V, *shape)
    while (still_open := hi - lo > 1).any():
        mid = (lo + hi) // 2
        s_mid, values = at(clip(mid, 0, n - 1))
        values = np.array(values, dtype=float)
        if at_lo is None or at_hi is None:
            at_lo = at_hi = np.zeros((len(values), *shape))
        up = still_open & (s_mid >= 0)  # mid holds: the crossing is above it
        down = still_open & ~up
        at_lo, at_hi = np.where(up, values, at_lo), np.where(down, values, at_hi)
        lo, s_lo = np.where(up, mid, lo), np.where(up, s_mid, s_lo)
        hi, s_hi = np.where(down, mid, hi), np.where(down, s_mid, s_hi)
    assert at_lo is not None and at_hi is not None, "a grid has at least one point"
    return _edge(lo, hi, s_lo, s_hi, tuple(at_lo), tuple(at_hi), n, shape)


@_QUIET
def _edge(lo, hi, s_lo, s_hi, at_lo, at_hi, n: int, shape: tuple[int, ...]) -> Edge:
    """The crossing's fraction between the last holding and the first failing point (every
    argument an array: the bisection's own)."""
    s_lo = s_lo.reshape(shape)
    frac = (s_lo / (s_lo - s_hi.reshape(shape))).clip(0.0, 1.0)
    frac = np.where((hi < n) & (lo >= 0) & (frac == frac), frac, 0.0)  # nan (inf - inf) -> 0
    at_lo = tuple(v.reshape(shape) for v in at_lo)
    at_hi = tuple(v.reshape(shape) for v in at_hi)
    return Edge(lo=lo, hi=hi, frac=frac, at_lo=at_lo, at_hi=at_hi)
