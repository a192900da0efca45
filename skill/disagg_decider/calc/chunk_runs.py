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

from disagg_decider.calc.lengths import Lengths


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
