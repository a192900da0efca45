"""The colocated comparator: continuous batching with chunked prefill (physics.md 2.9).

This is the strong baseline engines really run (vLLM's `max_num_batched_tokens`, Sarathi-Serve):
each iteration carries the decode batch B plus up to C - B prompt tokens. Iterations that carry
a prefill chunk are slower (t_full) than pure decode ones (t_empty); that slowdown is the
interference disaggregation removes.

With prompts needing u uncached tokens arriving at rate lam, a share f of iterations carry a
chunk, so the mean iteration is t = t_empty + f (t_full - t_empty). Little's law (B = lam OSL t)
then gives the rate a batch B carries in closed form:

    lam = B / (OSL t_empty + B u (t_full - t_empty) / (C - B))

Every candidate (row, TP, chunk size C) is searched at once for its largest feasible batch
B (along the batch grid, or by bisection on it for many rows: `best_points`); the best point per
(row, TP) is the replica's capacity.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from disagg_decider.calc import queueing
from disagg_decider.calc.decode import batch_grid, decode_step_ms, memory_batch_limit
from disagg_decider.calc.frontier import (
    bisect_edge,
    boundary_index,
    interp_rows,
    pick,
    value_at,
)
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.p99_check import p99_of_sum_within
from disagg_decider.calc.step import Engine, PassTerms, pass_terms

WHOLE_GRID_POINTS = 20_000  # up to this many (line, batch) points, evaluate them all at once


@dataclass(frozen=True)
class ColocatedGrid:
    """Candidates with their rate and p99 latencies; axes (row, TP, chunk, batch)."""

    rate_per_s: np.ndarray
    ttft_p99_ms: np.ndarray | None  # only when asked for (`evaluate(with_ttft=True)`)
    tpot_p99_ms: np.ndarray
    headroom: np.ndarray  # smallest normalised slack over all targets; >= 0 is feasible
    idle_ttft_ms: np.ndarray  # p99 TTFT with no queue
    idle_tpot_ms: np.ndarray  # TPOT with no prefill riding along


@dataclass(frozen=True)
class Lines:
    """Colocated candidates without their batch: what stays fixed while the batch is searched.

    Fields broadcast on the calculator's axes (row, TP, chunk); `evaluate` adds the batch.
    """

    engine: Engine
    lengths: Lengths
    ttft_ms: np.ndarray  # p99 targets
    tpot_ms: np.ndarray
    chunk: np.ndarray  # tokens per iteration (max_num_batched_tokens)
    full_pass: PassTerms  # a chunk-carrying iteration, its prompt half done on average
    empty_pass: PassTerms  # a pure decode iteration
    inverse_memory_limit: np.ndarray  # 1 / sequences whose KV fits; inf when none does
    uncached_nodes: np.ndarray  # uncached prompt tokens at `queueing.Z_NODES`, a new last axis
    servers: np.ndarray  # replicas in the pool behind the join-shortest-queue router


def lines(engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, servers=1.0) -> Lines:
    ctx = lengths.decode_context_mean
    cached = lengths.prompt_mean * lengths.hit_rate
    limit = memory_batch_limit(engine, lengths)
    with np.errstate(divide="ignore"):
        inverse_limit = np.where(limit > 0, 1.0 / limit, np.inf)
    return Lines(
        engine=engine,
        lengths=lengths,
        ttft_ms=np.asarray(ttft_ms, dtype=float),
        tpot_ms=np.asarray(tpot_ms, dtype=float),
        chunk=np.asarray(chunk, dtype=float),
        full_pass=pass_terms(engine, ctx, cached + lengths.uncached_mean / 2.0),
        empty_pass=pass_terms(engine, ctx, 0.0),
        inverse_memory_limit=inverse_limit,
        uncached_nodes=np.asarray(lengths.prompt_p50 * lengths.uncached_share)[..., None]
        * np.exp(np.asarray(lengths.prompt_sigma)[..., None] * queueing.Z_NODES),
        servers=np.asarray(servers, dtype=float),
    )


def evaluate(at: Lines, batch, t_empty=None, with_ttft=False) -> ColocatedGrid:
    """Colocated replicas on the given lines at `batch` decode sequences (broadcasts).

    `t_empty`, the pure decode step at `batch`, may be passed in by a caller that has it. The
    p99 TTFT itself is solved for only `with_ttft` (reports); the search needs only whether it
    holds, which the probability of missing the target answers without solving for it.
    """
    b, c, lengths = batch, at.chunk, at.lengths
    if t_empty is None:
        t_empty = at.empty_pass.ms(b, 0.0)
    q = _prompt_queue(at, b, t_empty)
    per_room, rate_per_ms = q.per_room, q.rate_per_ms
    # Share of iterations that carry a chunk: lam u t / room with lam = B / (OSL t).
    carrying = b * per_room / lengths.output_mean
    # A prompt's chunks ride on consecutive iterations, and queued prompts follow each other
    # through a busy period (1 / (1 - share) prompts long on average), so a request's output
    # overlaps runs of chunk-carrying steps: its share varies as over OSL / run-length
    # independent draws.
    run_length = np.maximum(per_room, 1.0) / np.maximum(1.0 - carrying, 1e-3)
    draws = np.maximum(lengths.output_p50 / run_length, 1.0)
    spread = queueing.Z99 * np.sqrt(np.maximum(carrying * (1 - carrying), 0.0) / draws)
    # The batch a request decodes with is not the mean batch: over its lifetime the sequences
    # around it (B on average, Little's law) fluctuate, and with them how many prompts arrive to
    # be chunked alongside. Its p99 prices the batch at `queueing.batch_p99`.
    b99 = np.minimum(queueing.batch_p99(b), c - 1.0)
    b99 = np.maximum(np.minimum(b99, 1.0 / at.inverse_memory_limit), b)
    t_empty99 = at.empty_pass.ms(b99, 0.0)
    slow99 = at.full_pass.ms(b99, np.maximum(c - b99, 1.0)) - t_empty99
    carrying99 = (
        carrying * (b99 / np.maximum(b, 1e-9)) * (np.maximum(c - b, 1.0) / np.maximum(c - b99, 1.0))
    )
    tpot_p99 = t_empty99 + np.minimum(1.0, carrying99 + spread) * slow99

    # Prompts queue as one M/G/c pool (`_prompt_queue`); the search needs only the miss
    # probability at the target, a report the p99 itself.
    c_wait, theta = queueing.wait_tail(q.pool_rate, at.servers, q.mean_s, q.scv)
    miss = queueing.sum_exceed_probability(c_wait, theta, q.nodes, at.ttft_ms)
    with np.errstate(divide="ignore"):
        ttft_ratio = 1.0 + np.log(miss / queueing.P99_TAIL) / np.log(1.0 / queueing.P99_TAIL)
    idle_ttft = queueing.node_quantile(q.nodes, queueing.P99_TAIL)
    ttft_p99 = _ttft_p99_of(at, q) if with_ttft else None

    # Headroom is the smallest normalised slack, 1 - value / limit, over every limit: one
    # minus the largest ratio. Chunk sizes and targets are positive (validated).
    worst = np.array(ttft_ratio, dtype=float)  # the one ratio whose value spans every axis
    np.maximum(worst, b / c, out=worst)
    np.maximum(worst, carrying, out=worst)
    np.maximum(worst, b * at.inverse_memory_limit, out=worst)
    np.maximum(worst, tpot_p99 / at.tpot_ms, out=worst)
    return ColocatedGrid(
        rate_per_s=rate_per_ms * 1e3,
        ttft_p99_ms=ttft_p99,
        tpot_p99_ms=tpot_p99,
        headroom=1.0 - worst,
        idle_ttft_ms=idle_ttft,
        idle_tpot_ms=t_empty,
    )


class _PromptQueue(NamedTuple):
    """The prompt side of colocated replicas at a batch: the chunk room, the rate Little's law
    gives, and the M/G/c queue prompts form (mean service, its scv, S' at the z nodes)."""

    room: np.ndarray  # prompt tokens a chunk-carrying iteration takes
    per_room: np.ndarray  # iterations one prompt's chunks occupy
    t_full: np.ndarray  # a chunk-carrying iteration, ms
    rate_per_ms: np.ndarray  # per replica
    pool_rate: np.ndarray  # the pool's arrivals, per ms
    mean_s: np.ndarray  # mean service, ms
    scv: np.ndarray
    nodes: np.ndarray  # S' at `queueing.Z_NODES`, a new last axis


def _prompt_queue(at: Lines, b, t_empty) -> _PromptQueue:
    """What `evaluate` and `ttft_p99_ms` share, computed by one function so both see the same
    bits."""
    c, lengths = at.chunk, at.lengths
    u_mean = lengths.uncached_mean
    room = np.maximum(c - b, 1.0)
    per_room = u_mean / room
    t_full = at.full_pass.ms(b, room)
    slow = t_full - t_empty
    rate_per_ms = b / (lengths.output_mean * t_empty + (b * per_room) * slow)
    # Prefill as a server working through prompt tokens at `room` tokens per t_full: a prompt
    # of u tokens occupies it u / room iterations (chunks pack several short prompts), and its
    # first token comes out of the iteration that finishes it. The pool's replicas behind a
    # join-shortest-queue router form one M/G/c queue (`queueing`).
    full = np.asarray(t_full)[..., None]
    # full * (1 + u / room) at every node, in place on the one fresh array where its shape
    # holds the product's (the same operations; addition commutes exactly).
    nodes = at.uncached_nodes / np.asarray(room)[..., None]
    if np.broadcast_shapes(full.shape, nodes.shape) == nodes.shape:
        np.add(nodes, 1.0, out=nodes)
        np.multiply(full, nodes, out=nodes)
    else:
        nodes = full * (1.0 + nodes)
    return _PromptQueue(
        room=room,
        per_room=per_room,
        t_full=t_full,
        rate_per_ms=rate_per_ms,
        pool_rate=rate_per_ms * at.servers,  # `rate_per_ms` is per replica
        mean_s=t_full * per_room,
        scv=lengths.uncached_second_moment / (u_mean * u_mean) - 1.0,
        nodes=nodes,
    )


def _ttft_p99_of(at: Lines, q: _PromptQueue) -> np.ndarray:
    return queueing.p99_of_sum_ms(q.pool_rate, at.servers, q.mean_s, q.scv, q.nodes)


def ttft_p99_ms(at: Lines, batch) -> np.ndarray:
    """The p99 TTFT `evaluate(at, batch, with_ttft=True)` reports, without the rest.

    `latencies_at_rate` needs only this at its fractional batches: the TPOT p99, the miss
    probability and the headroom (two more roofline passes and a tail sum) would be thrown
    away. Same function for the shared part (`_prompt_queue`), so the same bits.
    """
    return _ttft_p99_of(at, _prompt_queue(at, batch, at.empty_pass.ms(batch, 0.0)))


@dataclass(frozen=True)
class ColocatedPoint:
    """Best (chunk, batch) per (row, TP); rate 0 where no point meets the targets."""

    rate_per_s: np.ndarray
    chunk_index: np.ndarray
    batch: np.ndarray


def best_points(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunks, servers=1.0
) -> ColocatedPoint:
    """Largest feasible batch per chunk size (interpolated), then the best chunk size.

    Every (row, TP, chunk) line is searched along the batch grid. Few lines (one workload) are
    evaluated at every batch in one pass, where numpy's fixed cost per call dominates; many
    lines (a batch of workloads) by bisection, which evaluates log2(n) batches instead of n.
    Both find the same crossing (`frontier`). Lines are flattened copies: numpy is several
    times faster on contiguous arrays than on broadcasts with a trailing axis of one.
    """
    batches = batch_grid(engine.eff.max_decode_batch)
    c = np.asarray(chunks, dtype=float)[:, None]
    shape = np.broadcast_shapes(np.shape(lengths.prompt_p50), np.shape(engine.gpus), c.shape)
    n_lines = int(np.prod(shape))
    whole_grid = n_lines * batches.size <= WHOLE_GRID_POINTS
    line_shape = (n_lines, 1) if whole_grid else (n_lines,)

    def per_line(a) -> np.ndarray:
        return np.broadcast_to(a, shape).reshape(line_shape)

    at_lines = lines(
        replace(engine, tp=per_line(engine.tp), dp=per_line(engine.dp), ep=per_line(engine.ep)),
        Lengths(**{k: per_line(v) for k, v in vars(lengths).items()}),
        per_line(ttft_ms),
        per_line(tpot_ms),
        per_line(c),
        per_line(servers),
    )
    # Pure decode steps do not depend on the chunk size: one per (row, TP, batch), looked up.
    empty = decode_step_ms(engine, batches, lengths.decode_context_mean)
    empty = np.broadcast_to(empty, (*shape[:-1], batches.size)).reshape(n_lines, -1)
    if whole_grid:
        grid = evaluate(at_lines, batches, t_empty=empty)
        edge = boundary_index(grid.headroom)
        found = edge >= 0
        rate = np.where(found, value_at(grid.rate_per_s, np.maximum(edge, 0.0)), 0.0)
        batch = np.where(found, value_at(np.broadcast_to(batches, grid.headroom.shape), edge), 0.0)
    else:
        flat_empty = empty.reshape(-1)
        first = np.arange(n_lines) * batches.size

        def at(index: np.ndarray):
            b = batches[index]
            point = evaluate(at_lines, b, t_empty=flat_empty[first + index])
            return point.headroom, (point.rate_per_s, b)

        bisected = bisect_edge(at, batches.size, (n_lines,))
        rate, batch = bisected.value(0), bisected.value(1)
    rate, batch = rate.reshape(shape[:-1]), batch.reshape(shape[:-1])
    best = rate.argmax(axis=-1)
    return ColocatedPoint(rate_per_s=pick(rate, best), chunk_index=best, batch=pick(batch, best))


def latencies_at_rate(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, rate_per_s, servers=1.0, grid=None
):
    """p99 TTFT and TPOT of replicas at given loads (N,), one configuration per load.

    The engine's TP, the lengths, targets, `chunk` and `servers` are columns (N, 1). The load
    is placed on the batch grid the capacity was found on, linear in the grid index between
    points as `best_points` interpolates. TPOT is read off that grid there, so a replica loaded
    to its capacity reports the TPOT it was sized for, never a little over (an exact evaluation
    between points overshoots where the p99 batch bends the step curve); TTFT, which turns
    infinite past the queue's stability, is solved at the (fractional) batch itself. Below batch
    1, whose rate already carries some queueing, they fall linearly to their idle values (no
    queue, no prefill riding along) at rate 0.

    `grid`, these rows' `evaluate` on the batch grid, may be passed in by a caller that has it
    (`rate_within_targets` tries many loads on the same rows).
    """
    on = _on_curve(engine, lengths, ttft_ms, tpot_ms, chunk, rate_per_s, servers, grid)
    ttft = np.ravel(ttft_p99_ms(on.at, on.batch[:, None]))
    return on.toward_idle(ttft), on.tpot


@dataclass(frozen=True)
class _OnCurve:
    """Loads placed on their rows' batch grid (`latencies_at_rate`): the fractional batch, the
    TPOT read off the grid, and how a TTFT falls to its idle value below batch 1."""

    at: Lines
    batch: np.ndarray  # (N,)
    tpot: np.ndarray  # (N,), already moved towards idle below batch 1
    low: np.ndarray  # the load is below the grid's first point
    share: np.ndarray  # the load over that first point's, in [0, 1]
    idle_ttft: np.ndarray

    def toward_idle(self, ttft: np.ndarray, rows=slice(None)) -> np.ndarray:
        """The TTFT at these rows as reported: moved linearly towards idle below batch 1.
        Non-decreasing in `ttft` (each operation rounds monotonically; share >= 0)."""
        idle = self.idle_ttft[rows]
        with np.errstate(invalid="ignore"):
            return np.where(self.low[rows], idle + self.share[rows] * (ttft - idle), ttft)


def _on_curve(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, rate_per_s, servers, grid
) -> _OnCurve:
    batches = batch_grid(engine.eff.max_decode_batch)
    at = lines(engine, lengths, ttft_ms, tpot_ms, chunk, servers)
    g = evaluate(at, batches) if grid is None else grid
    shape = (len(rate_per_s), batches.size)
    rates = np.broadcast_to(g.rate_per_s, shape)
    # Only the rising run of the grid is a load curve: past it (a batch as large as the chunk
    # leaves no room for prompts) the rate formula stops meaning anything, and a load must never
    # be placed there. Points past the run read as infinitely far.
    with np.errstate(invalid="ignore"):
        rising = np.logical_and.accumulate(
            (np.diff(rates, axis=1, prepend=-np.inf) > 0) & (rates > 0), axis=1
        )
    curve = np.where(rising, rates, np.inf)
    index = np.broadcast_to(np.arange(batches.size, dtype=float), shape)
    at_index = interp_rows(rate_per_s, curve, index)
    batch = np.maximum(value_at(np.broadcast_to(batches, shape), at_index), 1.0)
    tpot = value_at(np.broadcast_to(g.tpot_p99_ms, shape), at_index)
    first = curve[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip(np.where(first > 0, rate_per_s / first, 1.0), 0.0, 1.0)
    low = rate_per_s < first
    idle_ttft = np.broadcast_to(g.idle_ttft_ms, shape)[:, 0]
    idle_tpot = np.broadcast_to(g.idle_tpot_ms, shape)[:, 0]
    with np.errstate(invalid="ignore"):
        tpot = np.where(low, idle_tpot + share * (tpot - idle_tpot), tpot)
    return _OnCurve(at=at, batch=batch, tpot=tpot, low=low, share=share, idle_ttft=idle_ttft)


def _meet_targets(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, rate_per_s, servers, grid
) -> np.ndarray:
    """Whether `latencies_at_rate` would report both p99s within their targets, per load.

    The same placement and the same numbers; the TTFT test goes through
    `p99_check.p99_of_sum_within`, which stops bisecting a row once the test is decided (the
    reported TTFT is non-decreasing in the solved p99), so the answer is the same.
    """
    on = _on_curve(engine, lengths, ttft_ms, tpot_ms, chunk, rate_per_s, servers, grid)
    n = len(rate_per_s)
    ttft_limit = np.broadcast_to(np.ravel(ttft_ms) * (1 + 1e-9), (n,))

    def within(ttft: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return on.toward_idle(ttft, rows) <= ttft_limit[rows]

    b = on.batch[:, None]
    q = _prompt_queue(on.at, b, on.at.empty_pass.ms(b, 0.0))
    ttft_ok = p99_of_sum_within(q.pool_rate, on.at.servers, q.mean_s, q.scv, q.nodes, within)
    return ttft_ok & (on.tpot <= np.ravel(tpot_ms) * (1 + 1e-9))


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
) -> np.ndarray:
    """The largest load per replica, at most `rate_hi` (N,), whose reported latencies meet both
    targets with `servers` replicas behind the router (columns as in `latencies_at_rate`).

    The search reads capacity off a grid on which the TTFT limit is a miss probability, and a
    pool of fewer replicas than the cluster holds queues more; where either makes the reported
    p99 overshoot its target at `rate_hi`, the load is lowered until it does not, so a
    mode that says it meets the SLO does. Only the rows that overshoot are searched, to
    1 / points**rounds of `rate_hi`, and what is returned is a load that was checked.
    """
    rate_hi = np.asarray(rate_hi, dtype=float)
    n = len(rate_hi)
    # Every row's batch grid, evaluated once: the rounds below try 16 loads per row on it.
    batches = batch_grid(engine.eff.max_decode_batch)
    on_grid = evaluate(lines(engine, lengths, ttft_ms, tpot_ms, chunk, servers), batches)

    def meets(rows: np.ndarray, rate: np.ndarray) -> np.ndarray:
        take = functools.partial(_row_subset, rows=rows, n=n)
        at_rows = replace(engine, **{k: take(getattr(engine, k)) for k in ("tp", "dp", "ep")})
        lengths_rows = Lengths(**{k: take(v) for k, v in vars(lengths).items()})
        ttft_t, tpot_t = take(ttft_ms), take(tpot_ms)
        grid_rows = ColocatedGrid(**{k: take(v) for k, v in vars(on_grid).items()})
        return _meet_targets(
            at_rows, lengths_rows, ttft_t, tpot_t, take(chunk), rate, take(servers), grid_rows
        )

    good = meets(np.arange(n), rate_hi) | (rate_hi <= 0)
    if good.all():
        return rate_hi
    # The rows that overshoot: the largest of `points` candidate loads that meets the targets,
    # then the same again inside the step above it; every call evaluates all candidates at once.
    bad = np.flatnonzero(~good)
    lo, hi = np.zeros(len(bad)), rate_hi[bad]
    step = np.arange(1, points + 1) / points
    each = np.arange(len(bad))
    for _ in range(rounds):
        grid = lo[:, None] + (hi - lo)[:, None] * step  # (B, points), ascending
        ok = meets(np.repeat(bad, points), grid.ravel()).reshape(len(bad), points)
        last = points - 1 - np.argmax(ok[:, ::-1], axis=1)  # largest candidate that meets
        found = ok.any(axis=1)
        # Next round: between the largest candidate that meets and the one above it (or the
        # old top); where none meets, between the old bottom and the first candidate.
        above = np.where(last < points - 1, grid[each, np.minimum(last + 1, points - 1)], hi)
        lo, hi = np.where(found, grid[each, last], lo), np.where(found, above, grid[:, 0])
    out = rate_hi.copy()
    out[bad] = lo
    return out


def _row_subset(value, rows: np.ndarray, n: int):
    """`value` at the given rows when it holds one row per load (leading axis n), else as is."""
    if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n:
        return value[rows]
    return value
