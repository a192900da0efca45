"""Colocated replicas at given loads: reported p99s, and the largest load within the targets.

Split from `colocated` (which searches capacity on the batch grid): a load is placed on the
grid the capacity was found on (`latency_terms`), and `rate_within_targets` lowers a
replica's load until the latencies it reports meet the targets. Only the test "does it meet
them" is needed there, which `p99_check` answers without always solving the TTFT p99.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from disagg_decider.calc.physics.passes import with_prefill_context
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues.array_helpers import broadcast, clip, map_fields
from disagg_decider.calc.queues.batch_edge import interp_rows, value_at
from disagg_decider.calc.queues.p99_check import p99_of_sum_within
from disagg_decider.calc.replicas.colocated import (
    ColocatedGrid,
    Lines,
    evaluate,
    grid_rows,
    lines,
)
from disagg_decider.calc.replicas.colocated_prompts import prompt_queue, ttft_terms
from disagg_decider.calc.replicas.decode import engine_batch_grid
from disagg_decider.calc.replicas.lengths import Lengths


def latency_terms(
    engine: Engine,
    lengths: Lengths,
    ttft_ms,
    tpot_ms,
    chunk,
    rate_per_s,
    servers=1.0,
    grid=None,
    on: tuple[Lines, ColocatedGrid] | None = None,
):
    """p99 TTFT and TPOT of replicas at given loads (N,), one configuration per load, with the
    TTFT's bisection left to the caller: the arguments of that bisection
    (`queueing.p99_of_sum_ms`), the function that turns its answer into the reported TTFT, and
    the TPOT. Callers solve several report-only bisections in one call (`reported_ttft`).

    The engine's TP, the lengths, targets, `chunk` and `servers` are columns (N, 1). The load
    is placed on the batch grid the capacity was found on, linear in the grid index between
    points as `best_points` interpolates. TPOT is read off that grid there, so a replica loaded
    to its capacity reports the TPOT it was sized for, never a little over (an exact evaluation
    between points overshoots where the p99 batch bends the step curve); TTFT, which turns
    infinite past the queue's stability, is solved at the (fractional) batch itself. Below batch
    1, whose rate already carries some queueing, they fall linearly to their idle values (no
    queue, no prefill riding along) at rate 0.

    `grid`, these rows' `evaluate` on the batch grid, may be passed in by a caller that has it;
    `on` as in `rate_within_targets` (then `grid` is its grid).
    """
    if on is not None:
        at, grid = on
    else:
        at = lines(engine, lengths, ttft_ms, tpot_ms, chunk, servers)
    on = _on_curve(at, rate_per_s, grid)
    terms = ttft_terms(on.at, on.batch[:, None])
    return terms, lambda p99: on.toward_idle(np.asarray(p99).reshape(-1)), on.tpot


@dataclass(frozen=True)
class _OnCurve:
    """Loads placed on their rows' batch grid (`latency_terms`): the fractional batch, the
    TPOT read off the grid, and how a TTFT falls to its idle value below batch 1."""

    at: Lines
    batch: np.ndarray  # (N,)
    tpot: np.ndarray  # (N,), already moved towards idle below batch 1
    low: np.ndarray  # the load is below the grid's first point
    share: np.ndarray  # the load over that first point's, in [0, 1]
    idle_ttft: np.ndarray

    @np.errstate(invalid="ignore")
    def toward_idle(self, ttft: np.ndarray, rows=slice(None)) -> np.ndarray:
        """The TTFT at these rows as reported: moved linearly towards idle below batch 1.
        Non-decreasing in `ttft` (each operation rounds monotonically; share >= 0)."""
        idle = self.idle_ttft[rows]
        return np.where(self.low[rows], idle + self.share[rows] * (ttft - idle), ttft)


@np.errstate(divide="ignore", invalid="ignore")
def _on_curve(at: Lines, rate_per_s, grid, batches=None) -> _OnCurve:
    """Each load placed on its row's load curve. `batches`, the columns `grid` was evaluated
    on, defaults to the engine's grid; rows taken from a larger block must pass the block's,
    whose DP ranks (and so grid) may be wider than these rows' own."""
    batches = engine_batch_grid(at.engine) if batches is None else batches
    g = evaluate(at, batches, with_headroom=False) if grid is None else grid
    c = load_curve(g, len(rate_per_s), batches.size)
    # The grid index and the batches are one row for every load (`batch_edge` reads a 1-D row
    # at each load's indices, the elements a broadcast would give).
    at_index = interp_rows(rate_per_s, c.curve, np.arange(batches.size, dtype=float))
    batch = np.maximum(value_at(batches, at_index), 1.0)
    tpot = value_at(c.tpot, at_index)
    first = c.first
    share = clip(np.where(first > 0, rate_per_s / first, 1.0), 0.0, 1.0)
    low = rate_per_s < first
    idle_tpot = c.idle_tpot
    tpot = np.where(low, idle_tpot + share * (tpot - idle_tpot), tpot)
    return _OnCurve(at=at, batch=batch, tpot=tpot, low=low, share=share, idle_ttft=c.idle_ttft)


class LoadCurve(NamedTuple):
    """What `_on_curve` reads off a grid whatever the loads: each row's rising run of rates
    (inf past it), the TPOT grid, the first point's rate and the idle TTFT and TPOT."""

    curve: np.ndarray  # (N, batches)
    tpot: np.ndarray  # (N, batches)
    first: np.ndarray  # (N,)
    idle_ttft: np.ndarray  # (N,)
    idle_tpot: np.ndarray  # (N,)


def load_curve(g: ColocatedGrid, n: int, size: int) -> LoadCurve:
    """The grid's `LoadCurve` for n loads on `size` batches: worked out once per grid and
    kept with it (`ColocatedGrid._memo`), since the searches that place loads on one grid
    (`rate_within_targets`' rounds, `overall_ttft.lift`'s) place new loads every round on
    the same rows. Every value depends on the grid's fields and (n, size) alone, so a kept
    one is the bits a fresh one would be."""
    key = ("load_curve", n, size)
    found = g._memo.get(key)
    if found is None:
        found = g._memo[key] = _load_curve(g, (n, size))
    return found


@np.errstate(invalid="ignore")
def _load_curve(g: ColocatedGrid, shape: tuple[int, int]) -> LoadCurve:
    """`load_curve` worked out."""
    rates = broadcast(g.rate_per_s, shape)
    # Only the rising run of the grid is a load curve: past it (a batch as large as the chunk
    # leaves no room for prompts) the rate formula stops meaning anything, and a load must never
    # be placed there. Points past the run read as infinitely far.
    # np.diff(rates, axis=1, prepend=-inf) > 0, its two parts written out (the same
    # subtractions) without np.diff's concatenation.
    up = np.empty(shape, dtype=bool)
    np.greater(rates[:, :1] - -np.inf, 0, out=up[:, :1])
    np.greater(rates[:, 1:] - rates[:, :-1], 0, out=up[:, 1:])
    rising = np.logical_and.accumulate(up & (rates > 0), axis=1)
    curve = np.where(rising, rates, np.inf)
    return LoadCurve(
        curve=curve,
        tpot=broadcast(g.tpot_p99_ms, shape),
        first=curve[:, 0],
        idle_ttft=broadcast(g.idle_ttft_ms, shape)[:, 0],
        idle_tpot=broadcast(g.idle_tpot_ms, shape)[:, 0],
    )


def _meet_targets(at: Lines, rate_per_s, grid, batches=None) -> np.ndarray:
    """Whether `latency_terms` would report both p99s within their targets, per load.

    The same placement and the same numbers; the TTFT test goes through
    `p99_check.p99_of_sum_within`, which stops bisecting a row once the test is decided (the
    reported TTFT is non-decreasing in the solved p99), so the answer is the same.
    """
    on = _on_curve(at, rate_per_s, grid, batches)
    n = len(rate_per_s)
    ttft_limit = broadcast(at.ttft_ms.reshape(-1) * (1 + 1e-9), (n,))  # `lines`' arrays

    def within(ttft: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return on.toward_idle(ttft, rows) <= ttft_limit[rows]

    b = on.batch[:, None]
    q = prompt_queue(on.at, b)
    ttft_ok = p99_of_sum_within(q.pool_rate, on.at.servers, q.mean_s, q.scv, q.nodes, within)
    return ttft_ok & (on.tpot <= at.tpot_ms.reshape(-1) * (1 + 1e-9))


def lines_and_grid(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, servers
) -> tuple[Lines, ColocatedGrid]:
    """Rows' lines and their evaluation on the batch grid: what `rate_within_targets` and
    `latency_terms` build first, for a caller that asks both about the same rows."""
    at = lines(engine, lengths, ttft_ms, tpot_ms, chunk, servers)
    return at, evaluate(at, engine_batch_grid(engine), with_headroom=False)


def rate_within_targets(
    engine: Engine,
    lengths: Lengths,
    ttft_ms,
    tpot_ms,
    chunk,
    servers,
    rate_hi,
    points: int = 16,
    rounds: int = 3,
    on: tuple[Lines, ColocatedGrid] | None = None,
) -> np.ndarray:
    """The largest load per replica, at most `rate_hi` (N,), whose reported latencies meet both
    targets with `servers` replicas behind the router (columns as in `latency_terms`).

    The search reads capacity off a grid on which the TTFT limit is a miss probability, and a
    pool of fewer replicas than the cluster holds queues more; where either makes the reported
    p99 overshoot its target at `rate_hi`, the load is lowered until it does not, so a
    mode that says it meets the SLO does. Only the rows that overshoot are searched, to
    1 / points**rounds of `rate_hi`, and what is returned is a load that was checked. `on`,
    these rows' lines and batch grid (`lines_and_grid`), may be passed in by a caller that has
    them.
    """
    rate_hi = np.asarray(rate_hi, dtype=float)
    n = len(rate_hi)
    # Every row's batch grid, evaluated once: the rounds below try 16 loads per row on it.
    at, on_grid = on or lines_and_grid(engine, lengths, ttft_ms, tpot_ms, chunk, servers)
    # The grid's columns: the whole block's batches (a block mixing DP and TP-only rows is
    # wider than a subset of TP-only rows would be on its own).
    batches = engine_batch_grid(at.engine)

    # Every row at once: the lines and grid themselves (taking all rows in order would copy
    # the same values).
    good = _meet_targets(at, rate_hi, on_grid) | (rate_hi <= 0)
    if good.all():
        return rate_hi
    # The rows that overshoot: the largest of `points` candidate loads that meets the targets,
    # then the same again inside the step above it; every call evaluates all candidates at once,
    # each round on the same rows (`points` per row that overshoots), taken once.
    bad = np.flatnonzero(~good)
    take = functools.partial(_row_subset, rows=np.repeat(bad, points), n=n)
    grid_at = grid_rows(on_grid, take)
    at_rows = _lines_at_rows(at, take)
    lo, hi = np.zeros(len(bad)), rate_hi[bad]
    step = np.arange(1, points + 1) / points
    each = np.arange(len(bad))
    for _ in range(rounds):
        grid = lo[:, None] + (hi - lo)[:, None] * step  # (B, points), ascending
        ok = _meet_targets(at_rows, grid.ravel(), grid_at, batches).reshape(len(bad), points)
        last = points - 1 - np.argmax(ok[:, ::-1], axis=1)  # largest candidate that meets
        found = ok.any(axis=1)
        # Next round: between the largest candidate that meets and the one above it (or the
        # old top); where none meets, between the old bottom and the first candidate.
        above = np.where(last < points - 1, grid[each, np.minimum(last + 1, points - 1)], hi)
        lo, hi = np.where(found, grid[each, last], lo), np.where(found, above, grid[:, 0])
    out = rate_hi.copy()
    out[bad] = lo
    return out


def _lines_at_rows(at: Lines, take) -> Lines:
    """`at` at some rows, taken from the lines already built rather than built again.

    Every field (and every cached value of the engine) is computed element by element from
    the row's own inputs, so taking rows of the result gives the bits a fresh `lines` on the
    taken inputs would; only the "some candidate runs EP" flag is re-derived for the rows.
    """
    engine = _engine_at_rows(at.engine, take)

    moe_comm = engine.model.moe is not None and bool(np.any(engine.expert_parallel))

    empty = map_fields(at.empty_pass, take, engine=engine, moe_comm=moe_comm)
    # The chunk-carrying pass shares the pure decode one's terms, as `lines` builds them.
    full = with_prefill_context(empty, take(at.full_pass.prefill_context))
    return map_fields(
        at,
        take,
        engine=engine,
        lengths=at.lengths.map(take),
        full_pass=full,
        empty_pass=empty,
    )


def _engine_at_rows(engine: Engine, take) -> Engine:
    """`engine` with its TP, DP and EP at some rows, carrying the per-row values its cached
    properties already hold (each is element-wise in those), so none is derived again."""
    rows = replace(engine, **{k: take(getattr(engine, k)) for k in ("tp", "dp", "ep")})
    fields = set(vars(rows))  # the dataclass fields; the rest of vars() is cached values
    for name, value in vars(engine).items():
        if name not in fields and name != "_constants":  # the rows' own entry, when asked
            vars(rows)[name] = _value_at_rows(value, take)
    return rows


def _value_at_rows(value, take):
    """A cached engine value at some rows: arrays taken, tuples and small records (the fitted
    physics' `SplitConstants`) field by field."""
    if isinstance(value, tuple):
        return tuple(map(take, value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = {f.name: take(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **parts)
    return take(value)


def _row_subset(value, rows: np.ndarray, n: int):
    """`value` at the given rows when it holds one row per load (leading axis n), else as is."""
    if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n:
        return value[rows]
    return value
