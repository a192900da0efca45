"""Tail readings on S' held node-major: the nodes on the first axis, each node's plane of rows
contiguous (`queueing`'s forms hold them on the last axis, a row of 25 per entry).

A batch of workloads reads P(S' > T) and the tail sum of the wait over tens of thousands of
rows at once. Along a short last axis numpy's reductions call their inner loop once per row,
and the per-row calls cost more than the arithmetic; across node planes the same operations
run as a few calls on whole planes. Every value here is the row form's bits: the element-wise
operations are the same on the same operands, and the sums over the nodes add in the order
numpy adds a row (`node_major_sum`). `colocated_best` lays its many lines out this way;
`load_bisection` holds its gaps this way from `NODE_MAJOR_ENTRIES` up.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from disagg_decider.calc.queues.array_helpers import (
    broadcast,
    broadcast_flat,
    broadcast_shape,
    clip,
    node_major_sum,
)
from disagg_decider.calc.queues.normal_quantiles import (
    Z_NODES,
    Z_STEP,
    Z_WEIGHTS,
    _normal_sf_of,
)

# `Z_WEIGHTS` on the first axis, to weigh node planes.
Z_WEIGHTS_COLUMN = Z_WEIGHTS[:, None]
Z_WEIGHTS_COLUMN.setflags(write=False)


@np.errstate(divide="ignore", invalid="ignore")  # as `normal_quantiles.exceed_probability`
def exceed_probability(planes: np.ndarray, target_ms) -> np.ndarray:
    """`normal_quantiles.exceed_probability` of the nodes these planes hold (planes (K,
    *shape), the targets broadcasting to `shape`): the same bits, as `NodeGrid.exceed`
    reads them (the node count, the bracketing nodes, the interpolated z)."""
    k, shape = planes.shape[0], planes.shape[1:]
    flat = planes.reshape(k, -1)
    m = flat.shape[1]
    t = broadcast_flat(np.asarray(target_ms, dtype=float), shape)
    hi = clip(_count_at_most(flat, t), 1, k - 1)
    lo = hi - 1
    at = np.multiply(lo, m, dtype=np.intp) + np.arange(m)
    s0, s1 = flat.take(at), flat.take(at + m)
    frac = np.where(s1 > s0, (t - s0) / (s1 - s0), 1.0)
    z = Z_NODES.take(lo) + clip(frac, 0.0, 1.0) * Z_STEP.take(lo)
    z = np.where(t < flat[0], -np.inf, np.where(t >= flat[k - 1], np.inf, z))
    return _normal_sf_of(z).reshape(shape)


def _count_at_most(flat: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Nodes <= t per row (flat planes (K, M), t (M,)): booleans added as uint8 (exact: K <
    256), plane by plane; a uint8 view would be summed in the platform's integer, at twice
    the cost."""
    return np.add.reduce(np.less_equal(flat, t), axis=0, dtype=np.uint8)


class Bracket(NamedTuple):
    """Where a target falls among each row's nodes, flat (one entry per row): enough to bound
    P(W + S' > T) from above without the interpolation (`over_bound`, `tail_wait_bound`)."""

    count: np.ndarray  # nodes <= T
    top: np.ndarray  # on ascending rows with count > 0, the largest node <= T


def bracket(planes: np.ndarray, target_ms) -> Bracket:
    """The node count at or below the targets, and the last node counted."""
    k, shape = planes.shape[0], planes.shape[1:]
    flat = planes.reshape(k, -1)
    m = flat.shape[1]
    count = _count_at_most(flat, broadcast_flat(np.asarray(target_ms, dtype=float), shape))
    last = np.maximum(count, 1) - 1  # uint8, 0 where none is counted
    return Bracket(count=count, top=flat.take(np.multiply(last, m, dtype=np.intp) + np.arange(m)))


# Absolute room on P(S' > T) read at a node: `normal_sf` is Abramowitz & Stegun 7.1.26, within
# 7.5e-8 of the normal's tail (half erf's 1.5e-7), so between two nodes it may rise above its
# value at the lower one by at most twice that, and rounding by ulps.
_SF_ROOM = 1e-6
# P(S' > T) at most, by the node count c on ascending rows: 1 below the first node, 0 at or
# past the last, else its value at the node below T (z at least Z_NODES[c - 1]) and the room.
_OVER_AT_MOST = np.concatenate(
    ([1.0], np.minimum(_normal_sf_of(Z_NODES[:-1]) + _SF_ROOM, 1.0), [0.0])
)
_OVER_AT_MOST.setflags(write=False)


def over_bound(found: Bracket, shape: tuple[int, ...]) -> np.ndarray:
    """`exceed_probability`'s value at most, from the node count alone, for rows whose nodes
    ascend and finite targets (the caller's to know): there the count places T between the
    nodes the interpolation reads (below the first, at or past the last, or inside)."""
    return _OVER_AT_MOST.take(found.count).reshape(shape)


# sum(Z_WEIGHTS[c:]) for c = 0 .. K: the weight of the nodes above a target with c nodes at or
# below it (on ascending rows); 0 past the last node.
_WEIGHT_ABOVE = np.append(np.cumsum(Z_WEIGHTS[::-1])[::-1], 0.0)
_WEIGHT_ABOVE.setflags(write=False)


@np.errstate(over="ignore", invalid="ignore")
def tail_wait_bound(theta, target_ms, found: Bracket, shape: tuple[int, ...]) -> np.ndarray:
    """A bound of the wait's tail sum sum_k w_k exp(-theta (T - S'_k)+) (`sum_exceed_probability`)
    without the nodes' exponentials, for rows whose nodes ascend (the caller's to know), up to
    the rounding `queueing.TAIL_WAIT_MAX` allows for.

    The nodes above T add their weights whole (exp(0) = 1); those at or below it each add at
    most exp(-theta (T - top)), top the largest of them (its gap is the smallest): the tail
    is at most W + (1 - W) exp(-theta (T - top)), W the weights above. 1 where that does not
    hold or does not say more (no node at or below T, theta not >= 0, nan).
    """
    theta = broadcast_flat(np.asarray(theta, dtype=float), shape)
    t = broadcast_flat(np.asarray(target_ms, dtype=float), shape)
    above = _WEIGHT_ABOVE.take(found.count)
    near = np.exp(np.multiply(np.negative(theta), t - found.top))
    inner = above + (1.0 - above) * near
    usable = (found.count > 0) & (theta >= 0.0) & (inner <= 1.0)
    return np.where(usable, inner, 1.0).reshape(shape)


def sum_exceed_probability(c_wait, theta, planes, target_ms, over_ms) -> np.ndarray:
    """`queueing.sum_exceed_probability(c_wait, theta, nodes, target_ms, over_ms)` of the
    nodes these planes hold: the same bits."""
    t = np.asarray(target_ms, dtype=float)
    gap = np.subtract(t, planes)
    np.maximum(gap, 0.0, out=gap)
    neg_theta = -np.asarray(theta, dtype=float)
    if broadcast_shape(neg_theta.shape, gap.shape) == gap.shape:
        exponent = np.multiply(neg_theta, gap, out=gap)
    else:
        exponent = neg_theta * gap
    np.exp(exponent, out=exponent)
    np.multiply(exponent, _weights_for(exponent.ndim), out=exponent)
    tail_wait = node_major_sum(exponent)
    return (1.0 - c_wait) * over_ms + c_wait * tail_wait


def sum_exceed_where(
    c_wait, theta, planes, target_ms, over_ms, where, fill=0.0, then=None
) -> np.ndarray:
    """`queueing.sum_exceed_where` of the nodes these planes hold: the same bits at the
    entries `where` holds (a boolean array of the broadcast shape), `fill` at the others.
    `over_ms` None reads P(S' > T) at those entries only (each entry's own bits).
    `then`, applied to the values at those entries, is applied to them alone (a function of
    each value on its own: the same bits as applying it to the whole array there)."""
    shape = where.shape
    out = np.full(shape, fill)
    at = where.reshape(-1).nonzero()[0]
    if at.size == 0:
        return out
    k = planes.shape[0]
    kept = broadcast(planes, (k, *shape)).reshape(k, -1).take(at, axis=1)
    c_wait, theta = broadcast_flat(c_wait, shape).take(at), broadcast_flat(theta, shape).take(at)
    target_ms = broadcast_flat(target_ms, shape).take(at)
    if over_ms is None:
        over_ms = exceed_probability(kept, target_ms)
    else:
        over_ms = broadcast_flat(over_ms, shape).take(at)
    miss = sum_exceed_probability(c_wait, theta, kept, target_ms, over_ms)
    out.reshape(-1)[at] = miss if then is None else then(miss)
    return out


def _weights_for(ndim: int) -> np.ndarray:
    """`Z_WEIGHTS` on the first of `ndim` axes."""
    return Z_WEIGHTS_COLUMN if ndim == 2 else Z_WEIGHTS.reshape(-1, *(1,) * (ndim - 1))
