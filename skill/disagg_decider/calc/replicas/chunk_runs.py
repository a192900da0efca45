"""The runs of chunk-carrying iterations a colocated request decodes through (issue 18a).

A colocated replica's p99 TPOT is the decode step plus the share of its output's iterations
that carry a prefill chunk times how much slower those are (`colocated.evaluate`). That share
varies from request to request as the number of independent runs of chunk-carrying steps
its output spans: its output's iterations over a run's length.

On mixed traffic (a few long RAG prompts among many short chat turns) the runs are long and
the share's tail is wide. In the simulator (`benchmarks/conditional_vs_sim.py`'s seeded
mix-58 at the calculator's priced rate, chunk 1024) the requests that miss the TPOT target
are short outputs (median 74-103 tokens against 169-171 for all) that decode with 70-77%
of their steps carrying a chunk against 12-22% on average; the chunk steps they meet cost
only ~7% more than the average one. So what the one-class convention misses there is how
long the runs are and how few draws a short output makes of them, not the cost of a step:

- a run is the prompt server's busy period (a long prompt, the prompts that arrive during
  it, the next long prompt queued behind them), sized at the server's share of *time*, not
  of iterations (`prompt_server_busy`, `run_iterations`);
- the p99 is taken over requests whose outputs vary, and short outputs make fewer draws
  (`tail_window_tokens`).

Both apply in proportion to the spread between the classes' mean prompts
(`class_spread_weight`): 0 for one class or identical classes, whose pricing stays the
one-class convention bit for bit (its TPOT agrees with the simulator,
`benchmarks/calc_vs_sim.py`: median p99 TPOT ratio 1.01); 1 on the seeded mixes.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas.lengths import Lengths

# Cornish-Fisher's skewness term at the p99: (z^2 - 1) / 6.
SKEW_P99 = (queueing.Z99 * queueing.Z99 - 1.0) / 6.0
FEW_RUNS = 0.25  # expected runs per window below which the skewness stops growing


def class_spread_weight(lengths: Lengths) -> np.ndarray:
    """The squared CV between the classes' mean uncached prompts, capped at 1.

    E_classes[u^2] / E[u]^2 - 1 is `Lengths.chunk_prompt_tokens` (the class-size-biased
    prompt) over the mean prompt, minus 1: 0 for one class or identical classes, continuous
    as classes move apart, and 1 once their means are as spread as in a 1:3 two-class mix
    (the 60 seeded mixes of `benchmarks/conditional_vs_sim.py` read 0.53-4.2).
    """
    mean = np.maximum(lengths.uncached_mean, 1e-9)
    return np.clip(lengths.chunk_prompt_tokens / mean - 1.0, 0.0, 1.0)


def prompt_server_busy(carrying, t_full_ms, t_empty_ms) -> np.ndarray:
    """The share of time a replica computes prompt chunks (its prompt server's utilisation),
    when `carrying` of its iterations carry a chunk and take `t_full_ms` against
    `t_empty_ms` for the others.

    With long prompts the two shares differ several-fold: a 16K prompt's chunk pass costs
    ~7x a decode pass, so at mix-58's priced rate 16% of the iterations carry a chunk and
    take 56% of the time.
    """
    chunk_ms = carrying * t_full_ms
    return chunk_ms / np.maximum(chunk_ms + (1.0 - carrying) * t_empty_ms, 1e-9)


def run_iterations(biased_room, carrying, t_full_ms, t_empty_ms, weight) -> np.ndarray:
    """Iterations in the run of chunk-carrying steps a decoding request's output meets.

    One-class convention (`weight` None or 0): the size-biased prompt's chunks
    (`biased_room` iterations), lengthened by the prompts queued behind it,
    1 / (1 - share of iterations carrying a chunk).

    Mixed traffic: the prompt server's busy period as a window meets it, size-biased: for an
    M/G/1 queue E[BP^2] / E[BP] = E[S^2] / (E[S] (1 - rho)^2), S in iterations and rho the
    server's share of time (`prompt_server_busy`): while it is busy, every iteration carries
    a chunk, and prompts arrive per unit of time. Between the two by `weight`, geometrically
    (`class_spread_weight`).
    """
    runs = np.maximum(biased_room, 1.0)
    plain = runs / np.maximum(1.0 - carrying, 1e-3)
    if weight is None:
        return plain
    idle = np.maximum(1.0 - prompt_server_busy(carrying, t_full_ms, t_empty_ms), 1e-3)
    return plain * (runs / (idle * idle) / plain) ** weight


def tail_window_tokens(output_p50, output_sigma, weight) -> np.ndarray:
    """The output length whose share of chunk-carrying steps stands for the p99 request's.

    The share's spread shrinks as 1 / sqrt(draws), draws proportional to the output; over
    log-normal outputs (shape sigma) the p99 of that scale mixture of normals equals the
    p99 at a single output p50 x exp(-sigma^2): within 4% for sigma 0.3-0.75 and 14% short
    (so a little wider) at sigma 1 (`tests/test_chunk_runs.py` solves the mixture). The
    one-class convention (`weight` None or 0) reads the median output.
    """
    if weight is None:
        return output_p50
    return output_p50 * np.exp(-weight * np.square(output_sigma))


def share_spread_p99(carrying, draws, weight=None) -> np.ndarray:
    """How far the p99 request's share of chunk-carrying iterations lies above the mean share.

    Over `draws` independent runs' worth of iterations the share has variance
    carrying (1 - carrying) / draws; its runs arrive as a Poisson count, about
    m = draws x carrying of them in a window, so it is skewed (1 / sqrt(m)) where the runs
    are few: long prompts that each block many iterations, met a handful of times by a short
    output. Cornish-Fisher adds (z^2 - 1) / 6 x skew standard deviations: at m = 1 the p99
    is 4 runs (Poisson), where the normal reading alone gives 3.3. Issue 24: a Qwen3-30B-A3B
    pool on two L40S with 6.8K-token prompts (p99 20K) was priced at a p99 TPOT of 54 ms and
    simulated at 88-97.

    Mixed traffic (`weight`, `class_spread_weight`) reads its p99 off a shorter output
    (`tail_window_tokens`), already matched to the simulator: it takes 1 - weight of the skew.
    """
    keep = np.maximum(1.0 - carrying, 0.0)
    sd = np.sqrt(np.maximum(carrying, 0.0) * keep / draws)
    normal = queueing.Z99 * sd
    # Skewness 1 / sqrt(m), held at 2 below m = 1/4 so that it fades with the load: a window
    # that meets a run less than 1% of the time has a p99 of none.
    skew = SKEW_P99 * sd / np.sqrt(np.maximum(draws * carrying, FEW_RUNS))
    return normal + (skew if weight is None else skew * (1.0 - weight))


@np.errstate(divide="ignore", invalid="ignore")  # a saturated pool's wait: C / 0
def backlog_share(q, servers, window, weight=None, wait_tail=None) -> np.ndarray:
    """The share of a request's first `window` decode iterations taken by the prompts that
    queued behind its own: they arrived while it waited and prefilled, and are chunked
    right after its first token, inside its decode.

    Arrivals spread evenly in time would give every output the pool's share of chunk-carrying
    iterations; but an output starts just as a prompt server hands over the backlog that
    built up during its own prompt's wait and prefill (its sojourn), on average the rate per
    replica times the mean sojourn, each prompt `per_room` iterations. Where prompts are long
    against outputs this is most of what a short output meets: in the simulator a
    Qwen3-30B-A3B pool on two L40S (6.8K-token prompts, 87-token outputs, 0.78 req/s) decodes
    at 26.6 ms a token on average where evenly spread arrivals give 18 (issue 24). `q` is the
    replica's `colocated_prompts.PromptQueue`, `servers` the replicas it pools with.

    On mixed traffic (`weight`, `class_spread_weight`) the run a window meets is already the
    prompt server's whole busy period, backlog included (`run_iterations`): there it counts
    1 - weight of the backlog.

    `wait_tail`, the pool's `queueing.wait_tail` (P(W > 0), theta), may be passed in by a
    caller that has it; the mean wait is C / theta as `queueing.wait_mean_ms` gives it.
    """
    if wait_tail is None:
        wait_ms = queueing.wait_mean_ms(q.pool_rate, servers, q.mean_s, q.scv)
    else:
        c_wait, theta = wait_tail
        wait_ms = np.where(theta > 0, c_wait / theta, np.inf)
    sojourn_ms = np.where(np.isfinite(wait_ms), wait_ms, 0.0) + q.mean_s
    share = np.minimum(q.rate_per_ms * sojourn_ms * q.per_room / np.maximum(window, 1.0), 1.0)
    return share if weight is None else share * (1.0 - weight)


def chunk_prompt(lengths: Lengths, mixed: bool) -> np.ndarray:
    """The prompt a chunk's token belongs to, on average over tokens (issue 24); on mixed
    traffic moved toward `chunk_prompt_tokens` with the classes' spread, continuously
    (`class_spread_weight`: near-identical classes price as one)."""
    if not mixed:
        return lengths.uncached_size_biased
    scv = np.asarray(lengths.context_scv, dtype=float)
    weight = np.where(scv > 0.0, class_spread_weight(lengths), 0.0)
    return lengths.uncached_size_biased + weight * (
        lengths.chunk_prompt_tokens - lengths.uncached_size_biased
    )
