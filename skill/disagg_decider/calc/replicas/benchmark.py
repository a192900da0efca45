"""What a benchmark run of one colocated replica would measure: mean TTFT, TPOT and throughput.

`decide calibrate` fits efficiency constants so that these predictions match a team's own
`vllm bench serve`, AIPerf or SGLang runs; `calc/static.py` uses the same mean-field replica
without queueing. The physics is the calculator's: `step.iteration_ms` for every pass, chunked
prefill as in `calc/replicas/colocated.py`, M/G/1 for the prompts' wait (physics.md 2.6, 2.9).

A replica with `b` sequences decoding and a token budget `chunk` per iteration puts
k = min(chunk - b, prompt) prompt tokens into an iteration that carries a prompt, so a prompt
takes prompt / k such iterations. With pure decode iterations lasting t_empty(b) and
chunk-carrying ones t_full(b), Little's law (b = rate x (output - 1) x TPOT) gives in closed form

    rate(b) = b / ((output - 1) t_empty + b (prompt / k) (t_full - t_empty))
    TPOT(b) = t_empty + b (prompt / k) (t_full - t_empty) / (output - 1)

and TTFT = half an iteration (an arrival lands mid-iteration) + M/G/1 wait + the prompt's own
chunk iterations. Loads are given the way benchmark tools set them: an open-loop request rate
(`--request-rate`) or a closed loop of `concurrency` clients (`--max-concurrency`, AIPerf
`--concurrency`); either is solved for b by bisection, all runs at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.physics.step import Engine, iteration_ms

BISECTION_ROUNDS = 48


@dataclass(frozen=True)
class Runs:
    """Benchmark runs' settings, one entry per run (N,)."""

    prompt_tokens: np.ndarray  # mean uncached prompt tokens per request
    output_tokens: np.ndarray  # mean output tokens per request
    prompt_cv: np.ndarray  # coefficient of variation of prompt lengths (0: fixed)
    request_rate_per_s: np.ndarray  # open-loop rate; inf for closed-loop runs
    concurrency: np.ndarray  # closed-loop clients; nan for open-loop runs

    @property
    def closed_loop(self) -> np.ndarray:
        return np.isfinite(self.concurrency)


@dataclass(frozen=True)
class Replica:
    """Mean-field figures of a replica at decode batch `batch` (arrays over runs)."""

    batch: np.ndarray
    rate_per_s: np.ndarray
    tpot_ms: np.ndarray
    prefill_service_ms: np.ndarray  # the prompt's own chunk iterations, no queue
    iteration_ms: np.ndarray  # mean iteration time (= TPOT)
    prefill_busy: np.ndarray  # share of time the prompt "server" is busy (M/G/1 rho)


def at_batch(engine: Engine, runs: Runs, chunk_tokens: float, batch) -> Replica:
    """The replica with `batch` sequences decoding, no queue: static-batch figures."""
    b = np.maximum(np.asarray(batch, dtype=float), 1e-6)
    prompt = np.maximum(runs.prompt_tokens, 1.0)
    decode_steps = np.maximum(runs.output_tokens - 1.0, 1.0)
    k = np.clip(chunk_tokens - b, 1.0, prompt)  # prompt tokens per chunk-carrying iteration
    per_prompt = prompt / k
    context = prompt + runs.output_tokens / 2.0
    t_empty = iteration_ms(engine, b, context, 0.0, 0.0)
    t_full = iteration_ms(engine, b, context, k, np.maximum(prompt - k, 0.0) / 2.0)
    slow = t_full - t_empty
    rate_per_ms = b / (decode_steps * t_empty + b * per_prompt * slow)
    service = per_prompt * t_full
    # What a request sees differs from the time average (inspection paradox): it decodes beside
    # the others in flight (b + 1 sequences, Poisson arrivals seeing time averages), and the
    # prompts that queued behind its own prefill (rho of them on average) are prefilled during
    # its first iterations.
    seen_empty = iteration_ms(engine, b + 1.0, context, 0.0, 0.0)
    behind = rate_per_ms * service * per_prompt * slow
    tpot = seen_empty + (b * per_prompt * slow + behind) / decode_steps
    return Replica(
        batch=b,
        rate_per_s=rate_per_ms * 1e3,
        tpot_ms=tpot,
        prefill_service_ms=service,
        iteration_ms=tpot,
        prefill_busy=rate_per_ms * service,
    )


def mean_ttft_ms(replica: Replica, runs: Runs) -> np.ndarray:
    """Half an iteration, the M/G/1 mean wait (Pollaczek-Khinchine) and the prompt's service."""
    rho = replica.prefill_busy
    second = replica.prefill_service_ms**2 * (1.0 + runs.prompt_cv**2)
    rate_per_ms = replica.rate_per_s / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1.0, rate_per_ms * second / (2.0 * (1.0 - rho)), np.inf)
    return replica.iteration_ms / 2.0 + wait + replica.prefill_service_ms


@dataclass(frozen=True)
class Predicted:
    """What each run would measure; TTFT is nan where the run is past saturation."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    request_rate_per_s: np.ndarray
    output_tokens_per_s: np.ndarray
    batch: np.ndarray
    saturated: np.ndarray  # the replica could not carry the offered load


def predict(engine: Engine, runs: Runs, chunk_tokens: float, max_batch: float) -> Predicted:
    """Each run's mean TTFT, TPOT and throughput on one replica of `engine`.

    The decode batch is capped by `max_batch` (max_num_seqs), the chunk budget and KV memory.
    Closed loops past the cap queue their extra clients: TTFT then follows from Little's law.
    """
    cap = np.minimum(max_batch, chunk_tokens - 1.0)
    per_seq = engine.kv_bytes_held(runs.prompt_tokens + runs.output_tokens)
    cap = np.maximum(np.minimum(cap, np.floor(engine.kv_capacity_bytes() / per_seq)), 1.0)
    closed = runs.closed_loop

    def excess(b):
        """Offered minus carried load at batch b: increasing in b, so bisection finds b."""
        r = at_batch(engine, runs, chunk_tokens, b)
        ttft = mean_ttft_ms(r, runs)
        in_system = r.rate_per_s / 1e3 * (ttft + (runs.output_tokens - 1.0) * r.tpot_ms)
        offered_closed = np.where(np.isfinite(in_system), in_system - runs.concurrency, 1.0)
        offered_open = r.rate_per_s - runs.request_rate_per_s
        return np.where(closed, offered_closed, offered_open)

    lo = np.full(runs.prompt_tokens.shape, 1e-3)
    hi = np.broadcast_to(cap, lo.shape).astype(float)
    saturated = excess(hi) < 0
    for _ in range(BISECTION_ROUNDS):
        mid = 0.5 * (lo + hi)
        below = excess(mid) < 0
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    b = np.where(saturated, np.broadcast_to(cap, lo.shape), 0.5 * (lo + hi))
    r = at_batch(engine, runs, chunk_tokens, b)
    ttft = mean_ttft_ms(r, runs)
    # A saturated closed loop: the clients beyond the batch wait; Little's law on the system.
    queued = runs.concurrency / (r.rate_per_s / 1e3) - (runs.output_tokens - 1.0) * r.tpot_ms
    ttft = np.where(saturated & closed, np.maximum(queued, ttft), ttft)
    ttft = np.where(saturated & ~closed, np.nan, ttft)
    ttft = np.where(np.isfinite(ttft), ttft, np.nan)
    return Predicted(
        ttft_ms=ttft,
        tpot_ms=r.tpot_ms,
        request_rate_per_s=r.rate_per_s,
        output_tokens_per_s=r.rate_per_s * runs.output_tokens,
        batch=b,
        saturated=saturated,
    )
