"""The KV transfer queue at a decode replica's NICs, and the p99 TTFT that includes its wait.

Every transfer into one decode receiver (a TP-only replica, or one DP rank) runs on the same
min(prefill TP, decode TP) NICs (`pools.ingress_rate_per_s`), so transfers arriving while
another is in flight share them (the simulator's `_Link`: processor sharing per receiver). The
ingress cap keeps that link under 90% load but a busy link still delays a transfer: on a 25 Gb/s
TCP path a 7k-token prompt's KV takes 430 ms alone, and at 32% load the simulator's p99 extra
time on the link is 1.1 s (rag-8k-low-maturity-51 of `workload_mix(400, 17)`: the split's p99
TTFT 2.2 s against 1.08 s priced without it).

The extra time is priced as the wait of an M/G/1 queue of transfers (`transfer_wait_tail`):
P(W2 > 0) = rho and, busy, an exponential whose mean grows with the transfer's own size (under
sharing a large transfer is slowed longer; the missed requests in the simulator are the large
prompts). A request's TTFT is the prefill pool's wait W1 + W2 + the service-side time S'
(prefill, transfer alone, first decode step); the p99 of that sum is found by bisection on the
time, as `queueing.p99_of_sum_ms` does with W1 alone. On main's pools for the three splits that
missed (#51, chat-short-328, rag-8k-h200-172 of that mix) it reads 2,155 / 413 / 3,600 ms where
the simulator's p99 is 2,219-2,362 / 308-389 / 4,078-6,167 ms (3 seeds); over the 46 splits on
TCP that fit in that mix, the calculator's p99 over the simulator's is median 1.06, lowest 0.89
(`benchmarks/link_wait_vs_sim.py`; 0.97 and 0.25 without the wait).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.array_helpers import broadcast, broadcast_shape
from disagg_decider.calc.queues.batch_edge import bisect_halves
from disagg_decider.calc.queues.normal_quantiles import (
    P99_TAIL,
    Z_WEIGHTS,
    NodeGrid,
    exceed_probability,
)
from disagg_decider.calc.replicas import prefill


def transfer_wait_tail(rate_per_receiver_ms, transfer_nodes_ms):
    """(P(W2 > 0), theta2 at each node) of the transfer queue at one decode receiver.

    `rate_per_receiver_ms`: requests per ms whose KV lands on that receiver, (W,); the
    transfer time alone at the `Z_NODES` prompt quantiles on the last axis, (W, K).

    M/G/1: P(W2 > 0) = rho. Its mean wait, (1 + cs^2) / 2 E[X] / (1 - rho) (Pollaczek-
    Khinchine), is split into the others' part (cs^2 E[X] / 2) and the transfer's own
    (x / 2): the link is shared, not first come first served, so a large transfer is slowed
    longer than a small one (it shares the link for longer). A transfer of x waits, when
    the link is busy, an exponential time of mean (x + cs^2 E[X]) / 2 / (1 - rho); that
    averages to the M/G/1 mean, and on one transfer size is the M/D/1 wait. theta2 is 0
    when the link is saturated (rho >= 1).
    """
    mean_ms, scale_ms = transfer_scale_ms(np.asarray(transfer_nodes_ms, dtype=float))
    return _transfer_tail(rate_per_receiver_ms, mean_ms, scale_ms)


def transfer_scale_ms(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E[X], the busy link's mean wait at each node times 1 - rho): `transfer_wait_tail`'s
    terms that depend on the transfer times alone, not on the rate."""
    mean_ms, scv = prefill.moments(nodes)
    return mean_ms, (nodes + (scv * mean_ms)[..., None]) / 2.0


@np.errstate(divide="ignore", invalid="ignore")
def _transfer_tail(rate_per_receiver_ms, mean_ms, scale_ms):
    """`transfer_wait_tail` from `transfer_scale_ms`' terms."""
    rho = np.asarray(rate_per_receiver_ms, dtype=float) * mean_ms
    theta = (1.0 - rho)[..., None] / scale_ms
    theta = np.where((rho < 1.0)[..., None] & (scale_ms > 0), theta, 0.0)
    return np.minimum(rho, 1.0), theta


def two_waits_exceed(c1, theta1, c2, theta2, gap_ms):
    """P(W1 + W2 > g) for g = `gap_ms` >= 0, each wait an atom at 0 plus an exponential tail.

    Both waiting: the hypoexponential tail (theta2 e^-theta1 g - theta1 e^-theta2 g) /
    (theta2 - theta1), or (1 + theta g) e^-theta g where the rates (nearly) agree.
    """
    return TwoWaits(c1, theta1, c2, theta2).exceed(gap_ms)


class TwoWaits:
    """`two_waits_exceed` with what does not depend on the gap worked out once.

    `p99_with_transfer_wait_ms` reads the tail at 16 gaps per call (a bisection on the time):
    the rates' difference, which of them (nearly) agree, the divisor and the three weights of
    the atoms are the same at each, so about half the operations of a reading were repeats.
    The same operations on the same values in the same order: the same bits.
    """

    def __init__(self, c1, theta1, c2, theta2) -> None:
        c1, c2 = np.asarray(c1, dtype=float), np.asarray(c2, dtype=float)
        self.t1, self.t2 = np.asarray(theta1, dtype=float), np.asarray(theta2, dtype=float)
        self.neg_t1, self.neg_t2 = -self.t1, -self.t2  # -t g parses as (-t) g
        diff = self.t2 - self.t1
        self.close = np.abs(diff) <= 1e-6 * np.maximum(self.t1, self.t2)
        self.any_close = bool(self.close.any())  # else `exceed_quiet` reads only the quotient
        self.divisor = np.where(self.close, 1.0, diff)
        self.only_first, self.only_second = c1 * (1.0 - c2), c2 * (1.0 - c1)
        self.both_wait = c1 * c2

    def exceed(self, gap_ms) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.exceed_quiet(np.asarray(gap_ms, dtype=float))

    def exceed_quiet(self, g: np.ndarray) -> np.ndarray:
        """`exceed` at a float array of gaps, under the caller's `np.errstate` (divide and
        invalid ignored): `p99_with_transfer_wait_ms` reads 16 gaps inside its own."""
        t1, t2 = self.t1, self.t2
        e1, e2 = np.exp(self.neg_t1 * g), np.exp(self.neg_t2 * g)
        both = (t2 * e1 - t1 * e2) / self.divisor
        if self.any_close:  # where no rates agree, the selection would keep `both` whole
            both = np.where(self.close, (1.0 + t1 * g) * e1, both)
        return self.only_first * e1 + self.only_second * e2 + self.both_wait * both


def p99_with_transfer_wait_ms(c1, theta1, c2, theta2, nodes_ms):
    """p99 of W1 + W2 + S' (inf where either queue is saturated).

    P(W1 + W2 + S' > T) = (1 - c1)(1 - c2) P(S' > T) + E[P(W1 + W2 > T - S'; a wait) ...],
    read on the quantile nodes as `queueing.sum_exceed_probability` reads one wait's tail.
    Arrays (W,) with nodes (W, K).
    """
    return _Bisection(c1, theta1, c2, theta2, ServiceNodes(nodes_ms)).p99()


def p99_with_transfer_wait_within(c1, theta1, c2, theta2, nodes_ms, limit_ms) -> np.ndarray:
    """Whether `p99_with_transfer_wait_ms(c1, theta1, c2, theta2, nodes_ms) <= limit_ms`, the
    bisection stopped once every row's answer is known: its bracket only narrows (a midpoint
    lies between its ends), so a row whose upper end is already within the limit ends
    within it, and one whose lower end is past it ends past it. The same answer, in the
    steps the rows need (`short_split_load` asks at 14 loads, most of them far from the
    target at first)."""
    return _Bisection(c1, theta1, c2, theta2, ServiceNodes(nodes_ms)).within(limit_ms)


class ServiceNodes:
    """The service-side time S' at the quantile nodes (W, K) as `_Bisection` reads it: its two
    quantiles that start the bracket and its `NodeGrid`. None depends on the rate, so a
    bisection on the rate (`short_split_load`) or a search over sizes
    (`grow_for_transfer_wait`) lays them out once for all its tests (read only)."""

    def __init__(self, nodes_ms) -> None:
        s = np.asarray(nodes_ms, dtype=float)
        self.s, self.shape = s, s.shape[:-1]
        self.q99 = queueing.node_quantile(s, P99_TAIL)
        self.q0033 = queueing.node_quantile(s, 0.0033)
        self.grid = NodeGrid(s, self.shape)


class SplitNodes:
    """A split's service-side nodes (`ServiceNodes`) and its KV transfers' terms
    (`transfer_scale_ms`): what `split_ttft_p99_ms` reads that does not depend on the rate or
    the pools' sizes."""

    def __init__(self, service_nodes_ms, transfer_nodes_ms) -> None:
        self.service = ServiceNodes(service_nodes_ms)
        t_nodes = np.asarray(transfer_nodes_ms, dtype=float)
        self.transfer_mean_ms, self.transfer_scale_ms = transfer_scale_ms(t_nodes)


class _Bisection:
    """The p99 bisection on the time of `p99_with_transfer_wait_ms`: its bracket and steps."""

    def __init__(self, c1, theta1, c2, theta2, nodes: ServiceNodes) -> None:
        s, shape = nodes.s, nodes.shape
        c1, t1, c2 = (broadcast(np.asarray(a, dtype=float), shape) for a in (c1, theta1, c2))
        t2 = broadcast(np.asarray(theta2, dtype=float), s.shape)
        self.saturated = ~((t1 > 0) & (t2 > 0).all(axis=-1))
        safe1 = np.where(self.saturated, 1.0, t1)
        safe2 = np.where(self.saturated[..., None] | ~(t2 > 0), 1.0, t2)
        self.no_wait = (1.0 - c1) * (1.0 - c2)
        self.lo = nodes.q99
        # Each term's 0.33% quantile bounds the sum's 1% quantile from above.
        w1 = np.log(np.maximum(c1 / 0.0033, 1.0)) / safe1
        w2 = np.log(np.maximum(c2 / 0.0033, 1.0)) / safe2.min(axis=-1)
        self.hi = nodes.q0033 + w1 + w2
        c1e, t1e, c2e = (a[..., None] for a in (c1, safe1, c2))
        self.two_waits = TwoWaits(c1e, t1e, c2e, safe2)
        self.grid = nodes.grid
        self.s, self.shape = s, shape

    def p99(self) -> np.ndarray:
        """The p99 of the time with both waits; inf where a queue is saturated."""
        return np.where(self.saturated, np.inf, self.run())

    def within(self, limit_ms) -> np.ndarray:
        """Whether the p99 is within `limit_ms`, the steps stopped once every row is decided."""
        limit = np.asarray(limit_ms, dtype=float)
        return ~self.saturated & (self.run(limit) <= limit)

    @np.errstate(divide="ignore", invalid="ignore")
    def run(self, limit=None) -> np.ndarray:
        """The bracket's upper end after `queueing.BISECTIONS` steps (`p99_of_sum_ms`'s); with a
        `limit`, stopped once every row's end is known to fall within it or past it."""
        lo, hi, s, two_waits, grid = self.lo, self.hi, self.s, self.two_waits, self.grid
        for _ in range(queueing.BISECTIONS):
            if limit is not None and ((hi <= limit) | (lo > limit) | self.saturated).all():
                break
            mid = (lo + hi) / 2.0
            gap = np.maximum(mid[..., None] - s, 0.0)
            waits = np.add.reduce(two_waits.exceed_quiet(gap) * Z_WEIGHTS, axis=-1)
            # `NodeGrid.exceed` takes the times flat and answers in the grid's shape.
            over_ms = grid.exceed(mid if mid.ndim == 1 else mid.reshape(-1))
            over = self.no_wait * over_ms + waits > P99_TAIL
            lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
        return hi


def split_ttft_p99_ms(pool, prefill_replicas, rate_per_s, receivers, transfer_nodes_ms, nodes=None):
    """p99 TTFT of a split carrying `rate_per_s`: the prefill pool's wait (M/G/c over
    `prefill_replicas`), the wait for a decode receiver's link (its share of the rate over
    `receivers`, decode replicas x DP ranks) and the service-side time (`pool.nodes_ms`).
    `nodes`: `SplitNodes(pool.nodes_ms, transfer_nodes_ms)`, where the caller has it."""
    b = _split_bisection(pool, prefill_replicas, rate_per_s, receivers, transfer_nodes_ms, nodes)
    return b.p99()


def split_ttft_within(
    pool, prefill_replicas, rate_per_s, receivers, transfer_nodes_ms, limit_ms, nodes=None
):
    """Whether `split_ttft_p99_ms(...) <= limit_ms` (`p99_with_transfer_wait_within`)."""
    b = _split_bisection(pool, prefill_replicas, rate_per_s, receivers, transfer_nodes_ms, nodes)
    return b.within(limit_ms)


def _split_bisection(pool, prefill_replicas, rate_per_s, receivers, transfer_nodes_ms, nodes):
    """`split_ttft_p99_ms`' bisection, its bracket set; the rate-free terms from `nodes`."""
    if nodes is None:
        nodes = SplitNodes(pool.nodes_ms, transfer_nodes_ms)
    rate_per_ms = np.asarray(rate_per_s, dtype=float) / 1e3
    c1, theta1 = queueing.wait_tail(rate_per_ms, prefill_replicas, pool.mean_ms, pool.scv)
    c2, theta2 = _transfer_tail(
        rate_per_ms / receivers, nodes.transfer_mean_ms, nodes.transfer_scale_ms
    )
    return _Bisection(c1, theta1, c2, theta2, nodes.service)


ROUNDS = 32  # replicas added, one per round, where the wait still misses the target


def grow_for_transfer_wait(
    pool, x, y, p_gpus, d_gpus, d_dp, rate_per_s, transfer_nodes_ms, target_ms, sized
):
    """(x, y, p99 TTFT): the sized split, a replica added at a time where its p99 TTFT with
    the transfer wait misses the target (`sized` rows only).

    Each round adds the replica that lowers the p99 most per GPU: a decode replica shortens
    the transfer queue (more receivers share the rate), a prefill replica the prefill queue.
    The pool sizing that gave (x, y) priced neither queue against the other, so a split whose
    prefill pool fits alone can miss once its transfers wait too.
    """
    x, y = np.array(x, dtype=float), np.array(y, dtype=float)
    nodes = SplitNodes(pool.nodes_ms, transfer_nodes_ms)

    def p99(xs, ys):
        return split_ttft_p99_ms(pool, xs, rate_per_s, ys * d_dp, transfer_nodes_ms, nodes)

    ttft = p99(x, y)
    for _ in range(ROUNDS):
        short = sized & ~(ttft <= target_ms * (1.0 + 1e-9))
        if not short.any():
            break
        more_d, more_p = p99(x, y + 1.0), p99(x + 1.0, y)
        with np.errstate(invalid="ignore"):
            gain_d = (ttft - more_d) / d_gpus
            gain_p = (ttft - more_p) / p_gpus
        decode_first = ~(gain_p > gain_d)  # ties and infinities: the transfer queue first
        y = np.where(short & decode_first, y + 1.0, y)
        x = np.where(short & ~decode_first, x + 1.0, x)
        ttft = np.where(short, np.where(decode_first, more_d, more_p), ttft)
    return x, y, ttft


LOAD_BISECTIONS = 20  # halvings of the link's load: 0.9 / 2^20, a millionth of its capacity


@np.errstate(divide="ignore", invalid="ignore")
def receiver_rate_per_s(transfer_nodes_ms, nodes_ms, target_ms, most_load=0.9, needed=None):
    """Requests per second one decode receiver takes with the p99 of W2 + S' inside the
    target: its link's wait plus the service-side time, the prefill queue aside.

    The search's cap on a decode replica's rate beside its NICs' 90% (`pools.
    ingress_rate_per_s`): without it the best split of a cluster over a slow link loads each
    link until its transfers wait longer than the TTFT target allows. The load is bisected
    (P(W2 + S' > T) grows with it); 0 where S' alone misses the target (no prefill pool
    serves such a row either). Arrays on any axes, nodes last.

    `needed` (a mask on the axes before the nodes, broadcast to them) prices only the entries
    a caller reads: the others read inf (no cap of their own) without their nodes' tails or
    their load's twenty halvings. Each entry is priced from its own nodes alone (every
    reduction runs over its nodes; `tests/test_transfer_queue.py` compares the bits), so a
    needed entry reads what the whole call gives it. A search over every (prefill, decode)
    layout pair needs only the pairs its rule allows, about a quarter of them on the mix.
    """
    t_nodes = np.asarray(transfer_nodes_ms, dtype=float)
    s = np.asarray(nodes_ms, dtype=float)
    shape = broadcast_shape(t_nodes.shape, s.shape)
    t_nodes, s = broadcast(t_nodes, shape), broadcast(s, shape)
    target = broadcast(np.asarray(target_ms, dtype=float), shape[:-1])
    if needed is not None:  # the needed entries, one after the other, as one call's rows
        keep = broadcast(np.asarray(needed, dtype=bool), shape[:-1])
        out = np.full(shape[:-1], np.inf)
        if keep.any():
            out[keep] = receiver_rate_per_s(t_nodes[keep], s[keep], target[keep], most_load)
        return out
    mean_ms, scale_ms = transfer_scale_ms(t_nodes)
    over_alone = exceed_probability(s, target)
    # theta2 = (1 - rho) / scale at each node (`transfer_wait_tail`): the exponent of the
    # wait's tail at the target's gap is -(1 - rho) gap / scale, laid out once.
    gap = np.maximum(target[..., None] - s, 0.0)
    ratio = np.where(gap > 0, gap / np.where(scale_ms > 0, scale_ms, 1.0), 0.0)
    ratio = np.where((scale_ms > 0) | (gap == 0), ratio, np.inf)

    def over(rho, r, alone):
        tail = np.add.reduce(np.exp(-(1.0 - rho)[..., None] * r) * Z_WEIGHTS, axis=-1)
        return (1.0 - rho) * alone + rho * tail > P99_TAIL

    served = (mean_ms > 0) & ~(over_alone > P99_TAIL)
    most = np.full(shape[:-1], float(most_load))
    open_ = served & over(most, ratio, over_alone)  # the link's 90% misses: bisect the load
    load = np.where(served, most, 0.0)
    if open_.any():
        r, alone = ratio[open_], over_alone[open_]
        lo, hi = np.zeros(len(r)), np.full(len(r), float(most_load))
        for _ in range(LOAD_BISECTIONS):
            rho = (lo + hi) / 2.0
            miss = over(rho, r, alone)
            lo, hi = np.where(miss, lo, rho), np.where(miss, rho, hi)
        load[open_] = lo
    return np.where(mean_ms > 0, load / np.where(mean_ms > 0, mean_ms, 1.0) * 1e3, np.inf)


RATE_BISECTIONS = 14  # halvings of a short split's rate: within 0.01% of the pool's own
# Halvings per test call: the 3 rates two steps may visit, tried at once (7 calls, not 14;
# a call's fixed cost, a p99 bisection's ~400 numpy calls, outweighs its rows on the few
# short splits of a block).
RATE_LEVELS = 2


def short_split_load(pool, prefill_replicas, receivers, transfer_nodes_ms, most_per_s, rows):
    """(rate, p99 TTFT) of the splits in `rows` (a mask): the largest rate up to
    `most_per_s` whose p99 TTFT with both waits fits the pool's target, and that p99; NaN
    elsewhere. The load a split short of GPUs for the workload's rate runs at: the prefill
    pool's own rate (`most_per_s`) prices its wait alone, its transfers' wait takes a little
    off. Bisected on the rate (the p99 grows with it); (W,) rows, nodes last."""
    shape = np.shape(rows)
    rate, ttft = np.full(shape, np.nan), np.full(shape, np.nan)
    index = np.flatnonzero(rows)
    if not len(index):
        return rate, ttft
    some = prefill.Pool(
        *(
            broadcast(getattr(pool, f), shape + np.shape(getattr(pool, f))[len(shape) :])[index]
            for f in _POOL_FIELDS
        )
    )
    x, n, most = (broadcast(a, shape)[index] for a in (prefill_replicas, receivers, most_per_s))
    t_nodes = np.asarray(transfer_nodes_ms)[index]
    at_most = split_ttft_p99_ms(some, x, most, n, t_nodes)
    short = ~(at_most <= some.target_ms * (1.0 + 1e-9)) & (most > 0)
    rate[index], ttft[index] = most, at_most
    if short.any():
        # Only the short splits are bisected (each row's on its own values: the same bits as
        # among the others), each load's test stopped once decided.
        index, keep = index[short], np.flatnonzero(short)
        some = some.rows(keep)
        x, n, most, t_nodes = x[keep], n[keep], most[keep], t_nodes[keep]
        lo, _ = bisect_halves(
            _RatesFit(some, x, n, t_nodes), np.zeros(len(keep)), most, RATE_BISECTIONS, RATE_LEVELS
        )
        nodes = SplitNodes(some.nodes_ms, t_nodes)
        rate[index], ttft[index] = lo, split_ttft_p99_ms(some, x, lo, n, t_nodes, nodes)
    return rate, ttft


class _RatesFit:
    """`short_split_load`'s test at rates (R, P), P per split: whether each split's p99 TTFT
    at that rate fits its target (`split_ttft_within`), every rate of a split as one more row
    of it. Each width's rows (the pool, sizes and rate-free nodes) are laid out once, at its
    first call, for every later one (`bisect_halves` asks the same width each step but
    perhaps the last)."""

    def __init__(self, pool, x, receivers, transfer_nodes_ms) -> None:
        self.pool, self.x, self.receivers, self.transfer = pool, x, receivers, transfer_nodes_ms
        self.rows: dict[int, tuple] = {}

    def __call__(self, rates: np.ndarray) -> np.ndarray:
        width = rates.shape[1]
        if width not in self.rows:
            each = np.repeat(np.arange(len(self.x)), width)
            pool = self.pool.rows(each)
            t_nodes = self.transfer[each]
            nodes = SplitNodes(pool.nodes_ms, t_nodes)
            self.rows[width] = (pool, self.x[each], self.receivers[each], t_nodes, nodes)
        pool, x, n, t_nodes, nodes = self.rows[width]
        fits = split_ttft_within(pool, x, rates.reshape(-1), n, t_nodes, pool.target_ms, nodes)
        return fits.reshape(rates.shape)


_POOL_FIELDS = tuple(f.name for f in fields(prefill.Pool))  # broadcast alike above
