"""Queueing: how long a request waits for a pool of busy servers (physics.md 2.6).

Prompt lengths are log-normal (fitted from p50 and p99), arrivals Poisson, service first come
first served. A pool of c replicas behind a load-aware router (Dynamo's KV router, llm-d's
load-aware scorers, the simulator's default `least-work` router: each prompt goes to the
replica free soonest) is one M/G/c queue, not c M/G/1 queues at rate/c (which is what a random
split gives). Its waiting time is approximated as

    P(W > 0) = C(c, a)                      (Erlang C, a = lam E[S] offered load)
    W | W > 0 ~ Exp(theta),  1 / theta = (1 + cs^2) / 2 * E[S] / (c (1 - rho))

the Allen-Cunneen scaling of the M/M/c conditional wait by the service time's squared
coefficient of variation cs^2. At c = 1 with deterministic service its mean is the M/D/1 mean
DistServe uses; against the simulator's pooled queue the p99 wait agrees within 20% at c = 1-8,
rho 0.3-0.9 (`tests/test_queueing.py`).

TTFT is wait + a service-side time S' (prefill, KV transfer, first decode step), all growing
with the prompt. Its p99 is the p99 of the sum, not the sum of p99s:

    P(W + S' > T) = (1 - C) P(S' > T) + C E[exp(-theta (T - S')+)]

with S' evaluated on a grid of prompt quantiles (`Z_NODES`). The largest rate whose p99 fits a
target is found by bisection on the load (`max_rate_per_ms`), not a closed-form bound.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from disagg_decider.calc.queues.array_helpers import (
    broadcast,
    broadcast_flat,
    broadcast_shape,
    clip,
    shape_of,
)
from disagg_decider.calc.queues.erlang import ErlangRows, erlang_c_at

# Erlang C, the load bisection and the z grid live in their own modules; their public names
# stay importable from here.
from disagg_decider.calc.queues.erlang import erlang_c as erlang_c
from disagg_decider.calc.queues.erlang import erlang_c_exact as erlang_c_exact
from disagg_decider.calc.queues.load_bisection import BISECTIONS as BISECTIONS
from disagg_decider.calc.queues.load_bisection import RHO_MAX as RHO_MAX
from disagg_decider.calc.queues.load_bisection import max_rate_per_ms as max_rate_per_ms
from disagg_decider.calc.queues.normal_quantiles import P99_TAIL as P99_TAIL
from disagg_decider.calc.queues.normal_quantiles import Z_NODES as Z_NODES
from disagg_decider.calc.queues.normal_quantiles import Z_WEIGHTS as Z_WEIGHTS
from disagg_decider.calc.queues.normal_quantiles import NodeGrid, Row, weighted_exp_sum
from disagg_decider.calc.queues.normal_quantiles import exceed_probability as exceed_probability
from disagg_decider.calc.queues.normal_quantiles import normal_sf as normal_sf

Z99 = 2.3263478740408408


def lognormal_quantile_nodes(p50, sigma) -> np.ndarray:
    """The log-normal at `Z_NODES` (last axis, of size one in the inputs)."""
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, Z_NODES))


def lognormal_mean(p50, sigma):
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, sigma) / 2.0)


def lognormal_p99(p50, sigma):
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, Z99))


@np.errstate(divide="ignore", invalid="ignore")  # theta's 0 / 0 where saturated (read as 0)
def wait_tail(rate_per_ms, servers, mean_service_ms, scv):
    """(P(W > 0), theta) of the pooled wait: P(W > t) = C exp(-theta t).

    `scv` is the service time's squared coefficient of variation. theta is 0 when saturated.
    """
    a = np.asarray(rate_per_ms * mean_service_ms, dtype=float)
    c = np.asarray(servers, dtype=float)
    rho = a / c
    wait = erlang_c_at(c, a, rho)
    theta = c * (1.0 - rho) / (mean_service_ms * variability(wait, scv))
    return wait, np.where(rho < 1.0, theta, 0.0)


class PooledWait:
    """`wait_tail` for fixed servers and scv at many loads (a colocated search's lines at
    every batch it tries): the Erlang table's rows and the variability's two terms without
    the load worked out once. The same operations on the same values, so the same bits."""

    def __init__(self, servers, scv) -> None:
        self.c = np.asarray(servers, dtype=float)
        scv = np.asarray(scv, dtype=float)
        self.half, self.pull = (1.0 + scv) / 2.0, np.maximum(1.0 - scv, 0.0) / 2.0
        self.erlang = ErlangRows(self.c)

    @np.errstate(divide="ignore", invalid="ignore")  # as `wait_tail`
    def tail(self, rate_per_ms, mean_service_ms):
        """`wait_tail(rate_per_ms, servers, mean_service_ms, scv)`."""
        a = np.asarray(rate_per_ms * mean_service_ms, dtype=float)
        c = self.c
        rho = a / c
        wait = self.erlang.at(a, rho)
        theta = c * (1.0 - rho) / (mean_service_ms * pulled(self.half, self.pull, wait))
        return wait, np.where(rho < 1.0, theta, 0.0)


def variability(wait_probability, scv):
    """The factor on the M/M/c conditional wait: Allen-Cunneen's (1 + cs^2) / 2, pulled
    towards 1 where few arrivals wait at all.

    Allen-Cunneen is the heavy-traffic limit and exact in mean at c = 1 (Pollaczek-Khinchine).
    Where under 10% of arrivals wait (a pool at light load), a waiting arrival waits for the
    first of c residual services, which is closer to exponential than the factor says: the
    pooled simulator's conditional wait is up to 35% longer there (c = 4-8, rho 0.3-0.5,
    regular service) and its p99 wait 25% longer. The pull, (1 - cs^2) / 2 times
    1 - sqrt(P(W > 0) / 0.1), closes that gap (`tests/test_queueing.py` checks the p99 wait
    against the simulator's pool at c = 1-8, rho 0.3-0.9).
    """
    return pulled((1.0 + scv) / 2.0, np.maximum(1.0 - scv, 0.0) / 2.0, wait_probability)


def pulled(half, pull, wait_probability):
    """`variability` from its two terms in the scv, (1 + cs^2) / 2 and (1 - cs^2)+ / 2, for a
    caller that holds them across loads (`PooledWait`): the same operations, so the same bits."""
    light = 1.0 - np.sqrt(clip(wait_probability / 0.1, 0.0, 1.0))
    return half + pull * light


def batch_p99(mean_batch):
    """The batch a request sees at p99 over its lifetime, for a mean batch B.

    Sequences in a continuous batch come and go as an M/G/inf population: Poisson with mean B
    at any instant. A request's TPOT averages the batch over its own lifetime, which about as
    long as the others' (variance of the time-average about 2/3 of B), so its p99 batch is
    B + z99 sqrt(2 B / 3): +2.7 at B = 2, +10% at B = 300.
    """
    b = np.asarray(mean_batch, dtype=float)
    return b + Z99 * np.sqrt(2.0 * np.maximum(b, 0.0) / 3.0)


def wait_mean_ms(rate_per_ms, servers, mean_service_ms, scv):
    """Mean wait: C / theta (infinite when saturated)."""
    c_wait, theta = wait_tail(rate_per_ms, servers, mean_service_ms, scv)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(theta > 0, c_wait / theta, np.inf)


def wait_quantile_ms(rate_per_ms, servers, mean_service_ms, scv, tail=P99_TAIL):
    """The wait exceeded with probability `tail` (0 when fewer than that wait at all)."""
    c_wait, theta = wait_tail(rate_per_ms, servers, mean_service_ms, scv)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.log(np.maximum(c_wait / tail, 1.0)) / theta
    return np.where(theta > 0, q, np.inf)


def wait_p99_ms(rate_per_ms, servers, mean_service_ms, scv):
    return wait_quantile_ms(rate_per_ms, servers, mean_service_ms, scv)


# --- the p99 of wait + service-side time ----------------------------------------------------


def sum_exceed_probability(c_wait, theta, nodes_ms, target_ms, over_ms=None):
    """P(W + S' > T): W the pooled wait (C, theta), S' at `Z_NODES` quantiles (last axis).

    `over_ms`, P(S' > T), may be passed in when the caller has it (it does not depend on load).
    """
    if over_ms is None:
        over_ms = exceed_probability(nodes_ms, target_ms)
    t = np.asarray(target_ms, dtype=float)[..., None]
    th = np.asarray(theta, dtype=float)[..., None]
    gap = np.subtract(t, nodes_ms)
    np.maximum(gap, 0.0, out=gap)
    if broadcast_shape(th.shape, gap.shape) == gap.shape:
        tail_wait = weighted_exp_sum(np.multiply(-th, gap, out=gap))
    else:
        tail_wait = weighted_exp_sum(-th * gap)
    return (1.0 - c_wait) * over_ms + c_wait * tail_wait


# P(W + S' > T) is at most (1 - C) P(S' > T) + C times this: the tail's weighted sum of
# exponentials of non-positive numbers, at most the weights' sum (1 up to rounding), with room
# for the rounding of 25 products and sums.
TAIL_WAIT_MAX = 1.0 + 1e-6


def sum_exceed_where(c_wait, theta, nodes_ms, target_ms, over_ms, where) -> np.ndarray:
    """`sum_exceed_probability(c_wait, theta, nodes_ms, target_ms, over_ms)` at the entries
    `where` holds (a boolean array of the broadcast shape), 0 at the others: each entry is
    worked out by the same operations on its own values (the tail sum reduces one row of
    nodes at a time), so it has the same bits, without the nodes' exponentials where a caller
    has no use for them (`colocated._headroom`)."""
    shape = where.shape
    out = np.zeros(shape)
    at = where.reshape(-1).nonzero()[0]
    if at.size == 0:
        return out
    k = nodes_ms.shape[-1]
    nodes = broadcast(nodes_ms, (*shape, k)).reshape(-1, k).take(at, axis=0)
    c_wait, theta = broadcast_flat(c_wait, shape).take(at), broadcast_flat(theta, shape).take(at)
    target_ms = broadcast_flat(target_ms, shape).take(at)
    over_ms = broadcast_flat(over_ms, shape).take(at)
    miss = sum_exceed_probability(c_wait, theta, nodes, target_ms, over_ms)
    out.reshape(-1)[at] = miss
    return out


@np.errstate(divide="ignore", invalid="ignore")
def p99_of_sum_ms(rate_per_ms, servers, mean_service_ms, scv, nodes_ms):
    """p99 of W + S' at a given load (bisection on the time); inf when saturated."""
    c_wait, theta = wait_tail(rate_per_ms, servers, mean_service_ms, scv)
    s = np.asarray(nodes_ms, dtype=float)
    shape = broadcast_shape(shape_of(c_wait), s.shape[:-1])
    c_wait, theta = broadcast(c_wait, shape), broadcast(theta, shape)
    # P(S' > s99) = 1% bounds it below; the 0.5% quantiles of each term bound it above.
    lo = broadcast(node_quantile(s, P99_TAIL), shape).copy()
    w995 = np.where(theta > 0, np.log(np.maximum(c_wait / 0.005, 1.0)) / theta, np.inf)
    hi = broadcast(node_quantile(s, 0.005), shape) + w995
    hi = np.where(np.isfinite(hi), hi, lo)
    if hi.size == 1 and s.size == s.shape[-1]:
        row = Row.of(s.reshape(-1))
        if row is not None:
            return np.full(shape, _p99_of_one(row, s.reshape(-1), c_wait, theta, lo, hi))
    # sum_exceed_probability at each midpoint, with the node rows and -theta laid out once.
    grid = NodeGrid(s, shape)
    neg_theta = -np.asarray(theta, dtype=float)[..., None]
    no_wait = 1.0 - c_wait
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2.0
        tail_wait = weighted_exp_sum(neg_theta * np.maximum(mid[..., None] - s, 0.0))
        # `NodeGrid.exceed` takes the times flat and answers in the grid's shape.
        over_ms = grid.exceed(mid if mid.ndim == 1 else mid.reshape(-1))
        over = no_wait * over_ms + c_wait * tail_wait > P99_TAIL
        lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
    return np.where(theta > 0, hi, np.inf)


def _p99_of_one(row: Row, s: np.ndarray, c_wait, theta, lo, hi) -> float:
    """`p99_of_sum_ms`'s bisection for one entry (its bracket given), in plain floats.

    A single pool's p99 is asked for often; on one entry numpy's fixed cost per call was
    nearly all the work. Every step is the array loop's on that entry: the same IEEE
    operations in the same order, the tail sum still one `np.exp` and one `np.add.reduce`
    over the 25 nodes (`Row.exceed` says why P(S' > T) is the same), so the same bits.
    """
    theta, c_wait = float(np.ravel(theta)[0]), float(np.ravel(c_wait)[0])
    if not theta > 0:
        return math.inf
    lo, hi = float(np.ravel(lo)[0]), float(np.ravel(hi)[0])
    neg_theta, no_wait = -theta, 1.0 - c_wait
    gap = np.empty_like(s)
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2.0
        np.subtract(mid, s, out=gap)
        np.maximum(gap, 0.0, out=gap)
        np.multiply(neg_theta, gap, out=gap)
        np.exp(gap, out=gap)
        np.multiply(gap, Z_WEIGHTS, out=gap)
        tail_wait = float(np.add.reduce(gap))
        if no_wait * row.exceed(mid) + c_wait * tail_wait > P99_TAIL:
            lo = mid
        else:
            hi = mid
    return hi


def node_quantile(nodes_ms, tail):
    """The value of S' exceeded with probability `tail` (interpolated on the z grid)."""
    i, frac = _node_of_tail(tail)
    return nodes_ms[..., i] + frac * (nodes_ms[..., i + 1] - nodes_ms[..., i])


@cache
def _node_of_tail(tail: float) -> tuple[int, np.float64]:
    """Where the tail's z falls on `Z_NODES`: the node below it and the fraction past it.

    Cached: only a couple of tails are ever asked for, each thousands of times a decision.
    """
    z = _z_of_tail(tail)
    i = int(np.searchsorted(Z_NODES, z)) - 1
    return i, (z - Z_NODES[i]) / (Z_NODES[i + 1] - Z_NODES[i])


def _z_of_tail(tail: float) -> float:
    lo, hi = 0.0, 8.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if 0.5 * math.erfc(mid / math.sqrt(2.0)) > tail else (lo, mid)
    return hi
