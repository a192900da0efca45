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

Z99 = 2.3263478740408408
RHO_MAX = 0.95  # never plan a server hotter than this
P99_TAIL = 0.01
BISECTIONS = 16  # load and time bisection steps: 2^-16 of the bracket

# Gauss-Hermite (probabilists') nodes and weights for E[f(Z)], Z ~ N(0, 1): the values
# `np.polynomial.hermite_e.hermegauss(7)` returns, written out (exact float64 reprs;
# tests/test_queueing.py compares them) so that a verdict does not import numpy.polynomial (~4 ms).
_GH_NODES = np.array([-3.7504397177257425, -2.366759410734541, -1.1544053947399682, 0.0])
_GH_NODES = np.concatenate([_GH_NODES, -_GH_NODES[2::-1]])
_GH_WEIGHTS = np.array([0.0013743062164795505, 0.07709667658348317, 0.6018995488855944])
_GH_WEIGHTS = np.concatenate([_GH_WEIGHTS, [1.145887211259886], _GH_WEIGHTS[::-1]])
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()

# An even grid of standard-normal quantiles for tails: the p99 of a sum needs the upper tail
# resolved, which Gauss-Hermite's seven nodes are not. Trapezoid weights on the normal density.
Z_NODES = np.linspace(-4.0, 4.5, 25)
_Z_PDF = np.exp(-0.5 * Z_NODES**2)
Z_WEIGHTS = _Z_PDF / _Z_PDF.sum()
Z_NODES.setflags(write=False)
Z_WEIGHTS.setflags(write=False)
# Z_NODES[i + 1] - Z_NODES[i], the same subtraction done once (read per row in `_NodeGrid`).
_Z_STEP = Z_NODES[1:] - Z_NODES[:-1]
_Z_STEP.setflags(write=False)
_SQRT2 = math.sqrt(2.0)


def lognormal_nodes(p50, sigma) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature points and weights of a log-normal length distribution.

    The nodes broadcast along the last axis, which must be of size one in `p50` and `sigma`.
    """
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, _GH_NODES)), _GH_WEIGHTS


def lognormal_quantile_nodes(p50, sigma) -> np.ndarray:
    """The log-normal at `Z_NODES` (last axis, of size one in the inputs)."""
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, Z_NODES))


def lognormal_mean(p50, sigma):
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, sigma) / 2.0)


def lognormal_p99(p50, sigma):
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, Z99))


def normal_sf(z):
    """P(Z > z) for a standard normal: erfc by Abramowitz & Stegun 7.1.26 (error < 1.5e-7)."""
    x = np.abs(np.asarray(z, dtype=float)) / _SQRT2
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    half = 0.5 * poly * np.exp(-x * x)
    return np.where(np.asarray(z) >= 0, half, 1.0 - half)


def erlang_c_exact(servers, offered):
    """Probability an arrival waits in an M/M/c queue with `servers` and offered load a < c.

    Erlang B from 1 / B(c, a) = sum_j c (c - 1) ... (c - j + 1) / a^j, the terms summed in
    log space along a new axis (terms past j = c are zero), then C = c B / (c - a (1 - B)).
    Broadcasts; 1 where a >= c.
    """
    c, a = np.broadcast_arrays(
        np.asarray(servers, dtype=float), np.maximum(np.asarray(offered, dtype=float), 1e-300)
    )
    top = int(np.max(c)) if c.size else 0
    steps = np.arange(top, dtype=float)
    factor = c[..., None] - steps  # c - i for i = 0 .. top - 1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        logs = np.where(factor > 0, np.log(np.maximum(factor, 1e-300)), -np.inf)
        logs = logs - np.log(a)[..., None]
        inverse_b = 1.0 + np.exp(np.cumsum(logs, axis=-1)).sum(axis=-1)
        b = 1.0 / inverse_b
        out = c * b / (c - a * (1.0 - b))
    return np.where(a < c, np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0), 1.0)


_RHO_STEPS = 4096  # the table's load grid: C(c, c rho) at rho = i / 4096


@cache
def _erlang_row(servers: int) -> np.ndarray:
    row = erlang_c_exact(servers, servers * np.linspace(0.0, 1.0, _RHO_STEPS + 1))
    row.setflags(write=False)
    return row


@cache
def _erlang_table(top: int) -> np.ndarray:
    """Rows c = 0 .. top of C(c, c rho) on the load grid (row 0 unused)."""
    table = np.vstack([np.ones(_RHO_STEPS + 1)] + [_erlang_row(c) for c in range(1, top + 1)])
    table.setflags(write=False)
    return table.reshape(-1)


@cache
def _erlang_steps(top: int) -> np.ndarray:
    """table[i + 1] - table[i] of `_erlang_table(top)`: the same subtraction, done once for
    `_LoadTest`, which interpolates on the table 17 times per bisected entry."""
    table = _erlang_table(top)
    steps = np.append(table[1:] - table[:-1], 0.0)
    steps.setflags(write=False)
    return steps


def erlang_c(servers, offered):
    """`erlang_c_exact`, read off a cached table by load (linear between 4,096 steps).

    The calculator evaluates Erlang C inside bisections over millions of candidates; a table
    per pool size, built once, turns each evaluation into one gather. Off by less than 1e-4.
    """
    c, a = np.broadcast_arrays(np.asarray(servers, dtype=float), np.asarray(offered, dtype=float))
    top = int(np.max(c)) if c.size else 0
    table = _erlang_table(max(top, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.clip(a / c, 0.0, 1.0) * _RHO_STEPS
    lo = np.minimum(x.astype(np.int64), _RHO_STEPS - 1)
    frac = x - lo
    base = c.astype(np.int64) * (_RHO_STEPS + 1) + lo
    out = table[base] + frac * (table[base + 1] - table[base])
    return np.where(a < c, out, 1.0)


def wait_tail(rate_per_ms, servers, mean_service_ms, scv):
    """(P(W > 0), theta) of the pooled wait: P(W > t) = C exp(-theta t).

    `scv` is the service time's squared coefficient of variation. theta is 0 when saturated.
    """
    a = np.asarray(rate_per_ms * mean_service_ms, dtype=float)
    c = np.asarray(servers, dtype=float)
    rho = a / c
    wait = erlang_c(c, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = c * (1.0 - rho) / (mean_service_ms * variability(wait, scv))
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
    light = 1.0 - np.sqrt(np.clip(wait_probability / 0.1, 0.0, 1.0))
    return (1.0 + scv) / 2.0 + np.maximum(1.0 - scv, 0.0) / 2.0 * light


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


def exceed_probability(nodes_ms, target_ms):
    """P(S' > T) for S' given at `Z_NODES` quantiles (last axis, increasing along it).

    The quantile of T is interpolated between nodes, so the answer is smooth in T.
    """
    s = np.asarray(nodes_ms, dtype=float)
    t = np.asarray(target_ms, dtype=float)
    shape = np.broadcast_shapes(s.shape[:-1], t.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _NodeGrid(s, shape).exceed(np.broadcast_to(t, shape).reshape(-1))


class _NodeGrid:
    """S' at the `Z_NODES` quantiles as flat rows, for reading P(S' > T) at many T.

    `p99_of_sum_ms` asks at 16 targets per call: the rows are laid out once. `exceed` takes
    the targets flat (one per row) and runs under the caller's `np.errstate` (divide and
    invalid ignored): entering it costs as much as a small array operation.
    """

    def __init__(self, s: np.ndarray, shape: tuple[int, ...]) -> None:
        k = s.shape[-1]
        self.shape, self.k = shape, k
        self.s = np.ascontiguousarray(np.broadcast_to(s, (*shape, k)).reshape(-1, k))
        # Row starts in the flat copy: `take` on flat indices reads the bracketing nodes
        # faster than 2-D fancy indexing (the same elements).
        self.flat = self.s.reshape(-1)
        self.row_start = np.arange(self.s.shape[0]) * k
        self.first, self.last = self.s[:, 0], self.s[:, -1]

    def exceed(self, t: np.ndarray) -> np.ndarray:
        s, k = self.s, self.k
        hi = np.minimum(np.maximum(np.add.reduce(s <= t[:, None], axis=-1), 1), k - 1)
        lo = hi - 1
        at = self.row_start + lo
        s0, s1 = self.flat.take(at), self.flat.take(at + 1)
        frac = np.where(s1 > s0, (t - s0) / (s1 - s0), 1.0)
        z = Z_NODES.take(lo) + np.minimum(np.maximum(frac, 0.0), 1.0) * _Z_STEP.take(lo)
        z = np.where(t < self.first, -np.inf, np.where(t >= self.last, np.inf, z))
        return normal_sf(z).reshape(self.shape)


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
    if np.broadcast_shapes(th.shape, gap.shape) == gap.shape:
        tail_wait = _weighted_exp_sum(np.multiply(-th, gap, out=gap))
    else:
        tail_wait = _weighted_exp_sum(-th * gap)
    return (1.0 - c_wait) * over_ms + c_wait * tail_wait


def _weighted_exp_sum(exponent: np.ndarray) -> np.ndarray:
    """sum_k Z_WEIGHTS[k] exp(exponent[..., k]), in place in `exponent` (a fresh array).

    The same two operations and the same reduction as `(np.exp(x) * Z_WEIGHTS).sum(-1)`, so
    the same bits; without the two temporaries, which for a batch of workloads are megabytes.
    """
    if exponent.shape[-1:] != Z_WEIGHTS.shape or not exponent.flags.writeable:
        return np.add.reduce(np.exp(exponent) * Z_WEIGHTS, axis=-1)
    np.exp(exponent, out=exponent)
    np.multiply(exponent, Z_WEIGHTS, out=exponent)
    return np.add.reduce(exponent, axis=-1)


def p99_of_sum_ms(rate_per_ms, servers, mean_service_ms, scv, nodes_ms):
    """p99 of W + S' at a given load (bisection on the time); inf when saturated."""
    c_wait, theta = wait_tail(rate_per_ms, servers, mean_service_ms, scv)
    s = np.asarray(nodes_ms, dtype=float)
    shape = np.broadcast_shapes(np.shape(c_wait), s.shape[:-1])
    c_wait, theta = np.broadcast_to(c_wait, shape), np.broadcast_to(theta, shape)
    # P(S' > s99) = 1% bounds it below; the 0.5% quantiles of each term bound it above.
    lo = np.broadcast_to(node_quantile(s, P99_TAIL), shape).copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        w995 = np.where(theta > 0, np.log(np.maximum(c_wait / 0.005, 1.0)) / theta, np.inf)
    hi = np.broadcast_to(node_quantile(s, 0.005), shape) + w995
    hi = np.where(np.isfinite(hi), hi, lo)
    # sum_exceed_probability at each midpoint, with the node rows and -theta laid out once.
    grid = _NodeGrid(s, shape)
    neg_theta = -np.asarray(theta, dtype=float)[..., None]
    no_wait = 1.0 - c_wait
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(BISECTIONS):
            mid = (lo + hi) / 2.0
            tail_wait = _weighted_exp_sum(neg_theta * np.maximum(mid[..., None] - s, 0.0))
            over_ms = grid.exceed(mid.reshape(-1)).reshape(shape)
            over = no_wait * over_ms + c_wait * tail_wait > P99_TAIL
            lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
    return np.where(theta > 0, hi, np.inf)


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


def max_rate_per_ms(servers, mean_service_ms, scv, nodes_ms, target_ms, rho_max=RHO_MAX):
    """Largest arrival rate at which p99 of W + S' stays within `target_ms`, exactly.

    P(W + S' > T) grows with the load, so the load is bisected. 0 where even an idle pool
    misses the target (P(S' > T) > 1%); at most `rho_max` of the pool's capacity. Only the
    entries whose answer the bisection decides are bisected (in searches, about 40% are
    either at `rho_max` or at 0); each entry goes through the same steps as alone.
    """
    c = np.asarray(servers, dtype=float)
    mean = np.asarray(mean_service_ms, dtype=float)
    shape = np.broadcast_shapes(
        c.shape, mean.shape, np.shape(scv), np.shape(target_ms), np.shape(nodes_ms)[:-1]
    )
    over = np.broadcast_to(exceed_probability(nodes_ms, target_ms), shape)
    capacity = c / mean  # per ms
    test = _LoadTest(c, mean, scv, nodes_ms, target_ms, over, shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        top_ok = ~test.misses(np.full(test.size, float(rho_max)))
        todo = ~top_ok & ~(test.over > P99_TAIL)
        lo = np.zeros(test.size)
        if todo.any():
            lo[todo] = _bisect_load(test.subset(todo), float(rho_max))
    rho = np.where(top_ok.reshape(shape), rho_max, lo.reshape(shape))
    return np.where(over > P99_TAIL, 0.0, rho * capacity)


def _bisect_load(test: _LoadTest, rho_max: float) -> np.ndarray:
    """The largest load (share of capacity) that meets the target, to 2^-16 of `rho_max`."""
    lo, hi = np.zeros(test.size), np.full(test.size, rho_max)
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2.0
        bad = test.misses(mid)
        lo, hi = np.where(bad, lo, mid), np.where(bad, mid, hi)
    return lo


class _LoadTest:
    """`P(W + S' > T) > 1%` at a load, for `max_rate_per_ms`'s bisection, on flat entries.

    The same arithmetic as `wait_tail`, `erlang_c`, `variability` and `sum_exceed_probability`
    (so the same bits), with what does not depend on the load computed once: the bisection runs
    it 17 times per call, on arrays small enough that numpy's fixed cost per call dominated.
    """

    def __init__(self, c, mean, scv, nodes_ms, target_ms, over, shape) -> None:
        def flat(a) -> np.ndarray:
            return np.broadcast_to(a, shape).reshape(-1)

        scv = np.asarray(scv, dtype=float)
        c_full = np.broadcast_to(c, shape)
        top = int(np.max(c_full)) if c_full.size else 0
        t = np.asarray(target_ms, dtype=float)[..., None]
        gap_ms = np.maximum(t - nodes_ms, 0.0)  # (T - S')+ at each node
        self.table = _erlang_table(max(top, 1))
        self.table_step = _erlang_steps(max(top, 1))
        self.c, self.mean, self.over = flat(c), flat(mean), flat(over)
        self.capacity = flat(c / mean)
        self.scv_half = flat((1.0 + scv) / 2.0)  # variability's two terms without the load
        self.scv_pull = flat(np.maximum(1.0 - scv, 0.0) / 2.0)
        self.row_base = flat(c_full.astype(np.int64) * (_RHO_STEPS + 1))
        self.gap_ms = np.broadcast_to(gap_ms, (*shape, gap_ms.shape[-1])).reshape(
            -1, gap_ms.shape[-1]
        )

    @property
    def size(self) -> int:
        return self.c.size

    def subset(self, mask: np.ndarray) -> _LoadTest:
        out = object.__new__(_LoadTest)
        out.table, out.table_step = self.table, self.table_step
        for name in ("c", "mean", "over", "capacity", "scv_half", "scv_pull", "row_base"):
            setattr(out, name, getattr(self, name)[mask])
        out.gap_ms = self.gap_ms[mask]
        return out

    def misses(self, rho: np.ndarray) -> np.ndarray:
        """Run under `np.errstate(divide="ignore", invalid="ignore")` (the caller's)."""
        c, mean = self.c, self.mean
        a = rho * self.capacity * mean
        load = a / c
        x = np.minimum(np.maximum(load, 0.0), 1.0) * _RHO_STEPS
        lo = np.minimum(x.astype(np.int64), _RHO_STEPS - 1)
        frac = x - lo
        base = self.row_base + lo
        wait = np.where(a < c, self.table[base] + frac * self.table_step[base], 1.0)
        light = 1.0 - np.sqrt(np.minimum(np.maximum(wait / 0.1, 0.0), 1.0))
        theta = c * (1.0 - load) / (mean * (self.scv_half + self.scv_pull * light))
        theta = np.where(load < 1.0, theta, 0.0)
        tail_wait = _weighted_exp_sum(-theta[..., None] * self.gap_ms)
        return (1.0 - wait) * self.over + wait * tail_wait > P99_TAIL
