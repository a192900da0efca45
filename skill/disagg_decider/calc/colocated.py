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

from dataclasses import dataclass, replace

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
from disagg_decider.calc.step import Engine, PassTerms, pass_terms

WHOLE_GRID_POINTS = 20_000  # up to this many (line, batch) points, evaluate them all at once


@dataclass(frozen=True)
class ColocatedGrid:
    """Candidates with their rate and p99 latencies; axes (row, TP, chunk, batch)."""

    rate_per_s: np.ndarray
    ttft_p99_ms: np.ndarray
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
    uncached_p99: np.ndarray


def lines(engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk) -> Lines:
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
        uncached_p99=lengths.prompt_p99 * lengths.uncached_share,
    )


def evaluate(at: Lines, batch, t_empty=None) -> ColocatedGrid:
    """Colocated replicas on the given lines at `batch` decode sequences (broadcasts).

    `t_empty`, the pure decode step at `batch`, may be passed in by a caller that has it.
    """
    b, c, lengths = batch, at.chunk, at.lengths
    u_mean = lengths.uncached_mean
    room = np.maximum(c - b, 1.0)  # prompt tokens a chunk-carrying iteration takes
    per_room = u_mean / room  # iterations one prompt's chunks occupy
    if t_empty is None:
        t_empty = at.empty_pass.ms(b, 0.0)
    t_full = at.full_pass.ms(b, room)
    slow = t_full - t_empty

    rate_per_ms = b / (lengths.output_mean * t_empty + (b * per_room) * slow)
    # Share of iterations that carry a chunk: lam u t / room with lam = B / (OSL t).
    carrying = b * per_room / lengths.output_mean
    # A prompt's chunks ride on consecutive iterations, so a request's output overlaps runs of
    # chunk-carrying steps: its share varies as over OSL / run-length independent draws.
    draws = np.maximum(lengths.output_p50 / np.maximum(per_room, 1.0), 1.0)
    spread = queueing.Z99 * np.sqrt(np.maximum(carrying * (1 - carrying), 0.0) / draws)
    tpot_p99 = t_empty + np.minimum(1.0, carrying + spread) * slow

    # Prefill as an M/G/1 server working through prompt tokens at `room` tokens per t_full:
    # a prompt of u tokens occupies it u / room iterations (chunks pack several short prompts),
    # and its first token comes out of the iteration that finishes it.
    mean_s = t_full * per_room
    second_s = (t_full * t_full) * (lengths.uncached_second_moment / (room * room))
    service_p99 = t_full * (1.0 + at.uncached_p99 / room)
    ttft_p99 = service_p99 + queueing.wait_p99_ms(rate_per_ms, mean_s, second_s)

    # Headroom is the smallest normalised slack, 1 - value / limit, over every limit: one
    # minus the largest ratio. Chunk sizes and targets are positive (validated).
    worst = ttft_p99 / at.ttft_ms  # the one ratio whose value spans every axis
    np.maximum(worst, b / c, out=worst)
    np.maximum(worst, carrying, out=worst)
    np.maximum(worst, b * at.inverse_memory_limit, out=worst)
    np.maximum(worst, tpot_p99 / at.tpot_ms, out=worst)
    return ColocatedGrid(
        rate_per_s=rate_per_ms * 1e3,
        ttft_p99_ms=ttft_p99,
        tpot_p99_ms=tpot_p99,
        headroom=1.0 - worst,
        idle_ttft_ms=service_p99,
        idle_tpot_ms=t_empty,
    )


@dataclass(frozen=True)
class ColocatedPoint:
    """Best (chunk, batch) per (row, TP); rate 0 where no point meets the targets."""

    rate_per_s: np.ndarray
    chunk_index: np.ndarray
    batch: np.ndarray


def best_points(engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunks) -> ColocatedPoint:
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


def latencies_at_rate(engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, rate_per_s):
    """p99 TTFT and TPOT of replicas at given loads (N,), one configuration per load.

    The engine's TP, the lengths, targets and `chunk` are columns (N, 1). Latencies are read
    along the batch grid at the load each batch carries; below batch 1, whose rate already
    carries some queueing, they fall linearly to their idle values (no queue, no prefill riding
    along) at rate 0.
    """
    batches = batch_grid(engine.eff.max_decode_batch)
    g = evaluate(lines(engine, lengths, ttft_ms, tpot_ms, chunk), batches)
    shape = (len(rate_per_s), batches.size)
    rates, ttft, tpot, idle_ttft, idle_tpot = (
        np.broadcast_to(a, shape)
        for a in (g.rate_per_s, g.ttft_p99_ms, g.tpot_p99_ms, g.idle_ttft_ms, g.idle_tpot_ms)
    )
    rates = np.concatenate([np.zeros((shape[0], 1)), rates], axis=1)
    ttft = np.concatenate([idle_ttft[:, :1], ttft], axis=1)
    tpot = np.concatenate([idle_tpot[:, :1], tpot], axis=1)
    order = np.argsort(rates, axis=1, kind="stable")
    rates = np.take_along_axis(rates, order, axis=1)
    return (
        interp_rows(rate_per_s, rates, np.take_along_axis(ttft, order, axis=1)),
        interp_rows(rate_per_s, rates, np.take_along_axis(tpot, order, axis=1)),
    )
