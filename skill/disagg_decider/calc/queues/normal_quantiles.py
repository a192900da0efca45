"""The grid of standard-normal quantiles a service-side time is given on, and P(S' > T) read
off it (the tail half of `queueing`, which re-exports these names).

The p99 of a sum needs the upper tail resolved, which Gauss-Hermite's seven nodes are not: S'
is evaluated on an even grid of z (`Z_NODES`) with trapezoid weights on the normal density.

Each reading comes in two forms that give the same bits: `NodeGrid.exceed` for many rows at
once (numpy), and `Row.exceed` for one row, in plain floats. A decision asks hundreds of times
for one row at one target (a single pool's p99 TTFT bisects its time 16 times); there numpy's
fixed cost per call was most of the work. The plain-float form does the same IEEE operations
in the same order (+, -, *, /, comparisons and the clamps are exact the same way in Python and
numpy), and its one transcendental, the exponential, still goes through `np.exp` (whose
last bit can differ from `math.exp`'s).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from disagg_decider.calc.queues.array_helpers import (
    broadcast,
    broadcast_flat,
    broadcast_shape,
    clip,
    count_at_most,
    node_major_sum,
    planes_of,
)

# An even grid of standard-normal quantiles for tails; trapezoid weights on the normal density.
Z_NODES = np.linspace(-4.0, 4.5, 25)
_Z_PDF = np.exp(-0.5 * Z_NODES**2)
Z_WEIGHTS = _Z_PDF / _Z_PDF.sum()
Z_NODES.setflags(write=False)
Z_WEIGHTS.setflags(write=False)
# Z_NODES[i + 1] - Z_NODES[i], the same subtraction done once (read per row in `NodeGrid`).
Z_STEP = Z_NODES[1:] - Z_NODES[:-1]
Z_STEP.setflags(write=False)
SQRT2 = math.sqrt(2.0)
P99_TAIL = 0.01  # the share of requests a p99 leaves above it
# The same values as Python floats, for `Row` (float64 -> float is exact).
_Z_LIST: tuple[float, ...] = tuple(Z_NODES.tolist())
_Z_STEP_LIST: tuple[float, ...] = tuple(Z_STEP.tolist())


def normal_sf(z):
    """P(Z > z) for a standard normal: erfc by Abramowitz & Stegun 7.1.26 (error < 1.5e-7)."""
    return _normal_sf_of(np.asarray(z, dtype=float))


def _normal_sf_of(z: np.ndarray):
    """`normal_sf` of a float array (`NodeGrid.exceed`'s z, already one)."""
    x = np.abs(z) / SQRT2
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    half = 0.5 * poly * np.exp(-x * x)
    return np.where(z >= 0, half, 1.0 - half)


def normal_sf_float(z: float) -> float:
    """`normal_sf` of one finite float, in plain floats: the same operations, the same bits."""
    x = (z if z >= 0.0 else -z) / SQRT2  # abs(z) but for the sign of a zero, squared away
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    half = 0.5 * poly * float(np.exp(-x * x))
    return half if z >= 0 else 1.0 - half


@np.errstate(divide="ignore", invalid="ignore")  # `NodeGrid.exceed` runs under it
def exceed_probability(nodes_ms, target_ms):
    """P(S' > T) for S' given at `Z_NODES` quantiles (last axis, increasing along it).

    The quantile of T is interpolated between nodes, so the answer is smooth in T.
    """
    s = np.asarray(nodes_ms, dtype=float)
    t = np.asarray(target_ms, dtype=float)
    shape = broadcast_shape(s.shape[:-1], t.shape)
    return NodeGrid(s, shape).exceed(broadcast_flat(t, shape))


class NodeGrid:
    """S' at the `Z_NODES` quantiles as flat rows, for reading P(S' > T) at many T.

    `p99_of_sum_ms` asks at 16 targets per call: the rows are laid out once. `exceed` takes
    the targets flat (one per row) and runs under the caller's `np.errstate` (divide and
    invalid ignored): entering it costs as much as a small array operation.
    """

    def __init__(self, s: np.ndarray, shape: tuple[int, ...]) -> None:
        k = s.shape[-1]
        self.shape, self.k = shape, k
        self.s = np.ascontiguousarray(broadcast(s, (*shape, k)).reshape(-1, k))
        # Row starts in the flat copy: `take` on flat indices reads the bracketing nodes
        # faster than 2-D fancy indexing (the same elements).
        self.flat = self.s.reshape(-1)
        self.row_start = np.arange(self.s.shape[0]) * k
        self.first, self.last = self.s[:, 0], self.s[:, -1]
        # A few rows are read one by one in plain floats (`Row`), where numpy's cost per
        # call would be most of the work; None when any row needs the array code.
        self.rows: list[Row] | None = None
        if self.s.shape[0] <= FEW_ROWS and k == len(_Z_LIST) and finite_ascending(self.s):
            self.rows = [Row(row) for row in self.s.tolist()]

    def exceed(self, t: np.ndarray) -> np.ndarray:
        if self.rows is not None:
            targets = t.tolist()
            if all(map(math.isfinite, targets)):
                out = [row.exceed(x) for row, x in zip(self.rows, targets, strict=True)]
                return np.array(out).reshape(self.shape)
        s, k = self.s, self.k
        # Clamps by the clip ufunc: the same values as minimum(maximum(.)) here (integers; a
        # fraction whose -0.0 could become +0.0 is added to a nonzero node, the same sum).
        hi = clip(count_at_most(s, t), 1, k - 1)
        lo = hi - 1
        at = self.row_start + lo
        s0, s1 = self.flat.take(at), self.flat.take(at + 1)
        frac = np.where(s1 > s0, (t - s0) / (s1 - s0), 1.0)
        z = Z_NODES.take(lo) + clip(frac, 0.0, 1.0) * Z_STEP.take(lo)
        z = np.where(t < self.first, -np.inf, np.where(t >= self.last, np.inf, z))
        return _normal_sf_of(z).reshape(self.shape)


def finite_ascending(s: np.ndarray) -> bool:
    """Every value finite and each row ascending along the last axis (what `Row` needs)."""
    return bool(np.isfinite(s).all()) and not bool((s[..., 1:] < s[..., :-1]).any())


FEW_ROWS = 12  # up to this many rows, `NodeGrid.exceed` reads them one by one (`Row`)


class Row:
    """One row of S' at the `Z_NODES` quantiles, for `NodeGrid.exceed` at one float target.

    Only for a row of finite values in ascending order (`Row.of` checks): then the number of
    nodes <= t is where `bisect_right` puts t, and every step below is the grid's, element for
    element. At t below the first node the grid's z is -inf and `normal_sf` gives exactly 1;
    at or past the last it is +inf and gives exactly 0.
    """

    __slots__ = ("first", "k", "last", "nodes")

    def __init__(self, nodes: list[float]) -> None:
        self.nodes, self.k = nodes, len(nodes)
        self.first, self.last = nodes[0], nodes[-1]

    @staticmethod
    def of(nodes: np.ndarray) -> Row | None:
        """The row as floats, or None where it is not finite and ascending (use the grid)."""
        if nodes.shape != Z_NODES.shape or not finite_ascending(nodes):
            return None
        return Row(nodes.tolist())

    def exceed(self, t: float) -> float:
        """P(S' > t), t a finite float (at nan the grid's bracket would differ)."""
        if t < self.first:
            return 1.0
        if t >= self.last:
            return 0.0
        s = self.nodes
        # Clamps as comparisons (the same values as min/max, without their calls); with
        # first <= t < last they never bite, but they keep the grid's steps.
        hi = bisect.bisect_right(s, t)
        hi = 1 if hi < 1 else self.k - 1 if hi > self.k - 1 else hi
        lo = hi - 1
        s0, s1 = s[lo], s[hi]
        frac = (t - s0) / (s1 - s0) if s1 > s0 else 1.0
        frac = 0.0 if frac < 0.0 else 1.0 if frac > 1.0 else frac
        return normal_sf_float(_Z_LIST[lo] + frac * _Z_STEP_LIST[lo])


def weighted_exp_sum(exponent: np.ndarray) -> np.ndarray:
    """sum_k Z_WEIGHTS[k] exp(exponent[..., k]), in place in `exponent` (a fresh array).

    The same two operations and the same reduction as `(np.exp(x) * Z_WEIGHTS).sum(-1)`, so
    the same bits; without the two temporaries, which for a batch of workloads are megabytes.
    An exponent laid out node-major (`node_planes`) is summed as its rows would be.
    """
    planes = None if exponent.flags.c_contiguous else planes_of(exponent)
    if planes is not None and exponent.shape[-1:] == Z_WEIGHTS.shape:
        terms = np.exp(planes)
        np.multiply(terms, Z_WEIGHTS.reshape(-1, *(1,) * (terms.ndim - 1)), out=terms)
        return node_major_sum(terms)
    if exponent.shape[-1:] != Z_WEIGHTS.shape or not exponent.flags.writeable:
        return np.add.reduce(np.exp(exponent) * Z_WEIGHTS, axis=-1)
    np.exp(exponent, out=exponent)
    np.multiply(exponent, Z_WEIGHTS, out=exponent)
    return np.add.reduce(exponent, axis=-1)
