"""The conditional layout's TTFT target on all requests: 99% of them, not 99% of each part.

The SLO (and the simulator's goodput) counts every request: a layout meets it when at most 1%
of ALL requests miss the TTFT target. The conditional layout serves two kinds of request,
the long prompts prefilled by the pool (a share s of them) and the short ones prefilled on
the decode workers, so it meets the target when

    s P(pooled TTFT > target) + (1 - s) P(local TTFT > target) <= 1%

which lets the part with slack carry some of the other's misses: requiring each part's own
p99 within the target (what the search prices, an inner bound) prices the layout low, most
where one part binds and the other has room (issue 14e's diagnosis: at 21 req/s the long
prompts' p99 was 2.46 s while 98.9% of all requests met 2 s).

Here, for a candidate already sized and settled part by part (its goodput a rate at which
both parts meet their own p99, so the sum meets 1% too), `lift` finds the largest rate the
combined miss allows, by bisection on the rate between that goodput and the candidate's
capacity on every other limit (the prefill pool at `queueing.RHO_MAX`, the decode workers'
TPOT, memory and chunk limits, the KV ingress); `overall_p99_ms` is the layout's p99 TTFT
over all requests at a rate (the time whose combined miss is 1%). Both read each part's miss
probability off the same queueing primitives the parts are sized with (`queueing.wait_tail`,
`queueing.sum_exceed_probability`), so a layout priced here reports an overall p99 within
its target. The TPOT is one part already (every request decodes on the decode workers).

Every operation is element-wise per row (no reduction across rows), so a row gets the same
bits in a batch of workloads as alone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from disagg_decider.calc.modes.ttft_parts import (
    Part,
    both_miss,
    lengths_at_rows,
    pool_at_rows,
    stack_parts,
    stacked_miss,
    take_rows,
)
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.array_helpers import broadcast
from disagg_decider.calc.queues.batch_edge import boundary_index, value_at
from disagg_decider.calc.replicas import colocated, colocated_best, colocated_load
from disagg_decider.calc.replicas.colocated import ColocatedGrid, Lines, grid_rows
from disagg_decider.calc.replicas.colocated_load import _lines_at_rows, _row_subset
from disagg_decider.calc.replicas.decode import engine_batch_grid
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.prefill import Pool

LIFT_POINTS = 16  # rates tried per row in each round of `lift`
LIFT_ROUNDS = 3  # to 1 / 16^3 of the bracket
TIME_ROUNDS = 4  # rounds of `LIFT_POINTS` times for the overall p99: 1 / 16^4 of its bracket
NO_TTFT_MS = 1e9  # a TTFT target no queue misses while stable (its limit lifted)


@dataclass(frozen=True)
class Layouts:
    """Candidates as rows (N,): each part's queue and the decode workers' columns.

    `pool` holds the pooled part's service (mean, scv (N,), S' nodes (N, K)); the decode
    workers are `engine`, `lengths` and `chunk` as columns (N, 1); `prefill_servers`,
    `decode_servers` the replica counts, `long_share` the share of requests sent to the pool.
    """

    pool: Pool
    engine: Engine
    lengths: Lengths
    chunk: np.ndarray
    prefill_servers: np.ndarray
    decode_servers: np.ndarray
    long_share: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    _workers: list = field(default_factory=list, compare=False, repr=False)

    @property
    def workers(self):
        """The decode workers' lines and batch grid (`workers_on`)."""
        if not self._workers:
            self._workers.append(
                workers_on(
                    self.engine,
                    self.lengths,
                    self.ttft_ms[:, None],
                    self.tpot_ms[:, None],
                    self.chunk,
                    self.decode_servers[:, None],
                )
            )
        return self._workers[0]

    def take(self, rows: np.ndarray) -> Layouts:
        """`self` at some rows (in any order, repeated: `lift` tries many rates per row).

        Every field is a row's own (leading axis N, or 1 for all rows) and so are the decode
        workers' lines and batch grid: each is computed element by element from the row's
        inputs, so rows taken from them give the bits a fresh `lines_and_grid` on the taken
        rows would (what `colocated_load.rate_within_targets` relies on). They are built
        once on these rows (kept for the next `take`: the report reads the chosen rows'),
        then taken.
        """
        out = self.fields_at(rows)
        at, grid = self.workers
        pick = functools.partial(_row_subset, rows=rows, n=len(self.long_share))
        out._workers.append((_lines_at_rows(at, pick), grid_rows(grid, pick)))
        return out

    def has_workers(self) -> bool:
        """Whether the decode workers' lines and grid are built (`workers`) or taken."""
        return bool(self._workers)

    def fields_at(self, rows: np.ndarray) -> Layouts:
        """`take` without the decode workers' lines and grid (built anew if read): for a caller
        that changes the replica counts they depend on."""
        n = len(self.long_share)
        take = functools.partial(take_rows, n=n, rows=rows)
        # Every field named (a field added later without a default fails here, loudly): a
        # few calls fewer than `map_fields`' walk over the dataclass's fields, on a path
        # the lift, the sizing and the report each take.
        return Layouts(
            pool=pool_at_rows(self.pool, n, rows),
            engine=replace(self.engine, tp=take(self.engine.tp)),
            lengths=lengths_at_rows(self.lengths, n, rows),
            chunk=take(self.chunk),
            prefill_servers=take(self.prefill_servers),
            decode_servers=take(self.decode_servers),
            long_share=take(self.long_share),
            ttft_ms=take(self.ttft_ms),
            tpot_ms=take(self.tpot_ms),
        )

    def worker_capacity_per_s(self) -> np.ndarray:
        """Each row's decode worker capacity on every limit but TTFT (N,), at its own chunk
        and number of workers (`worker_capacity_per_s`, on the search's axes); read off the
        workers' grid where it holds that headroom (`workers_on`), the search's own crossing
        and interpolation on the same evaluation (one line per row, its own chunk)."""
        found = _capacity_off_grid(self.workers[1])
        if found is not None:
            return found
        lines = lambda a: np.asarray(a, dtype=float).reshape(-1, 1, 1)  # noqa: E731
        return worker_capacity_per_s(
            replace(self.engine, tp=lines(self.engine.tp)),
            self.lengths.map(lines),
            lines(self.tpot_ms),
            self.chunk.reshape(-1),
            lines(self.decode_servers),
        )

    def pooled(self, rate_per_s: np.ndarray) -> Part:
        """The pool's queue at a total rate (it takes its share of it)."""
        c_wait, theta = queueing.wait_tail(
            rate_per_s * self.long_share / 1e3,
            self.prefill_servers,
            self.pool.mean_ms,
            self.pool.scv,
        )
        c_wait = np.asarray(c_wait)
        zero = np.zeros(c_wait.shape)
        one = zero + 1.0  # (`np.ones`, one call for its several)
        return Part(c_wait, theta, self.pool.nodes_ms, zero, one, None)

    def local(self, rate_per_s: np.ndarray) -> Part:
        """The decode workers at a total rate: their local prompts' queue and TPOT."""
        return self.local_of(rate_per_s, self.worker_terms(rate_per_s))

    def worker_terms(self, rate_per_s: np.ndarray) -> tuple:
        """`colocated_load.latency_terms` of the decode workers at a total rate (their own
        p99s' bisection terms, the map onto the reported TTFT, the TPOT)."""
        at, grid = self.workers
        return colocated_load.latency_terms(
            at.engine,
            at.lengths,
            at.ttft_ms,
            at.tpot_ms,
            at.chunk,
            rate_per_s / self.decode_servers,
            self.decode_servers[:, None],
            on=(at, grid),
        )

    def local_of(self, rate_per_s: np.ndarray, worker_terms: tuple) -> Part:
        """`local` from the decode workers' `worker_terms` at that rate (a caller that has
        them: the report solves their own p99s from the same terms)."""
        terms, reported, tpot = worker_terms
        rate_per_ms, servers, mean_ms, scv, nodes_ms = terms
        c_wait, theta = queueing.wait_tail(rate_per_ms, servers, mean_ms, scv)
        # Below batch 1 the reported TTFT falls linearly towards its idle value
        # (`colocated_load`): reported = a + b x, read off the map itself; the miss of the
        # reported time t is the queue's miss of the time that maps onto it.
        n = len(rate_per_s)
        # (`np.ravel` each, written as asarray + reshape: one call fewer apiece)
        zero = np.zeros(n)
        a = np.asarray(reported(zero)).reshape(-1)
        b = np.asarray(reported(zero + 1.0)).reshape(-1) - a
        nodes = np.asarray(nodes_ms, dtype=float)
        nodes = broadcast(nodes.reshape(-1, nodes.shape[-1]), (n, nodes.shape[-1]))
        c_wait, theta = np.asarray(c_wait).reshape(-1), np.asarray(theta).reshape(-1)
        return Part(c_wait, theta, nodes, a, b, np.asarray(tpot).reshape(-1))

    def miss(self, t_ms: np.ndarray, pooled: Part, local: Part) -> np.ndarray:
        """The share of all requests whose TTFT exceeds t, with both parts at one rate."""
        s = self.long_share
        pooled_miss, local_miss = both_miss(pooled, local, t_ms)
        return s * pooled_miss + (1.0 - s) * local_miss

    def miss_at(self, rate_per_s: np.ndarray, t_ms: np.ndarray) -> np.ndarray:
        """`miss` at a total rate."""
        return self.miss(t_ms, self.pooled(rate_per_s), self.local(rate_per_s))


def workers_on(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, servers
) -> tuple[Lines, ColocatedGrid]:
    """Decode workers' lines and batch grid (`colocated_load.lines_and_grid`, rows (N, 1)),
    the grid holding the headroom with the TTFT target out of reach where the rows are few
    enough that `colocated_best.best_points` would evaluate every batch at once: the
    capacity on every limit but TTFT is then read off it (`Layouts.worker_capacity_per_s`)
    instead of searched again on lines built again.

    The grid's other fields are the same with the headroom as without (`colocated.evaluate`),
    and the TTFT target enters only the headroom's TTFT ratio; the lines are element-wise in
    the same inputs as `best_points` lays out for one chunk per row. So the capacity is the
    search's bits. Many rows (a batch) keep the grid without headroom, and the capacity its
    bisection (`worker_capacity_per_s`): every batch of every row would cost more there.
    """
    at = colocated.lines(engine, lengths, ttft_ms, tpot_ms, chunk, servers)
    batches = engine_batch_grid(engine)
    rows = int(np.size(at.chunk))
    if rows * batches.size > colocated_best.WHOLE_GRID_POINTS:
        return at, colocated.evaluate(at, batches, with_headroom=False)
    out_of_reach = np.zeros(np.shape(at.chunk)) + NO_TTFT_MS  # (`np.full`, fewer calls)
    return at, colocated.evaluate(replace(at, ttft_ms=out_of_reach), batches)


def _capacity_off_grid(grid: ColocatedGrid) -> np.ndarray | None:
    """The rate (N,) where a grid's headroom (`workers_on`: TTFT out of reach) crosses zero,
    interpolated as the whole-grid search does, 0 where no batch holds; None where the grid
    holds no headroom (the caller searches)."""
    if grid.headroom is None:
        return None
    edge = boundary_index(grid.headroom)
    return np.where(edge >= 0, value_at(grid.rate_per_s, np.maximum(edge, 0.0)), 0.0)


def worker_capacity_per_s(engine, lengths, tpot_ms, chunk, servers) -> np.ndarray:
    """A decode worker's capacity (N,) on every limit but TTFT (its TPOT, memory and chunk
    limits, `colocated_best.best_points` with the TTFT target out of reach) at each row's chunk.

    Inputs on the search's axes (N, 1, 1); `chunk` (N,). Each row's own chunk is its one
    chunk (the chunk list given as a column (N, 1), so `best_points` lays out one line per
    row and its best chunk is that one): one search for all rows. Each line is searched on
    its own from its own inputs, so a row gets the bits the search at a list of that one
    chunk for every row gives (what this did before, once per distinct chunk).
    """
    chunk = np.ravel(chunk)
    found = colocated_best.best_points(
        engine,
        lengths,
        np.full((chunk.size, 1, 1), NO_TTFT_MS),
        tpot_ms,
        chunk.reshape(-1, 1),
        servers=servers,
    )
    return np.asarray(found.rate_per_s).reshape(-1)


def lift(layouts: Layouts, settled_per_s: np.ndarray, cap_per_s: np.ndarray) -> np.ndarray:
    """The largest total rate (N,) at which at most 1% of all requests miss the TTFT target
    and the decode workers meet the TPOT target, at least the settled goodput (which meets
    both parts' own p99s, so the sum too).

    The upper end is every limit but TTFT: the prefill pool at `queueing.RHO_MAX` of its
    capacity for its share, and `cap_per_s` for the decode workers (their capacity on every
    other limit, `worker_capacity_per_s`, and their KV ingress, times their number). The
    combined miss and the TPOT grow with the rate, so each round tries `LIFT_POINTS` rates
    per row in one pass and keeps the step between the largest that meets both and the next
    (as `colocated_load.rate_within_targets` searches): what is returned was checked.
    """
    lo = np.asarray(settled_per_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        pool_cap = (
            queueing.RHO_MAX
            * layouts.prefill_servers
            / layouts.pool.mean_ms
            * 1e3
            / layouts.long_share
        )
    hi = np.minimum(pool_cap, cap_per_s)
    hi = np.maximum(np.where(np.isfinite(hi), hi, lo), lo)
    todo = (hi > lo).nonzero()[0]  # (hi, lo 1-D: `np.flatnonzero` without its wrappers)
    if not todo.size:
        return lo
    tried = layouts.take(todo.repeat(LIFT_POINTS))
    step = np.arange(1, LIFT_POINTS + 1) / LIFT_POINTS
    each = np.arange(todo.size)
    low, high = lo[todo], hi[todo]
    for _ in range(LIFT_ROUNDS):
        grid = low[:, None] + (high - low)[:, None] * step  # (B, points), ascending
        ok = within(tried, grid.ravel()).reshape(todo.size, LIFT_POINTS)
        last = LIFT_POINTS - 1 - ok[:, ::-1].argmax(axis=1)  # largest that meets
        found = ok.any(axis=1)
        above = np.where(
            last < LIFT_POINTS - 1, grid[each, np.minimum(last + 1, LIFT_POINTS - 1)], high
        )
        low, high = np.where(found, grid[each, last], low), np.where(found, above, grid[:, 0])
    out = lo.copy()
    out[todo] = low
    return out


def within(layouts: Layouts, rate_per_s: np.ndarray, local: Part | None = None) -> np.ndarray:
    """Whether at most 1% of all requests miss the TTFT target and the TPOT meets its target.
    `local`, `layouts.local(rate_per_s)`, may be passed in by a caller that has it."""
    return within_parts(layouts, rate_per_s, local)[0]


def within_parts(
    layouts: Layouts, rate_per_s: np.ndarray, local: Part | None = None
) -> tuple[np.ndarray, Part, np.ndarray]:
    """`within`, with the pooled part at the rate and the share of all requests missing the
    target there: what `overall_p99_ms` reads first at the same rate (the sizing's rows
    hand them to the report, `conditional_sizing.Priced`)."""
    local = layouts.local(rate_per_s) if local is None else local
    pooled = layouts.pooled(rate_per_s)
    miss = layouts.miss(layouts.ttft_ms, pooled, local)
    ok = (miss <= queueing.P99_TAIL) & (local.tpot_ms <= layouts.tpot_ms * (1 + 1e-9))
    return ok, pooled, miss


def overall_p99_ms(
    layouts: Layouts,
    rate_per_s: np.ndarray,
    pooled_p99_ms: np.ndarray,
    local_p99_ms: np.ndarray,
    local: Part | None = None,
    at_rate: tuple[Part, np.ndarray] | None = None,
) -> np.ndarray:
    """The p99 TTFT over all requests at a total rate (N,): the time whose combined miss is 1%.

    It lies between the two parts' own p99s (at the larger both parts miss at most 1%, at the
    smaller both at least 1%), which bracket the bisection. Where the target itself is within
    1% the bracket's top starts there, so a layout within its target reports so. `local`,
    `layouts.local(rate_per_s)`, and `at_rate`, the pooled part and the miss at the target
    there (`within_parts`), may be passed in by a caller that has them.
    """
    local = layouts.local(rate_per_s) if local is None else local
    if at_rate is None:
        pooled = layouts.pooled(rate_per_s)
        target_miss = layouts.miss(layouts.ttft_ms, pooled, local)
    else:
        pooled, target_miss = at_rate
    lo = np.minimum(pooled_p99_ms, local_p99_ms)
    hi = np.maximum(pooled_p99_ms, local_p99_ms)
    at_target = target_miss <= queueing.P99_TAIL
    hi = np.where(at_target & (layouts.ttft_ms < hi), np.maximum(layouts.ttft_ms, lo), hi)
    finite = np.isfinite(hi)
    lo, hi = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
    # Each round tries `LIFT_POINTS` times per row in one pass and keeps the step in which the
    # combined miss falls to 1% (it falls with the time); the answer is that step's top.
    stacked = stack_parts(pooled.columns(), local.columns())
    share = layouts.long_share[:, None]
    step = np.arange(1, LIFT_POINTS + 1) / LIFT_POINTS
    each = np.arange(lo.size)
    for _ in range(TIME_ROUNDS):
        grid = lo[:, None] + (hi - lo)[:, None] * step
        pooled_miss, local_miss = stacked_miss(stacked, grid)
        miss = share * pooled_miss + (1.0 - share) * local_miss
        within_ = miss <= queueing.P99_TAIL
        first = within_.argmax(axis=1)  # the first time within 1% (the top if none)
        first = np.where(within_.any(axis=1), first, LIFT_POINTS - 1)
        lo = np.where(first > 0, grid[each, np.maximum(first - 1, 0)], lo)
        hi = grid[each, first]
    return np.where(finite, hi, np.inf)
