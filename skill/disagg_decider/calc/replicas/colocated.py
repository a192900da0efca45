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
B (along the batch grid, or by bisection on it for many rows: `colocated_best.best_points`); the
best point per (row, TP) is the replica's capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from disagg_decider.calc.physics.passes import (
    PassTerms,
    paired_ms,
    pass_terms,
    with_prefill_context,
)
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues import node_planes, queueing
from disagg_decider.calc.queues.array_helpers import planes_of
from disagg_decider.calc.replicas import chunk_runs
from disagg_decider.calc.replicas.colocated_prompts import PromptQueue, prompt_queue, ttft_p99_of
from disagg_decider.calc.replicas.decode import (
    held_scv,
    memory_batch_limit,
    read_context,
    seats_in_use_p99,
)
from disagg_decider.calc.replicas.lengths import Lengths


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
    # Values worked out from these fields alone, kept for the next reader: the load curve
    # `colocated_load` places loads on, read again at every round of a search on one grid.
    # A grid built from another's fields (rows taken, `grid_fields`; `replace`) starts empty.
    _memo: dict = field(default_factory=dict, init=False, compare=False, repr=False)


def grid_rows(grid: ColocatedGrid, take) -> ColocatedGrid:
    """The grid with `take` (rows taken) applied to each field: a new grid, without what the
    old one keeps for its readers (`_memo`), whose values are the old rows'."""
    return ColocatedGrid(**{k: take(v) for k, v in vars(grid).items() if k != "_memo"})


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
    def bounded_nodes(self) -> bool:
        """Whether every line's uncached nodes ascend (then so does S' = t (1 + u / room) at
        any room >= 1 and t >= 0) and its TTFT target is finite: what `_ttft_ratio`'s bounds
        by the node count need."""
        u = np.moveaxis(self.uncached_nodes, -1, 0)
        return bool((u[1:] >= u[:-1]).all() and np.isfinite(self.ttft_ms).all())

    @cached_property
    def window_tokens(self) -> np.ndarray:
        """`chunk_runs.tail_window_tokens` of these lines: batch-independent."""
        return chunk_runs.tail_window_tokens(
            self.lengths.output_p50, self.lengths.output_sigma, self.class_spread
        )


@np.errstate(divide="ignore", invalid="ignore")  # a hit rate of 1 (no uncached token)
def chunk_cached_tokens(lengths: Lengths, chunk_prompt) -> np.ndarray:
    """The cached prefix before the prompt a chunk's token belongs to: that prompt's own, not
    the mean prompt's (its attention reads it). A chunk token sits in a size-biased prompt, and
    at the traffic's hit rate h its prompt holds h / (1 - h) cached tokens per uncached one.
    On a RAG-heavy mix (22% of 20K-token prompts 36% cached beside 0.9K chat turns) the mean
    prompt's prefix (1.6K tokens) put a chunk's context 4.6K tokens short, and its colocated
    goodput 1.42x the simulator's on the fitted physics, which prices attention on its own
    (`benchmarks/conditional_vs_sim.py`, mix-15; issue 24)."""
    hit = np.asarray(lengths.hit_rate, dtype=float)
    per_uncached = np.where(hit < 1.0, hit / (1.0 - hit), 0.0)
    return per_uncached * chunk_prompt


def uncached_nodes(lengths: Lengths) -> np.ndarray:
    """Uncached prompt tokens at `queueing.Z_NODES`, on a new last axis (`Lines`)."""
    return np.asarray(lengths.prompt_p50 * lengths.uncached_share)[..., None] * np.exp(
        np.asarray(lengths.prompt_sigma)[..., None] * queueing.Z_NODES
    )


@np.errstate(divide="ignore")  # no sequence's KV fits: an inverse limit of inf
def lines(
    engine: Engine, lengths: Lengths, ttft_ms, tpot_ms, chunk, servers=1.0, nodes=None
) -> Lines:
    """The lines' fixed parts. `nodes`, `uncached_nodes(lengths)`, may be passed in by a caller
    that has them: a search lays its lines out from rows (one per prompt, many layouts and
    chunk sizes each), and their exponentials are the rows' (`colocated_best.best_points`)."""
    ctx = lengths.decode_context_mean
    scv = np.asarray(lengths.context_scv, dtype=float)
    mixed = bool((scv > 0.0).any())
    chunk_prompt = chunk_runs.chunk_prompt(lengths, mixed)
    cached = chunk_cached_tokens(lengths, chunk_prompt)
    limit = memory_batch_limit(engine, lengths)
    empty = pass_terms(engine, ctx, 0.0)  # the chunk-carrying pass shares its terms (`paired_ms`)
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
        full_pass=with_prefill_context(empty, cached + chunk_prompt / 2.0),
        empty_pass=empty,
        inverse_memory_limit=inverse_limit,
        uncached_nodes=uncached_nodes(lengths) if nodes is None else nodes,
        servers=np.asarray(servers, dtype=float),
        context_scv=scv if mixed else None,
        class_spread=np.where(scv > 0.0, chunk_runs.class_spread_weight(lengths), 0.0)
        if mixed
        else None,
    )


def evaluate(
    at: Lines, batch, t_empty=None, with_ttft=False, with_headroom=True, wait=None
) -> ColocatedGrid:
    """Colocated replicas on the given lines at `batch` decode sequences (broadcasts).

    `t_empty`, the pure decode step at `batch`, may be passed in by a caller that has it. The
    p99 TTFT itself is solved for only `with_ttft` (reports); the search needs only whether it
    holds, which the probability of missing the target answers without solving for it. That
    probability, over every quantile node, is most of the cost, and only the headroom reads
    it: without `with_headroom` (loads placed on a grid, `colocated_load`, which reads rates,
    TPOTs and idle values) neither is computed and `headroom` is None. The other fields are
    the same either way. `wait`, `pooled_wait(at)`, may be passed in by a caller that
    evaluates the lines at several batches (`colocated_best`'s searches on many lines).
    """
    b, c, lengths = batch, at.chunk, at.lengths
    # The batch a request decodes with is not the mean batch: over its lifetime the sequences
    # around it (B on average, Little's law) fluctuate, and with them how many prompts arrive to
    # be chunked alongside. Its p99 prices the batch at `queueing.batch_p99`.
    # The others' p99 over its lifetime, and the request itself.
    b99 = np.minimum(queueing.batch_p99(b) + 1.0, c - 1.0)
    b99 = np.maximum(np.minimum(b99, 1.0 / at.inverse_memory_limit), b)
    room, room99 = np.maximum(c - b, 1.0), np.maximum(c - b99, 1.0)
    # The steps at the batch, at B + 1 (`prompt_queue`) and at the p99 batch: both passes'
    # three in one call where that gives the same bits (`paired_ms`), else one call each.
    empty, full = paired_ms(
        at.empty_pass, at.full_pass, (b, b + 1.0, b99), (b, b + 1.0, b99), (room, room, room99)
    )
    if t_empty is None:
        t_empty = empty[0]
    q = prompt_queue(at, b, (room, full[0], empty[1], full[1]))
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
    if wait is None:
        tail = queueing.wait_tail(q.pool_rate, at.servers, q.mean_s, q.scv)
    else:
        tail = wait.tail(q.pool_rate, q.mean_s)  # `queueing.wait_tail`'s bits
    behind = chunk_runs.backlog_share(q, at.servers, window, at.class_spread, tail)
    spread = chunk_runs.share_spread_p99(np.minimum(carrying + behind, 1.0), draws, at.class_spread)
    t_empty99, t_full99 = _steps_at_p99(at, b, b99, room99, (empty[2], full[2]))
    slow99 = t_full99 - t_empty99
    carrying99 = (
        # prompts arrive with the others (the p99 batch less the request itself)
        carrying * (np.maximum(b99 - 1.0, b) / np.maximum(b, 1e-9)) * (room / room99)
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


def pooled_wait(at: Lines) -> queueing.PooledWait:
    """The prompt queue's wait on these lines' pools (`queueing.wait_tail`) at any batch:
    their servers and the prompt's scv are the lines'."""
    return queueing.PooledWait(at.servers, at.prompt_scv)


def _steps_at_p99(at: Lines, b, b99, room99, own) -> tuple[np.ndarray, np.ndarray]:
    """The pure decode and the chunk-carrying iteration at the p99 batch (ms).

    On mixed lines the batch's KV read varies with which classes hold the seats as well as
    with how many there are: it is read at the p99 of the batch's total context
    (`decode.read_context`, the decode pools' formula) over the M/G/inf seat spread. Other
    lines keep their own passes (`own`: the pure decode and the chunk-carrying pass at the p99
    batch), bit for bit.
    """
    empty, full = own
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
    others = np.maximum(b / at.chunk, carrying)
    # The KV seats hold the p99 of the sequences in flight (`decode.seats_in_use_p99`).
    in_use = seats_in_use_p99(b, t_empty, q.seen_empty, at.seat_scv)
    others = np.maximum(others, in_use * at.inverse_memory_limit)
    others = np.maximum(others, tpot_p99 / at.tpot_ms)
    top = b.max() if type(b) is np.ndarray else b  # the largest batch tried
    if top > at.engine.eff.max_decode_batch:  # the engine's cap per DP rank
        others = np.maximum(others, b / np.asarray(at.engine.max_decode_batch, dtype=float))
    return 1.0 - np.maximum(_ttft_ratio(at, q, tail, others), others)


# From this many (line, batch) points an evaluation bounds the TTFT ratio before summing the
# wait's tail over the quantile nodes (`_ttft_ratio`); below, the few numpy calls the bound
# takes cost more than the nodes it saves.
BOUND_MIN_POINTS = 256
# Absolute margin on a ratio's bound (ratios are of order 1; the bound holds up to rounding).
RATIO_MARGIN = 1e-9


@np.errstate(divide="ignore")  # a miss of 0 reads -inf
def _ttft_ratio(at: Lines, q: PromptQueue, tail, others: np.ndarray) -> np.ndarray:
    """The p99 TTFT's ratio to its target, as a miss probability: 1 + log(miss / 1%) /
    log(100), with the miss at the target over the prompts' pooled wait `tail` (`queueing`);
    the search needs only whether it holds, which the miss answers without solving for the
    p99 (a report does). The headroom reads only the largest ratio, so the miss is summed
    over the quantile nodes only where it may reach `others` (the largest of the other
    ratios): the rest read -inf, and the headroom the same bits. Where the others already
    fail, or pass with room, that is most points of a batch's bisection (~2/3 of its nodes'
    exponentials on the seeded 256-workload mix). The miss is at most (1 - C) P(S' > T) + C
    (the tail's sum of exponentials of non-positive numbers is at most 1), so its ratio is
    bounded without the nodes' exponentials. A `BOUND_MIN_POINTS` above every evaluation sums
    it everywhere (the tests' reference)."""
    c_wait, theta = tail
    # S' node-major: the same values, read so (rows laid out in C order are not).
    planes = None if q.nodes.flags.c_contiguous else planes_of(q.nodes)
    if planes is None and others.size < BOUND_MIN_POINTS:
        return _ratio(queueing.sum_exceed_probability(c_wait, theta, q.nodes, at.ttft_ms))
    tail_max, exact = queueing.TAIL_WAIT_MAX, True
    if planes is None:
        over = queueing.exceed_probability(q.nodes, at.ttft_ms)
    elif others.size < BOUND_MIN_POINTS:
        over = node_planes.exceed_probability(planes, at.ttft_ms)
        return _ratio(node_planes.sum_exceed_probability(c_wait, theta, planes, at.ttft_ms, over))
    elif at.bounded_nodes and q.t_full.min() >= 0.0:  # S' ascends on every row
        # Bounds from where T falls among the nodes: P(S' > T) read exactly only where the
        # TTFT may bind (`sum_exceed_where`).
        found, points = node_planes.bracket(planes, at.ttft_ms), planes.shape[1:]
        over = node_planes.over_bound(found, points)
        tail_bound = node_planes.tail_wait_bound(theta, at.ttft_ms, found, points)
        tail_max, exact = tail_bound * queueing.TAIL_WAIT_MAX, False
    else:
        over = node_planes.exceed_probability(planes, at.ttft_ms)
    bound = _ratio((1.0 - c_wait) * over + c_wait * tail_max)
    # Of the shape every ratio broadcasts to (`others`, `over` and the wait's).
    may_bind = np.logical_not(others > bound + RATIO_MARGIN)
    if planes is not None:  # the ratio of the entries left out, -inf, is `_ratio(0.0)`'s
        over = over if exact else None
        return node_planes.sum_exceed_where(
            c_wait, theta, planes, at.ttft_ms, over, may_bind, fill=-np.inf, then=_ratio
        )
    if may_bind.all():
        miss = queueing.sum_exceed_probability(c_wait, theta, q.nodes, at.ttft_ms, over)
    else:
        miss = queueing.sum_exceed_where(c_wait, theta, q.nodes, at.ttft_ms, over, may_bind)
    return _ratio(miss)


def _ratio(miss):
    """The TTFT's ratio to its target as its miss probability reads it (under the caller's
    `np.errstate`)."""
    return 1.0 + np.log(miss / queueing.P99_TAIL) / np.log(1.0 / queueing.P99_TAIL)
