"""The largest arrival rate a pool sustains within a p99 target: bisection on its load.

Split from `queueing` (which re-exports `max_rate_per_ms`, `RHO_MAX` and `BISECTIONS`): the
test at a load is `queueing.wait_tail` + `queueing.sum_exceed_probability`, laid out so the 17
tests of a bisection repeat only what depends on the load (`_LoadTest`), and for a few entries
in plain floats (`_FewEntries`).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from disagg_decider.calc.queues.array_helpers import (
    broadcast,
    broadcast_flat,
    broadcast_shape,
    node_major_sum,
    shape_of,
)
from disagg_decider.calc.queues.bisection_replay import bisection_grid, replay
from disagg_decider.calc.queues.erlang import (
    RHO_STEPS,
    TABLE_ROWS,
    erlang_steps,
    erlang_table,
    grid_pair,
    interpolated,
    table_top,
)
from disagg_decider.calc.queues.node_planes import Z_WEIGHTS_COLUMN
from disagg_decider.calc.queues.normal_quantiles import (
    P99_TAIL,
    Z_WEIGHTS,
    exceed_probability,
    weighted_exp_sum,
)

RHO_MAX = 0.95  # never plan a server hotter than this
# From this many entries a load test holds its node gaps node-major (`_LoadTest`): its tail
# sums then run 2-3x faster than numpy's along rows (measured from ~1,000 entries; even at
# ~200); below, `node_major_sum`'s few more calls cost more, and one decision's tests (up
# to ~850 entries on the examples) keep their calls.
NODE_MAJOR_ENTRIES = 1024
BISECTIONS = 16  # load and time bisection steps: 2^-16 of the bracket


@np.errstate(divide="ignore", invalid="ignore")
def max_rate_per_ms(servers, mean_service_ms, scv, nodes_ms, target_ms, rho_max=RHO_MAX):
    """Largest arrival rate at which p99 of W + S' stays within `target_ms`, exactly.

    P(W + S' > T) grows with the load, so the load is bisected. 0 where even an idle pool
    misses the target (P(S' > T) > 1%); at most `rho_max` of the pool's capacity. Only the
    entries whose answer the bisection decides are bisected (in searches, about 40% are
    either at `rho_max` or at 0); each entry goes through the same steps as alone.
    """
    c = np.asarray(servers, dtype=float)
    mean = np.asarray(mean_service_ms, dtype=float)
    shape = broadcast_shape(
        c.shape, mean.shape, shape_of(scv), shape_of(target_ms), shape_of(nodes_ms)[:-1]
    )
    over = broadcast(exceed_probability(nodes_ms, target_ms), shape)
    capacity = c / mean  # per ms
    test = _LoadTest(c, mean, scv, nodes_ms, target_ms, over, shape)
    few = _FewEntries.of(test)
    if few is not None:
        p_top = np.array(few.probabilities([float(rho_max)] * test.size))
    else:
        p_top = test.probability(np.full(test.size, float(rho_max)), test.below_one(rho_max))
    top_ok = ~(p_top > P99_TAIL)
    todo = ~top_ok & ~(test.over > P99_TAIL)
    lo = np.zeros(test.size)
    if todo.any():
        subset = test.subset(todo)
        few = _FewEntries.of(subset)
        if few is not None and subset.size <= REPLAY_ENTRIES:
            lo[todo] = few.replayed(float(rho_max), p_top[todo].tolist())
        elif few is not None:
            lo[todo] = few.bisect(float(rho_max))
        else:
            lo[todo] = _bisect_load(subset, float(rho_max))
    rho = np.where(top_ok.reshape(shape), rho_max, lo.reshape(shape))
    return np.where(over > P99_TAIL, 0.0, rho * capacity)


def _bisect_load(test: _LoadTest, rho_max: float) -> np.ndarray:
    """The largest load (share of capacity) that meets the target, to 2^-16 of `rho_max`.

    Plain bisection: on many entries a round of `bisection_replay` costs as many numpy calls as two
    tests here (measured: replaying this loop made decisions slower), so only the plain-float
    path on one or two entries (`_FewEntries.replayed`, `REPLAY_ENTRIES`) replays."""
    lo, hi = np.zeros(test.size), np.full(test.size, rho_max)
    below_one = test.below_one(rho_max)  # every midpoint lies in (0, rho_max]
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2.0
        bad = test.probability(mid, below_one) > P99_TAIL  # `misses`, one frame fewer a step
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
            return broadcast_flat(a, shape)

        scv = np.asarray(scv, dtype=float)
        c_full = broadcast(c, shape)
        top = int(c_full.max()) if c_full.size else 0
        t = np.asarray(target_ms, dtype=float)[..., None]
        gap_ms = np.maximum(t - nodes_ms, 0.0)  # (T - S')+ at each node
        rows = table_top(c) if top > TABLE_ROWS else max(top, 1)
        self.table, self.table_step = erlang_table(rows), erlang_steps(rows)
        self.c, self.mean, self.over = flat(c), flat(mean), flat(over)
        # Pools beyond the table (`erlang.interpolated`) read its row 0 and are then replaced.
        self.large = (self.c > TABLE_ROWS) if top > TABLE_ROWS else None
        self.capacity = flat(c / mean)
        self.scv_half = flat((1.0 + scv) / 2.0)  # variability's two terms without the load
        self.scv_pull = flat(np.maximum(1.0 - scv, 0.0) / 2.0)
        rows = c_full.astype(np.int64)
        if self.large is not None:
            rows = np.where(c_full > TABLE_ROWS, 0, rows)
        self.row_base = flat(rows * (RHO_STEPS + 1))
        # -(T - S')+: theta (-gap) is -(theta gap) rounded, bit for bit the same as
        # (-theta) gap (round to nearest is symmetric in sign), one negation fewer per test.
        # On many entries node-major, (K, entries): each test's tail sum then adds whole node
        # planes (`node_major_sum`), the same bits as numpy's sum along each entry's row.
        k = gap_ms.shape[-1]
        rows = broadcast(gap_ms, (*shape, k)).reshape(-1, k)
        self.node_major = rows.shape[0] >= NODE_MAJOR_ENTRIES
        self.neg_gap = np.negative(rows.T if self.node_major else rows, order="C")
        self.moderate: bool | None = None  # `_moderate`, worked out when first asked

    @property
    def size(self) -> int:
        return self.c.size

    def subset(self, mask: np.ndarray) -> _LoadTest:
        out = object.__new__(_LoadTest)
        out.table, out.table_step = self.table, self.table_step
        out.moderate = self.moderate  # of every entry, so of these (or not known yet)
        out.large = None if self.large is None else self.large[mask]
        for name in ("c", "mean", "over", "capacity", "scv_half", "scv_pull", "row_base"):
            setattr(out, name, getattr(self, name)[mask])
        out.node_major = self.node_major
        # `compress` lays the kept entries out afresh (a mask's indexing would leave the
        # node-major planes strided).
        out.neg_gap = self.neg_gap.compress(mask, axis=1 if self.node_major else 0)
        return out

    def below_one(self, rho_max: float) -> bool:
        """Whether every load in [0, rho_max] keeps 0 <= load < 1 and a < c in `misses`.

        a = fl(fl(rho capacity) mean) and load = fl(a / c) with capacity = fl(c / mean): with
        every operand and result a normal float (`_moderate`), each rounding is within a factor
        1 + 2^-53, so a <= rho c (1 + 2^-53)^3 < c and load <= rho (1 + 2^-53)^4 < 1 for any
        rho <= 0.99; and both are >= 0 for rho >= 0. `misses` may then skip the clamps of the
        load to [0, 1] and of its table step to 4095, and the two selections on a < c and
        load < 1, which all return their input unchanged there.
        """
        if not 0.0 <= rho_max <= _BELOW_ONE_RHO:
            return False
        if self.moderate is None:
            self.moderate = _moderate(self.c, self.mean, self.capacity)
        return self.moderate

    def misses(self, rho: np.ndarray, below_one: bool = False) -> np.ndarray:
        """Run under `np.errstate(divide="ignore", invalid="ignore")` (the caller's).

        `below_one` (from `below_one`, for loads rho in [0, rho_max]) skips the operations
        that are identities there; the rest is the same arithmetic.
        """
        return self.probability(rho, below_one) > P99_TAIL

    def probability(self, rho: np.ndarray, below_one: bool = False) -> np.ndarray:
        """P(W + S' > T) at each entry's load, the value `misses` compares with 1%."""
        c, mean = self.c, self.mean
        a = rho * self.capacity * mean
        load = a / c
        if below_one:
            x = load * RHO_STEPS
            lo = x.astype(np.int64)
        else:
            x = np.minimum(np.maximum(load, 0.0), 1.0) * RHO_STEPS
            lo = np.minimum(x.astype(np.int64), RHO_STEPS - 1)
        frac = x - lo
        base = self.row_base + lo
        wait = self.table.take(base) + frac * self.table_step.take(base)
        if self.large is not None and self.large.any():
            wait[self.large] = interpolated(c[self.large], x[self.large])
        if below_one:
            # wait = t0 + frac (t1 - t0) between two table values in [0, 1], frac in [0, 1):
            # for t1 >= t0 every term is >= 0; for t1 < t0, |t1 - t0| <= t0 rounds to at most
            # t0, so does frac times it, and t0 less that is >= +0. The clamp at 0 is an
            # identity too.
            light = 1.0 - np.sqrt(np.minimum(wait / 0.1, 1.0))
        else:
            wait = np.where(a < c, wait, 1.0)
            light = 1.0 - np.sqrt(np.minimum(np.maximum(wait / 0.1, 0.0), 1.0))
        theta = c * (1.0 - load) / (mean * (self.scv_half + self.scv_pull * light))
        if not below_one:
            theta = np.where(load < 1.0, theta, 0.0)
        if self.node_major:  # theta[:, None] * gaps, the same values, node-major
            exponent = self.neg_gap * theta
            np.exp(exponent, out=exponent)  # `weighted_exp_sum`, inline
            np.multiply(exponent, Z_WEIGHTS_COLUMN, out=exponent)
            tail_wait = node_major_sum(exponent)
        else:
            exponent = theta[:, None] * self.neg_gap
            np.exp(exponent, out=exponent)
            np.multiply(exponent, Z_WEIGHTS, out=exponent)
            tail_wait = np.add.reduce(exponent, axis=-1)
        return (1.0 - wait) * self.over + wait * tail_wait


_BELOW_ONE_RHO = 0.99  # loads up to this share keep `misses`' load below 1 (`below_one`)


@np.errstate(invalid="ignore")
def _moderate(c: np.ndarray, mean: np.ndarray, capacity: np.ndarray) -> bool:
    """Servers and mean service within [1e-100, 1e100] (so their ratio within [1e-200,
    1e200], and every product and quotient `misses` forms at a load in [2^-17, 1] a normal
    float): where the rounding bounds of `_LoadTest.below_one` hold."""
    inside = (c >= 1e-100) & (c <= 1e100) & (mean >= 1e-100) & (mean <= 1e100)
    return bool(inside.all() and np.isfinite(capacity).all())


FEW_ENTRIES = 8  # up to this many entries, `_FewEntries` tests them in plain floats
# Up to this many, `_FewEntries.replayed` rather than `bisect`: its rounds last as long as the
# slowest entry's search and its bookkeeping is per entry, so it wins on one or two entries
# only (`benchmarks/replay_rounds.py`, CPU us per bisection over the examples and 120 mixed
# workloads, loop against replay: 159/139 on one entry, 199/165 on two, 207/247 on three,
# 415/556 on eight).
REPLAY_ENTRIES = 2


class _FewEntries:
    """`_LoadTest.misses` and `_bisect_load` for a few entries, in plain floats.

    Single pools are sized one at a time (a prefill pool's one-replica rate, a chosen size
    priced again): the bisection then runs 17 tests on one or two entries, where each of the
    test's ~40 numpy calls cost far more than the arithmetic. Every entry goes through
    `misses`' IEEE operations in the same order (+, -, *, /, sqrt, the clamps and comparisons
    round the same in Python as in numpy; the Erlang table is read at the same index; the
    truncation to the load step is the same); the tail sum over the 25 nodes is still numpy's
    exp and pairwise sum on the same rows. Only for entries whose every input is finite with
    c, mean > 0 (`of` checks), where the load is finite and every test is well defined.
    """

    __slots__ = (
        "base",
        "c",
        "capacity",
        "half",
        "large",
        "mean",
        "neg_gap_ms",
        "over",
        "pull",
        "test",
    )

    def __init__(self, test: _LoadTest) -> None:
        self.test = test
        self.c, self.mean = test.c.tolist(), test.mean.tolist()
        self.capacity, self.over = test.capacity.tolist(), test.over.tolist()
        self.half, self.pull = test.scv_half.tolist(), test.scv_pull.tolist()
        self.base = test.row_base.tolist()
        self.large = [False] * len(self.c) if test.large is None else test.large.tolist()
        # Rows, for `weighted_exp_sum`.
        self.neg_gap_ms = np.ascontiguousarray(test.neg_gap.T) if test.node_major else test.neg_gap

    def twice(self) -> _FewEntries:
        """These entries twice over (every list repeated, the gaps' rows too): two loads per
        entry in one test, for `replayed`."""
        out = object.__new__(_FewEntries)
        out.test = self.test
        for name in ("c", "mean", "capacity", "over", "half", "pull", "base", "large"):
            values = getattr(self, name)
            setattr(out, name, values + values)
        out.neg_gap_ms = np.concatenate((self.neg_gap_ms, self.neg_gap_ms))
        return out

    @staticmethod
    def of(test: _LoadTest) -> _FewEntries | None:
        if not 0 < test.size <= FEW_ENTRIES:
            return None
        values = np.concatenate(
            (test.c, test.mean, test.capacity, test.over, test.scv_half, test.scv_pull)
        )
        if not (np.isfinite(values).all() and (test.c > 0).all() and (test.mean > 0).all()):
            return None
        return _FewEntries(test)

    def misses(self, rhos: list[float]) -> list[bool]:
        return [p > P99_TAIL for p in self.probabilities(rhos)]

    def probabilities(self, rhos: list[float]) -> list[float]:
        """P(W + S' > T) at each entry's load: `_LoadTest.probability` in plain floats."""
        table, table_step = self.test.table, self.test.table_step
        # Clamps as comparisons, lists filled in place: the same values as min/max (nan and
        # -0.0 pass through alike), without a builtin call per clamp on every entry and load.
        n = len(self.c)
        waits, thetas = [0.0] * n, [0.0] * n
        top = RHO_STEPS - 1
        for i, (rho, c, mean, capacity, half, pull, base, large) in enumerate(
            zip(
                rhos,
                self.c,
                self.mean,
                self.capacity,
                self.half,
                self.pull,
                self.base,
                self.large,
                strict=True,
            )
        ):
            a = rho * capacity * mean
            load = a / c
            x = (0.0 if load < 0.0 else 1.0 if load > 1.0 else load) * RHO_STEPS
            lo = int(x)
            if lo > top:
                lo = top
            frac = x - lo
            if large and a < c:
                at_lo, at_hi = grid_pair(int(c), lo)
                wait = at_lo + frac * (at_hi - at_lo)
            else:
                wait = (
                    float(table[base + lo]) + frac * float(table_step[base + lo]) if a < c else 1.0
                )
            share = wait / 0.1
            light = 1.0 - math.sqrt(0.0 if share < 0.0 else 1.0 if share > 1.0 else share)
            if load < 1.0:
                scale = mean * (half + pull * light)
                top_c = c * (1.0 - load)
                thetas[i] = top_c / scale if scale != 0 else math.copysign(math.inf, scale)
            waits[i] = wait
        exponent = np.array(thetas)[:, None] * self.neg_gap_ms
        tail_wait = weighted_exp_sum(exponent).tolist()
        return [
            (1.0 - wait) * over + wait * tail
            for wait, over, tail in zip(waits, self.over, tail_wait, strict=True)
        ]

    def replayed(self, rho_max: float, p_top: list[float]) -> np.ndarray:
        """`bisect`'s answer from fewer tests (`bisection_replay`; `p_top`: the miss probability at
        `rho_max`, already tested): every load tested is one `bisect` could visit, tested the
        same way, so with a test monotone in the load the same grid point."""
        grid = _grid_list(rho_max)
        return np.array(replay(self.twice().probabilities, grid, self.over, p_top, P99_TAIL))

    def bisect(self, rho_max: float) -> np.ndarray:
        """`_bisect_load` on these entries."""
        n = len(self.c)
        lo, hi = [0.0] * n, [rho_max] * n
        for _ in range(BISECTIONS):
            mid = [(a + b) / 2.0 for a, b in zip(lo, hi, strict=True)]
            for i, bad in enumerate(self.misses(mid)):
                if bad:
                    hi[i] = mid[i]
                else:
                    lo[i] = mid[i]
        return np.array(lo)


@cache
def _grid_list(rho_max: float) -> list[float]:
    """`bisection_replay.bisection_grid` as floats, for `_FewEntries.replayed`."""
    return bisection_grid(rho_max, BISECTIONS).tolist()
