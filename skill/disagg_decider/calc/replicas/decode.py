"""Decode: time per output token and how many requests one decode replica serves.

Memory-bound: every step reads the weights (or the experts the batch touches) and every
sequence's KV. A replica runs the largest batch whose step stays inside the TPOT target and
whose KV fits in HBM; Little's law (batch = rate x output tokens x step time) turns that batch
into requests per second. Arrays follow the calculator's axes (row, TP, chunk, batch), a row
being one prompt length of one workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from disagg_decider.calc.physics.passes import PassTerms, pass_terms
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.array_helpers import broadcast, clip, sorted_unique
from disagg_decider.calc.queues.batch_edge import (
    boundary_index,
    interp_rows,
    littles_law_rows,
    slack,
    value_at,
)
from disagg_decider.calc.replicas.lengths import Lengths


def decode_step_ms(engine: Engine, batch, context_tokens):
    """Time per output token for a decode batch with no prefill in it."""
    return decode_pass(engine, context_tokens).ms(batch, 0.0)


def decode_pass(engine: Engine, context_tokens) -> PassTerms:
    """A pure decode pass's batch-independent terms (`decode_step_ms` is its `ms(batch, 0.0)`):
    callers pricing several batches on the same contexts build them once."""
    return pass_terms(engine, context_tokens, 0.0)


@cache
def batch_grid(max_batch: int, points: int = 16) -> np.ndarray:
    """Candidate decode batch sizes, geometric from 1 to max_batch."""
    grid = sorted_unique(np.round(np.geomspace(1, max_batch, points)))
    grid.setflags(write=False)
    return grid


def engine_batch_grid(engine: Engine) -> np.ndarray:
    """Candidate decode batches up to the largest cap among the engine's layouts
    (`Engine.max_decode_batch`, per DP rank): the grid to `efficiency.max_decode_batch`, then
    geometric points up to dp times it where a layout has DP-attention ranks. Plain TP
    layouts keep exactly the grid they had; `batch_cap_slack` keeps each under its own cap."""
    cap = engine.eff.max_decode_batch
    dp = engine.dp
    top = int(cap * max(dp if type(dp) is int else int(np.asarray(dp).max()), 1))
    return batch_grid(cap) if top == cap else _wide_grid(cap, top)


@cache
def _wide_grid(cap: int, top: int, points: int = 16) -> np.ndarray:
    above = np.round(np.geomspace(cap, top, points))[1:]
    grid = sorted_unique(np.concatenate([batch_grid(cap), above]))
    grid.setflags(write=False)
    return grid


def batch_cap_slack(engine: Engine, batch) -> np.ndarray:
    """Normalised headroom of `batch` under the engine's per-replica sequence cap."""
    return slack(np.asarray(engine.max_decode_batch, dtype=float), batch)


def memory_batch_limit(engine: Engine, lengths: Lengths):
    """Sequences whose KV fits in the replica's HBM when each reserves its whole sequence.

    The KV reservation rule, shared with the simulator: a request admitted to a batch reserves
    KV for its prompt and its whole output (reserve-all). vLLM allocates pages on demand and
    preempts when they run out; reserving up front is what an engine that never preempts must
    do, and the simulator (which models no preemption or recomputation) does exactly this, so
    both count the same sequences per replica. A seat holds `held_tokens` on average.
    """
    per_seq = engine.kv_bytes_held(held_tokens(lengths))
    return np.floor(engine.kv_capacity_bytes() / per_seq)


def held_tokens(lengths: Lengths):
    """The KV tokens a decode seat holds on average: prompt + output, seat-weighted.

    A request holds its seat for as many steps as it has output tokens, so the sequences in a
    batch at any moment are weighted by their outputs: the mean output a seat reserves is
    E[O^2] / E[O] = E[O] exp(sigma^2) for log-normal outputs, not E[O] (the prompt does not
    depend on the output). With p99 output = 3 x p50 that is 1.25 E[O]: a replica holds a
    fifth fewer sequences than the mean request suggests (measured: a TP1 Qwen3-32B replica
    with 2,000/6,000-token outputs held 116 'seats' by the mean, and its simulated batch
    stalled near 90 of them).
    """
    return lengths.prompt_mean + lengths.output_mean * np.exp(np.square(lengths.output_sigma))


@np.errstate(divide="ignore", invalid="ignore")  # the drain share's 0 / 0 (nan -> f = 1)
def seats_in_use_p99(batch, step_ms, next_step_ms, held_scv=0.0):
    """The p99 of the KV the sequences in flight reserve, in mean seats: what the KV must hold.

    Sequences in flight are an M/G/inf population, Poisson with the mean batch B, its variance
    B / f where the step grows with the batch (`feedback_variance_factor`: f = 1 - B step'(B) /
    step(B), from the step at B and B + 1); the KV they reserve varies (1 + `held_scv`) times
    as much (compound Poisson: each seat's reservation varies, `held_scv`). An arrival that
    finds the KV reserved waits for a whole decode to end, seconds to minutes, past any TTFT
    target, so the KV must cover the p99: B + 2.33 sqrt(B (1 + scv) / f) seats of the mean
    reservation (at f = 1 and one length, 79 sequences on 100 seats).
    """
    b = np.maximum(np.asarray(batch, dtype=float), 0.0)
    f = drain_share(b, step_ms, next_step_ms)
    f = clip(np.where(np.isfinite(f), f, 1.0), 0.05, 1.0)
    return b + queueing.Z99 * np.sqrt(b * (1.0 + np.asarray(held_scv, dtype=float)) / f)


def held_scv(lengths: Lengths):
    """The squared CV of one seat's reservation (prompt + output, seat-weighted: the output
    size-biased, a log-normal with the same sigma and mean E[O] exp(sigma^2))."""
    prompt_var = np.square(lengths.prompt_mean) * np.expm1(np.square(lengths.prompt_sigma))
    held_output = lengths.output_mean * np.exp(np.square(lengths.output_sigma))
    output_var = np.square(held_output) * np.expm1(np.square(lengths.output_sigma))
    return (prompt_var + output_var) / np.square(held_tokens(lengths))


@dataclass(frozen=True)
class DecodePoint:
    """Best batch per (row, TP); rate is 0 where the TPOT target cannot be met."""

    rate_per_s: np.ndarray
    batch: np.ndarray
    step_ms: np.ndarray


def replica_capacity(
    engine: Engine, lengths: Lengths, tpot_slo_ms: float, mix: BatchMix | None = None
) -> DecodePoint:
    """The largest batch whose p99 step (`step_p99_ms`) meets TPOT and whose KV fits.

    KV ingress is capped separately, per (prefill TP, decode TP) pair (`search`). `mix`: rows
    of mixed traffic price the p99 step as a mixed batch."""
    grid = engine_batch_grid(engine)
    ctx = lengths.decode_context_mean
    decode = decode_pass(engine, ctx)
    step, next_step = decode.ms(grid, 0.0), decode.ms(grid + 1.0, 0.0)  # the grid starts at 1
    limit = seat_limit(engine, lengths, mix)
    step99 = step_p99_ms(engine, ctx, grid, limit, mix, step, next_step)
    in_use = seats_in_use_p99(grid, step, next_step, held_scv(lengths))
    room = np.minimum(slack(tpot_slo_ms, step99), slack(limit, in_use))
    if grid[-1] > engine.eff.max_decode_batch:
        room = np.minimum(room, batch_cap_slack(engine, grid))
    edge = boundary_index(room)
    batch_grid_full = broadcast(grid, step.shape)
    best = np.where(edge >= 0, value_at(batch_grid_full, edge), 0.0)[..., None]
    best_step = value_at(step, np.maximum(edge, 0.0))[..., None]
    rate = np.where(best > 0, best / (lengths.output_mean * best_step) * 1e3, 0.0)
    return DecodePoint(rate_per_s=rate, batch=best, step_ms=best_step)


def tpot_p99_at_rate_ms(
    engine: Engine,
    lengths: Lengths,
    rate_per_s: np.ndarray,
    mix: BatchMix | None = None,
    step_ms: np.ndarray | None = None,
) -> np.ndarray:
    """p99 TPOT at each load (N,): the step at the p99 batch around the mean one (`step_p99_ms`).

    From batch 1 up it is read off the batch grid the capacity was found on (linear between
    points, as `replica_capacity` interpolates), so a replica loaded to its capacity reports the
    TPOT it was sized for, never a little more; below the grid it is evaluated exactly.
    `step_ms`, `step_at_rate_ms` at these loads, may be passed in by a caller that has it.
    """
    batch = np.asarray(batch_at_rate(engine, lengths, rate_per_s, step_ms), dtype=float)
    grid = engine_batch_grid(engine)
    limit = seat_limit(engine, lengths, mix)
    ctx = lengths.decode_context_mean
    step99 = step_p99_ms(engine, ctx, grid, limit, mix)
    exact = np.ravel(step_p99_ms(engine, ctx, batch[:, None], limit, mix))
    step99 = broadcast(step99, (len(batch), grid.size))
    on_grid = interp_rows(batch, broadcast(grid, step99.shape), step99)
    return np.where(batch < grid[0], exact, on_grid)


# --- what a decode batch costs at p99: one class or several ----------------------------------


@dataclass(frozen=True)
class BatchMix:
    """Rows of mixed traffic, as their decode batch holds them (`classes.batch_mix`); arrays
    shaped like the rows' lengths, nan on rows of one class (which keep the one-class pricing).
    """

    context_scv: np.ndarray  # squared CV of a seat's context across classes
    held_tokens: np.ndarray  # KV tokens a seat reserves, seat-weighted over classes

    @property
    def mixed(self) -> np.ndarray:
        return np.isfinite(self.context_scv)


def seat_limit(engine: Engine, lengths: Lengths, mix: BatchMix | None):
    """`memory_batch_limit`, with a mixed row's seats holding its classes' seat-weighted KV
    (a long-output RAG class holds more of the seats than its share of requests)."""
    limit = memory_batch_limit(engine, lengths)
    if mix is None:
        return limit
    held = np.floor(engine.kv_capacity_bytes() / engine.kv_bytes_held(mix.held_tokens))
    return np.where(mix.mixed, held, limit)


def drain_share(batch, step_ms, next_step_ms):
    """f = 1 - B step'(B) / step(B), from the step at B and B + 1: the share of the step that
    does not grow with the batch, how fast a batch drifts back to its mean (1: M/G/inf)."""
    return 1.0 - batch * (next_step_ms - step_ms) / step_ms


def feedback_variance_factor(f):
    """How much more the time-averaged batch of a request varies when the step slows with it.

    Sequences join at the arrival rate and leave after output x step(B) ms; a step that grows
    with the batch makes them leave more slowly when the batch is large, so the batch returns
    to its mean at f times the M/G/inf speed, f = 1 - B step'(B) / step(B) (the share of the
    step that does not grow with the batch). Linearised (an Ornstein-Uhlenbeck population),
    the instantaneous variance is B / f and its correlation time lifetime / f, and the
    variance of its average over one lifetime is B g(f) / f, g(x) = 2 (x - 1 + e^-x) / x^2.
    Returned relative to f = 1, where `queueing.batch_p99`'s 2/3 B applies, so f = 1 gives 1.
    """
    f = clip(f, 0.05, 1.0)
    g = 2.0 * (f - 1.0 + np.exp(-f)) / (f * f)
    return g / (f * _G_ONE)


_G_ONE = 2.0 * float(np.exp(-1.0))  # g(1)


def step_p99_ms(
    engine: Engine, ctx, batch, limit, mix: BatchMix | None = None, step=None, next_step=None
):
    """p99 step of a decode batch of mean size `batch` (last axis) around mean context `ctx`.

    A request's TPOT averages the batch over its lifetime (`queueing.batch_p99`, M/G/inf),
    widened because a long-context batch is KV-read bound: its step grows with the batch, so
    the batch drifts back to its mean slowly (`feedback_variance_factor`; measured with the
    simulator: batch sd 1.5x the M/G/inf figure on a 70/30 chat/RAG mix, p99/p50 TPOT 1.22
    where M/G/inf says 1.12 on one 5000/200-token class). One class and the same traffic
    written as several identical classes therefore price the same. A mixed row (`mix`) has
    one more spread: the KV read per step varies with which classes hold the seats, its
    variance (1 + context scv) times the seat count's (compound Poisson), so the pass is
    priced at the p99 seat count and at the mean context that makes its KV read the p99 of
    the batch's total context (scv 0, the seat count's p99, on one class). The p99 batch
    stays within the replica's seats (`limit`, the engine's cap) and at least the mean.
    `step` and `next_step`, the pass at `batch` (at least 1) and at one more, may be passed in.
    """
    decode = decode_pass(engine, ctx)
    b = np.asarray(batch, dtype=float)
    b1 = np.maximum(b, 1.0)  # an idle replica's step is one sequence's (no 0 / 0)
    step = decode.ms(b1, 0.0) if step is None else step
    next_step = decode.ms(b1 + 1.0, 0.0) if next_step is None else next_step
    f = drain_share(b1, step, next_step)
    spread = queueing.Z99 * np.sqrt(2.0 * np.maximum(b, 0.0) / 3.0 * feedback_variance_factor(f))
    cap = np.maximum(np.minimum(np.maximum(limit, 1.0), engine.max_decode_batch), b)
    b99 = np.maximum(np.minimum(b + spread, cap), np.maximum(b, 1.0))
    if mix is None:
        return decode.ms(b99, 0.0)
    ctx99 = read_context(ctx, b, spread, b99, cap, np.where(mix.mixed, mix.context_scv, 0.0))
    return decode_pass(engine, ctx99).ms(b99, 0.0)


def read_context(ctx, batch, spread, b99, cap, context_scv):
    """The mean context at which `b99` seats read the p99 of a mixed batch's total KV.

    The seat count's spread (`spread` above the mean `batch`) widens by sqrt(1 + scv) for the
    total context (compound Poisson: each seat's context varies across classes with squared
    CV `context_scv`), capped at `cap` seats of mean context; never below the mean context.
    The decode pools (`step_p99_ms`) and the colocated replicas (`colocated`) both read it.
    """
    read99 = np.minimum(batch + spread * np.sqrt(1.0 + context_scv), cap)
    return ctx * np.maximum(read99, b99) / b99


def step_at_rate_ms(engine: Engine, lengths: Lengths, rate_per_s: np.ndarray) -> np.ndarray:
    """Step time at the batch each load (N,) settles at.

    The engine's TP and the lengths are scalars or columns (N, 1), one row per load.
    """
    grid = engine_batch_grid(engine)
    step = decode_step_ms(engine, grid, lengths.decode_context_mean)
    step = broadcast(step, (len(rate_per_s), grid.size))
    per_step = broadcast(lengths.output_mean, (len(rate_per_s), 1)) / 1e3
    return littles_law_rows(np.asarray(rate_per_s, dtype=float), grid, step, per_step)


def batch_at_rate(
    engine: Engine, lengths: Lengths, rate_per_s: np.ndarray, step_ms: np.ndarray | None = None
) -> np.ndarray:
    """Sequences in flight at each load (Little's law on the step time it settles at,
    `step_at_rate_ms`, or `step_ms` where the caller has it)."""
    step = step_at_rate_ms(engine, lengths, rate_per_s) if step_ms is None else step_ms
    return rate_per_s * np.ravel(lengths.output_mean) * step / 1e3


def join_step_ms(engine: Engine, lengths: Lengths):
    """The decode step a request's first token waits for after its KV lands: one at batch 1.

    The prefill pool's TTFT budget and the TTFT reported at the workload's rate both use it,
    so a split loaded to its prefill capacity reports the TTFT it was sized for.
    """
    return decode_step_ms(engine, 1.0, lengths.decode_context_mean)
