"""Prefill: time per prompt and how many requests per second one prefill replica serves.

Compute-bound: the roofline in `step.iteration_ms` with no decode tokens. A prefill replica is
an M/G/1 server whose p99 queueing plus p99 service must fit in the TTFT budget left after the
KV transfer and the first decode step. Arrays follow the calculator's axes.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.calc import queueing
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.step import Engine, iteration_ms


def prefill_ms(engine: Engine, prompt_tokens, cached_tokens=0.0):
    """Time to prefill one prompt alone: its time to first token before queueing and transfer."""
    return iteration_ms(engine, 0.0, 0.0, prompt_tokens, cached_tokens) + (
        engine.eff.prefill_overhead_ms
    )


def service_moments_ms(engine: Engine, lengths: Lengths):
    """E[S] and E[S^2] of prefill service time over the prompt-length distribution.

    Gauss-Hermite nodes of the log-normal take the last axis and are summed away.
    """
    nodes, weights = queueing.lognormal_nodes(lengths.prompt_p50, lengths.prompt_sigma)
    share = lengths.uncached_share
    service = prefill_ms(engine, nodes * share, nodes * (1.0 - share))
    mean = (service * weights).sum(axis=-1, keepdims=True)
    second = (service * service * weights).sum(axis=-1, keepdims=True)
    return mean, second


def p99_prefill_ms(engine: Engine, lengths: Lengths):
    p99 = lengths.prompt_p99
    return prefill_ms(engine, p99 * lengths.uncached_share, p99 * lengths.hit_rate)


def replica_rate_per_s(mean_ms, second_ms2, p99_ms, ttft_budget_ms):
    """Requests per second one replica sustains with p99 TTFT inside `ttft_budget_ms`."""
    return queueing.max_rate_per_ms(np.asarray(ttft_budget_ms) - p99_ms, mean_ms, second_ms2) * 1e3


def ttft_p99_ms(engine: Engine, lengths: Lengths, rate_per_s: np.ndarray) -> np.ndarray:
    """p99 prefill-side TTFT (queue + prefill) of a replica at each load (N,).

    The engine's TP and the lengths are scalars or columns (N, 1), one row per load.
    """
    mean, second = service_moments_ms(engine, lengths)
    wait = queueing.wait_p99_ms(np.reshape(rate_per_s, (-1, 1)) / 1e3, mean, second)
    return np.ravel(p99_prefill_ms(engine, lengths) + wait)
