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
from functools import cached_property
from typing import NamedTuple

import numpy as np

from disagg_decider.calc.physics.step import Engine, PassTerms, pass_terms
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.array_helpers import broadcast, first_best
from disagg_decider.calc.queues.batch_edge import (
    bisect_edge,
    boundary_index,
    levels_for,
    pick,
    value_at,
)
from disagg_decider.calc.replicas import chunk_runs
from disagg_decider.calc.replicas.colocated_prompts import PromptQueue, prompt_queue, ttft_p99_of
from disagg_decider.calc.replicas.decode import (
    engine_batch_grid,
    held_scv,
    memory_batch_limit,
    read_context,
    seats_in_use_p99,
)
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.low_load import rate_below_batch_one

# Up to this many (line, batch) points, evaluate them all at once; beyond, bisect each line.
# Measured (issue 17f, `benchmarks/decide_cpu.py`'s examples): bisecting is already cheaper at
# ~290 lines x 16 batches (1.1 ms against 1.4), whole grids at ~100 lines (0.7 against 0.9).
WHOLE_GRID_POINTS = 2_500
# What one evaluation's fixed cost (~180 Python-level calls) is worth in points evaluated, in
# CPU time: bisection takes several steps per evaluation while that saves more
# (`_bisection_levels`). Measured on the examples' searches (one step against two per
# evaluation, interleaved, the least of 60 calls each): ~0.10 ms an evaluation against
# ~0.36 us a point. By calls alone two steps would pay from 432 lines up (rag-8k's search:
# ~400 calls fewer), yet cost 0.1 ms more CPU there and 0.3-0.5 ms on 670-960 lines.
EVALUATION_POINTS = 300


@dataclass(frozen=True)
class ColocatedGrid:
    """Candidates with their rate and p99 latencies; axes (row, TP, chunk, batch)."""

    rate_per_s: np.ndarray
    ttft_p99_ms: np.ndarray | None  # only when asked for (`evaluate(with_ttft=True)`)
    tpot_p99_ms: np.ndarray
    headroom: np.ndarray | None  # smallest normalised slack over all targets; >= 0 is
    # feasible (None where not asked for: `evaluate(with_headroom=False)`)
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
    # Mixed traffic: the seat context's squared CV across classes (`Lengths.context_scv`);
    # None where no line is mixed, which keeps the one-class pricing bit for bit.
    context_scv: np.ndarray | None = None
    # Mixed traffic: how far the chunk runs' tail is priced as the prompt server's busy
    # periods (`chunk_runs.class_spread_weight`; 0 on the lines that are not mixed); None
    # where no line is mixed.
    class_spread: np.ndarray | None = None

    @cached_property
    def seat_scv(self) -> np.ndarray:
        """`decode.held_scv` of these lines' lengths: the same at every batch `evaluate` tries
        (a search evaluates the lines at several), so worked out once per lines."""
        return held_scv(self.lengths)

    @cached_property
    def prompt_scv(self) -> np.ndarray:
        """The uncached prompt's squared CV: the prompt queue's service variability at every
        batch (the chunk room scales the mean and the spread alike)."""
        u_mean = self.lengths.uncached_mean
        return self.lengths.uncached_second_moment / (u_mean * u_mean) - 1.0

    @cached_property
    def window_tokens(self) -> np.ndarray:
        """`chunk_runs.tail_window_tokens` of these lines: batch-independent."""
        return chunk_runs.tail_window_tokens(
            self.lengths.output_p50, self.lengths.output_sigma, self.class_spread
        )


def chunk_cached_tokens(lengths: Lengths, chunk_prompt) -> np.ndarray:
    """The cached prefix before the prompt a chunk's token belongs to: that prompt's own, not
    the mean prompt's (its attention reads it). A chunk token sits in a size-biased prompt, and
    at the traffic's hit rate h its prompt holds h / (1 - h) cached tokens per uncached one.
    On a RAG-heavy mix (22% of 20K-token prompts 36% cached beside 0.9K chat turns) the mean
    prompt's prefix (1.6K tokens) put a chunk's context 4.6K tokens short, and its colocated
    goodput 1.42x the simulator's on the fitted physics, which prices attention on its own
    (`benchmarks/conditional_vs_sim.py`, mix-15; issue 24)."""
    hit = np.asarray(lengths.hit_rate, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_uncached = np.where(hit < 1.0, hit / (1.0 - hit), 0.0)
    return per_uncached * chunk_prompt


def lines(engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, servers=1.0) -> Lines:
    ctx = lengths.decode_context_mean
    scv = np.asarray(lengths.context_scv, dtype=float)
    mixed = bool(np.any(scv > 0.0))
    chunk_prompt = chunk_runs.chunk_prompt(lengths, mixed)
    cached = chunk_cached_tokens(lengths, chunk_prompt)
    limit = memory_batch_limit(engine, lengths)
    with np.errstate(divide="ignore"):
        inverse_limit = np.where(limit > 0, 1.0 / limit, np.inf)
    return Lines(
        engine=engine,
        lengths=lengths,
        ttft_ms=np.asarray(ttft_ms, dtype=float),
        tpot_ms=np.asarray(tpot_ms, dtype=float),
        chunk=np.asarray(chunk, dtype=float),
        # A chunk's tokens sit, on average, halfway through the prompt they belong to, a
        # size-biased one: a long prompt has more tokens to chunk (E[u^2] / E[u]; 2.2x the mean
        # at p99/p50 = 8). Mixed traffic keeps `classes.chunk_prompt_tokens`, biased between
        # its classes, with which its TPOT tail was matched to the simulator (issue 18a).
        full_pass=pass_terms(engine, ctx, cached + chunk_prompt / 2.0),
        empty_pass=pass_terms(engine, ctx, 0.0),
        inverse_memory_limit=inverse_limit,
        uncached_nodes=np.asarray(lengths.prompt_p50 * lengths.uncached_share)[..., None]
        * np.exp(np.asarray(lengths.prompt_sigma)[..., None] * queueing.Z_NODES),
        servers=np.asarray(servers, dtype=float),
        context_scv=scv if mixed else None,
        class_spread=np.where(scv > 0.0, chunk_runs.class_spread_weight(lengths), 0.0)
        if mixed
        else None,
    )


def evaluate(at: Lines, batch, t_empty=None, with_ttft=False, with_headroom=True) -> ColocatedGrid:
    """Colocated replicas on the given lines at `batch` decode sequences (broadcasts).

    `t_empty`, the pure decode step at `batch`, may be passed in by a caller that has it. The
    p99 TTFT itself is solved for only `with_ttft` (reports); the search needs only whether it
    holds, which the probability of missing the target answers without solving for it. That
    probability, over every quantile node, is most of the cost, and only the headroom reads
    it: without `with_headroom` (loads placed on a grid, `colocated_load`, which reads rates,
    TPOTs and idle values) neither is computed and `headroom` is None. The other fields are
    the same either way.
    """
    b, c, lengths = batch, at.chunk, at.lengths
    if t_empty is None:
        t_empty = at.empty_pass.ms(b, 0.0)
    q = prompt_queue(at, b)
    per_room, rate_per_ms = q.per_room, q.rate_per_ms
    # Share of iterations that carry a chunk: lam u t / room with lam = B / (OSL t).
    carrying = b * per_room / lengths.output_mean
    # A prompt's chunks ride on consecutive iterations, and queued prompts follow each other
    # through a busy period (1 / (1 - share) prompts long on average), so a request's output
    # overlaps runs of chunk-carrying steps: its share varies as over OSL / run-length
    # independent draws. The runs a window meets are size-biased (a long prompt's run is more
    # likely to overlap it), so a run is E[u^2] / E[u] tokens long, not the mean prompt: the
    # two differ most on wide or mixed lengths, a few 16K prompts among short chat turns.
    # On mixed traffic a run is the prompt server's busy period, and the p99 request a short
    # output (`chunk_runs`).
    run_length = chunk_runs.run_iterations(
        lengths.uncached_size_biased / q.room, carrying, q.t_full, t_empty, at.class_spread
    )
    window = at.window_tokens
    draws = np.maximum(window / run_length, 1.0)
    # The pooled wait's tail, read by the backlog (its mean) and the headroom (its miss).
    tail = queueing.wait_tail(q.pool_rate, at.servers, q.mean_s, q.scv)
    behind = chunk_runs.backlog_share(q, at.servers, window, at.class_spread, tail)
    spread = chunk_runs.share_spread_p99(np.minimum(carrying + behind, 1.0), draws, at.class_spread)
    # The batch a request decodes with is not the mean batch: over its lifetime the sequences
    # around it (B on average, Little's law) fluctuate, and with them how many prompts arrive to
    # be chunked alongside. Its p99 prices the batch at `queueing.batch_p99`.
    # The others' p99 over its lifetime, and the request itself.
    b99 = np.minimum(queueing.batch_p99(b) + 1.0, c - 1.0)
    b99 = np.maximum(np.minimum(b99, 1.0 / at.inverse_memory_limit), b)
    t_empty99, t_full99 = _steps_at_p99(at, b, b99, np.maximum(c - b99, 1.0))
    slow99 = t_full99 - t_empty99
    carrying99 = (
        # prompts arrive with the others (the p99 batch less the request itself)
        carrying
        * (np.maximum(b99 - 1.0, b) / np.maximum(b, 1e-9))
        * (np.maximum(c - b, 1.0) / np.maximum(c - b99, 1.0))
    )
    tpot_p99 = t_empty99 + np.minimum(1.0, carrying99 + behind + spread) * slow99

    idle_ttft = queueing.node_quantile(q.nodes, queueing.P99_TAIL)
    ttft_p99 = ttft_p99_of(at, q) if with_ttft else None
    return ColocatedGrid(
        rate_per_s=rate_per_ms * 1e3,
        ttft_p99_ms=ttft_p99,
        tpot_p99_ms=tpot_p99,
        headroom=_headroom(at, q, tail, b, t_empty, carrying, tpot_p99) if with_headroom else None,
        idle_ttft_ms=idle_ttft,
        idle_tpot_ms=t_empty,
    )


def _steps_at_p99(at: Lines, b, b99, room99) -> tuple[np.ndarray, np.ndarray]:
    """The pure decode and the chunk-carrying iteration at the p99 batch (ms).

    On mixed lines the batch's KV read varies with which classes hold the seats as well as
    with how many there are: it is read at the p99 of the batch's total context
    (`decode.read_context`, the decode pools' formula) over the M/G/inf seat spread. Other
    lines keep their own passes, bit for bit.
    """
    empty = at.empty_pass.ms(b99, 0.0)
    full = at.full_pass.ms(b99, room99)
    if at.context_scv is None:
        return empty, full
    cap = np.maximum(np.minimum(at.chunk - 1.0, 1.0 / at.inverse_memory_limit), b)
    seats = np.maximum(b99, 1e-9)  # an idle line's p99 batch may be 0: its context stays
    ctx99 = read_context(at.lengths.decode_context_mean, b, b99 - b, seats, cap, at.context_scv)
    mixed = at.context_scv > 0.0
    wide_empty = pass_terms(at.engine, ctx99, 0.0).ms(b99, 0.0)
    wide_full = pass_terms(at.engine, ctx99, at.full_pass.prefill_context).ms(b99, room99)
    return np.where(mixed, wide_empty, empty), np.where(mixed, wide_full, full)


def _headroom(at: Lines, q: PromptQueue, tail, b, t_empty, carrying, tpot_p99) -> np.ndarray:
    """The smallest normalised slack, 1 - value / limit, over every limit: one minus the
    largest ratio. Chunk sizes and targets are positive (validated)."""
    # Prompts queue as one M/G/c pool (`prompt_queue`, its wait `tail`); the search needs only
    # the miss probability at the target, a report the p99 itself.
    c_wait, theta = tail
    miss = queueing.sum_exceed_probability(c_wait, theta, q.nodes, at.ttft_ms)
    with np.errstate(divide="ignore"):
        ttft_ratio = 1.0 + np.log(miss / queueing.P99_TAIL) / np.log(1.0 / queueing.P99_TAIL)
    worst = np.array(ttft_ratio, dtype=float)  # the one ratio whose value spans every axis
    np.maximum(worst, b / at.chunk, out=worst)
    np.maximum(worst, carrying, out=worst)
    # The KV seats hold the p99 of the sequences in flight (`decode.seats_in_use_p99`).
    in_use = seats_in_use_p99(b, t_empty, q.seen_empty, at.seat_scv)
    np.maximum(worst, in_use * at.inverse_memory_limit, out=worst)
    np.maximum(worst, tpot_p99 / at.tpot_ms, out=worst)
    if np.max(b) > at.engine.eff.max_decode_batch:  # the engine's cap per DP rank
        np.maximum(worst, b / np.asarray(at.engine.max_decode_batch, dtype=float), out=worst)
    return 1.0 - worst


@dataclass(frozen=True)
class ColocatedPoint:
    """Best (chunk, batch) per (row, TP); rate 0 where no point meets the targets."""

    rate_per_s: np.ndarray
    chunk_index: np.ndarray
    batch: np.ndarray


def best_points(
    engine: Engine,
    lengths: Lengths,
    ttft_ms,
    tpot_ms,
    chunks,
    servers=1.0,
    searched=None,
    rate_per_s=None,
) -> ColocatedPoint:
    """Largest feasible batch per chunk size (interpolated), then the best chunk size.

    Every (row, TP, chunk) line is searched along the batch grid. Few lines (one workload) are
    evaluated at every batch in one pass, where numpy's fixed cost per call dominates; many
    lines (a batch of workloads) by bisection, which evaluates log2(n) batches instead of n.
    Both find the same crossing (`batch_edge`). Lines are flattened copies: numpy is several
    times faster on contiguous arrays than on broadcasts with a trailing axis of one.

    `searched`, a mask on the (row, TP) axes, leaves the other lines out: each line is searched
    on its own, so the rest get the same answers; the left-out ones read rate 0, chunk index 0
    and batch 0 (for candidates a caller never reads, such as layouts a row may not use).
    """
    batches = engine_batch_grid(engine)
    c = np.asarray(chunks, dtype=float)[:, None]
    # The engine's layouts' shape, from its fields (not `engine.gpus`: the lines run on an
    # engine of their own, so the caller's constants would be worked out for nothing).
    layouts = np.broadcast_shapes(np.shape(engine.tp), np.shape(engine.dp), np.shape(engine.ep))
    shape = np.broadcast_shapes(np.shape(lengths.prompt_p50), layouts, c.shape)
    keep = (
        None if searched is None else np.broadcast_to(np.asarray(searched)[..., None, None], shape)
    )
    keep = None if keep is None or keep.all() else keep.reshape(-1)
    n_lines = int(np.prod(shape)) if keep is None else int(keep.sum())
    whole_grid = n_lines * batches.size <= WHOLE_GRID_POINTS
    levels = 1 if whole_grid else _bisection_levels(engine, batches, n_lines)
    line_shape = (n_lines, 1) if whole_grid or levels > 1 else (n_lines,)

    def per_line(a) -> np.ndarray:  # `array_helpers.broadcast`: np.broadcast_to's elements, cheaper
        if keep is not None:
            return broadcast(a, shape).reshape(-1)[keep].reshape(line_shape)
        return broadcast(a, shape).reshape(line_shape)

    at_lines = lines(
        replace(engine, tp=per_line(engine.tp), dp=per_line(engine.dp), ep=per_line(engine.ep)),
        _lengths_on_lines(lengths, shape, keep, line_shape) or lengths.map(per_line),
        per_line(ttft_ms),
        per_line(tpot_ms),
        per_line(c),
        per_line(servers),
    )
    # The pure decode step comes from the lines' own decode pass (`evaluate`), on the engine
    # the lines already hold: another engine's constants would be worked out again.
    if whole_grid:
        grid = evaluate(at_lines, batches)
        edge = boundary_index(grid.headroom)
        found = edge >= 0
        rate = np.where(found, value_at(grid.rate_per_s, np.maximum(edge, 0.0)), 0.0)
        batch = np.where(found, value_at(batches, edge), 0.0)  # one grid: every line's batches
        below = _BelowOne(np.where(found, np.inf, grid.rate_per_s[:, 0]), grid.idle_tpot_ms[:, 0])
    else:

        def at(index: np.ndarray):
            b = batches[index]
            point = evaluate(at_lines, b)
            return point.headroom, (point.rate_per_s, b, point.idle_tpot_ms)

        bisected = bisect_edge(at, batches.size, (n_lines,), levels)
        rate, batch = bisected.value(0), bisected.value(1)
        # A line that holds nowhere was last tried at B = 1 (its `hi` is 0): its rate and
        # step there. Others are not bounded (their B = 1 values were not read).
        nowhere = bisected.lo < 0
        below = _BelowOne(
            np.where(nowhere, bisected.at_hi[0], np.inf),
            np.where(nowhere, bisected.at_hi[2], 0.0),
        )
    if rate_per_s is not None:
        below = _BelowOne(np.ravel(below.rate_per_s), np.ravel(below.step_ms))
        rate, batch = _below_batch_one(at_lines, rate, batch, per_line(rate_per_s), below)
    if keep is not None:
        rate, batch = _spread(rate, keep), _spread(batch, keep)
    rate, batch = rate.reshape(shape[:-1]), batch.reshape(shape[:-1])
    best = first_best(rate, axis=-1)  # chunk sizes that tie on rate: the smallest
    return ColocatedPoint(rate_per_s=pick(rate, best), chunk_index=best, batch=pick(batch, best))


class _BelowOne(NamedTuple):
    """What the batch search already knows of each line at B = 1, the first grid point: its
    rate and its pure decode step (ms); inf and 0 where they were not read there (a line that
    holds somewhere). `_below_batch_one` bounds the low-load rate with them."""

    rate_per_s: np.ndarray
    step_ms: np.ndarray


# Relative margin on `_below_batch_one`'s bounds: a line is left out only where a bound
# misses by more than this, far beyond any rounding between the search's evaluation at B = 1
# and the low-load one (the same operations on other array shapes).
BOUND_MARGIN = 1e-6


def _lengths_on_lines(lengths: Lengths, shape, keep, line_shape) -> Lengths | None:
    """`lengths.map(per_line)` as `best_points` lays lines out, every field in one copy: the
    fields share a shape (`Lengths.build`), so they are stacked, broadcast to the lines and
    split again (one array operation instead of one per field; the same values). None where
    the fields' shapes differ (the caller maps them one by one)."""
    fields = vars(lengths)
    values = list(fields.values())
    try:
        stacked = np.array(values, dtype=float)
    except ValueError:  # "inhomogeneous shape"
        return None
    flat = broadcast(stacked, (len(values), *shape)).reshape(len(values), -1)
    if keep is not None:
        flat = flat[:, keep]
    return Lengths(**dict(zip(fields, flat.reshape(len(values), *line_shape), strict=True)))


def _bisection_levels(engine: Engine, batches: np.ndarray, n_lines: int) -> int:
    """Bisection steps per evaluation (`batch_edge.bisect_edge`): several where the lines are
    few enough that an evaluation's fixed calls outweigh its points (`EVALUATION_POINTS`).

    One step at a time on grids past the engine's cap per DP rank: there `_headroom` adds the
    cap's ratio at every point of an evaluation once any point passes it, so a point's
    headroom would depend on which others share its evaluation."""
    if float(batches[-1]) > engine.eff.max_decode_batch:
        return 1
    return levels_for(n_lines, batches.size, EVALUATION_POINTS)


def _below_batch_one(
    at: Lines, rate: np.ndarray, batch: np.ndarray, wanted: np.ndarray, one: _BelowOne | None
):
    """Lines where no batch on the grid (from 1) meets the targets may still carry the
    workload's own rate (`wanted`, req/s per line) below one sequence in flight per replica
    (`low_load`); they deploy with a batch of 1. Only where the line's replicas carry that rate
    there: the low-load line is the rate sizing's reading near idle, not a capacity to compare
    modes on at loads the workload does not have. `at` holds one entry per line (`best_points`
    lays them out), so its fields index by line.

    The low-load rate is a share (at most 1) of the rate at B = 1, and 0 where the idle TPOT
    misses its target or no sequence's KV fits. `one` (what the search read at B = 1) bounds
    it: a line whose replicas could not carry `wanted` even at the whole B = 1 rate, or whose
    idle TPOT misses, gets 0 without the evaluation (its p99 TTFT bisection is most of the
    cost, and on the examples no failing line is rescued). None evaluates every failing line
    (the reference the tests compare with)."""
    failing = np.ravel(rate) <= 0.0
    if one is not None and failing.any():
        need = np.ravel(wanted) * (1.0 - 1e-9) * (1.0 - BOUND_MARGIN)
        tpot = np.ravel(at.tpot_ms) * ((1.0 + 1e-9) * (1.0 + BOUND_MARGIN))
        failing &= (
            (one.rate_per_s * np.ravel(at.servers) >= need)
            & (np.ravel(one.step_ms) <= tpot)
            & (np.ravel(at.inverse_memory_limit) <= 1.0)
        )
    if not failing.any():
        return rate, batch

    def sub(a) -> np.ndarray:
        return np.asarray(a)[failing]

    e = at.engine
    low = lines(
        replace(e, tp=sub(e.tp), dp=sub(e.dp), ep=sub(e.ep)),
        at.lengths.map(sub),
        sub(at.ttft_ms),
        sub(at.tpot_ms),
        sub(at.chunk),
        sub(at.servers),
    )
    rate, batch = np.array(rate, dtype=float), np.array(batch, dtype=float)
    low_rate = rate_below_batch_one(low, evaluate(low, 1.0, with_ttft=True, with_headroom=False))
    carries = low_rate * np.ravel(sub(at.servers)) >= np.ravel(sub(wanted)) * (1.0 - 1e-9)
    low_rate = np.where(carries, low_rate, 0.0).reshape(rate[failing].shape)
    rate[failing] = low_rate
    batch[failing] = np.where(low_rate > 0.0, 1.0, 0.0)
    return rate, batch


def _spread(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Values of the kept lines back on every line, 0 on the others."""
    out = np.zeros(keep.shape)
    out[keep] = np.ravel(values)
    return out
