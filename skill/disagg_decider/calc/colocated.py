"""The colocated comparator: continuous batching with chunked prefill (physics.md 2.9).

This is the strong baseline engines really run (vLLM's `max_num_batched_tokens`, Sarathi-Serve):
each iteration carries the decode batch B plus up to C - B prompt tokens. Iterations that carry
a prefill chunk are slower (t_full) than pure decode ones (t_empty); that slowdown is the
interference disaggregation removes.

With prompts needing u uncached tokens arriving at rate lam, a share f of iterations carry a
chunk, so the mean iteration is t = t_empty + f (t_full - t_empty). Little's law (B = lam OSL t)
then gives the rate a batch B carries in closed form:

    lam = B / (OSL t_empty + B u (t_full - t_empty) / (C - B))

Every candidate (prompt, TP, chunk size C, batch B) is evaluated at once on a grid; the best
feasible point per (prompt, TP) is the replica's capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc import queueing
from disagg_decider.calc.decode import batch_grid, decode_step_ms, memory_batch_limit
from disagg_decider.calc.frontier import boundary_index, pick, slack, value_at
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.step import Engine, iteration_ms
from disagg_decider.workload import Slo


@dataclass(frozen=True)
class ColocatedGrid:
    """Every candidate with its rate and p99 latencies; axes (prompt, TP, chunk, batch)."""

    chunk: np.ndarray
    batch: np.ndarray
    rate_per_s: np.ndarray
    ttft_p99_ms: np.ndarray
    tpot_p99_ms: np.ndarray
    headroom: np.ndarray  # smallest normalised slack over all targets; >= 0 is feasible
    idle_ttft_ms: np.ndarray  # p99 TTFT with no queue
    idle_tpot_ms: np.ndarray  # TPOT with no prefill riding along


def grid(engine: Engine, lengths: Lengths, slo: Slo, chunks: list[int]) -> ColocatedGrid:
    b = batch_grid(engine.eff.max_decode_batch)
    c = np.asarray(chunks, dtype=float)[:, None]
    ctx = lengths.decode_context_mean
    u_mean = lengths.uncached_mean
    cached = lengths.prompt_mean * lengths.hit_rate

    room = np.maximum(c - b, 1.0)  # prompt tokens a chunk-carrying iteration takes
    t_empty = decode_step_ms(engine, b, ctx)
    t_full = iteration_ms(engine, b, ctx, room, cached + u_mean / 2.0)
    slow = t_full - t_empty

    rate_per_ms = b / (lengths.output_mean * t_empty + b * u_mean * slow / room)
    t_mean = b / (rate_per_ms * lengths.output_mean)
    carrying = rate_per_ms * u_mean * t_mean / room  # share of iterations that carry a chunk
    # A prompt's chunks ride on consecutive iterations, so a request's output overlaps runs of
    # chunk-carrying steps: its share varies as over OSL / run-length independent draws.
    run_length = np.maximum(u_mean / room, 1.0)
    draws = np.maximum(lengths.output_p50 / run_length, 1.0)
    spread = queueing.Z99 * np.sqrt(np.clip(carrying * (1 - carrying), 0, None) / draws)
    tpot_p99 = t_empty + np.minimum(1.0, carrying + spread) * slow

    # Prefill as an M/G/1 server working through prompt tokens at `room` tokens per t_full:
    # a prompt of u tokens occupies it u / room iterations (chunks pack several short prompts),
    # and its first token comes out of the iteration that finishes it.
    s1 = t_full / room
    mean_s = s1 * u_mean
    second_s = s1 * s1 * lengths.uncached_second_moment
    u_p99 = lengths.prompt_p99 * lengths.uncached_share
    service_p99 = t_full + s1 * u_p99
    ttft_p99 = service_p99 + queueing.wait_p99_ms(rate_per_ms, mean_s, second_s)

    headroom = slack(c, b)
    for limit, value in (
        (1.0, carrying),
        (memory_batch_limit(engine, lengths), b),
        (slo.tpot_ms, tpot_p99),
        (slo.ttft_ms, ttft_p99),
    ):
        headroom = np.minimum(headroom, slack(limit, value))
    shape = headroom.shape
    return ColocatedGrid(
        chunk=np.broadcast_to(c, shape),
        batch=np.broadcast_to(b, shape),
        rate_per_s=rate_per_ms * 1e3,
        ttft_p99_ms=ttft_p99,
        tpot_p99_ms=tpot_p99,
        headroom=headroom,
        idle_ttft_ms=service_p99,
        idle_tpot_ms=np.broadcast_to(t_empty, shape),
    )


@dataclass(frozen=True)
class ColocatedPoint:
    """Best (chunk, batch) per (prompt, TP); rate 0 where no point meets the targets."""

    rate_per_s: np.ndarray
    chunk_index: np.ndarray
    batch: np.ndarray


def best_points(g: ColocatedGrid) -> ColocatedPoint:
    """Largest feasible batch per chunk size (interpolated), then the best chunk size."""
    edge = boundary_index(g.headroom)  # (..., C)
    rate = np.where(edge >= 0, value_at(g.rate_per_s, np.maximum(edge, 0.0)), 0.0)
    batch = np.where(edge >= 0, value_at(g.batch, np.maximum(edge, 0.0)), 0.0)
    best = rate.argmax(axis=-1)
    return ColocatedPoint(rate_per_s=pick(rate, best), chunk_index=best, batch=pick(batch, best))


def latencies_at_rate(g: ColocatedGrid, index: tuple[int, int, int], rate_per_s: float):
    """p99 TTFT and TPOT at a given load along one (prompt, TP, chunk) row of the grid.

    The grid starts at batch 1, whose rate already carries some queueing; below it the
    latencies fall linearly to their idle values (no queue, no prefill riding along) at rate 0.
    """
    rates = np.concatenate([[0.0], g.rate_per_s[index]])
    order = np.argsort(rates, kind="stable")
    ttft = np.concatenate([[g.idle_ttft_ms[index][0]], g.ttft_p99_ms[index]])
    tpot = np.concatenate([[g.idle_tpot_ms[index][0]], g.tpot_p99_ms[index]])
    return (
        float(np.interp(rate_per_s, rates[order], ttft[order])),
        float(np.interp(rate_per_s, rates[order], tpot[order])),
    )
