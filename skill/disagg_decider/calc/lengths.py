"""Prompt and output lengths as log-normal distributions, with prefix-cache hits applied.

`prompt_p50` may be a numpy array: the crossover search evaluates many prompt lengths at once.
Every derived figure is computed once here, since the search reads them many times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc import queueing
from disagg_decider.workload import Workload, lognormal_sigma


@dataclass(frozen=True)
class Lengths:
    prompt_p50: np.ndarray
    prompt_sigma: float
    hit_rate: float
    output_p50: float
    output_sigma: float
    prompt_mean: np.ndarray
    prompt_p99: np.ndarray
    uncached_share: float
    uncached_mean: np.ndarray
    uncached_second_moment: np.ndarray  # E[u^2] of uncached prompt tokens
    output_mean: float
    decode_context_mean: np.ndarray  # ISL + OSL/2, the convention of Dynamo's planner

    @classmethod
    def of(cls, workload: Workload, prompt_p50=None) -> Lengths:
        t = workload.traffic
        p50 = np.asarray(t.prompt_tokens.p50 if prompt_p50 is None else prompt_p50, dtype=float)
        sigma = lognormal_sigma(t.prompt_tokens)
        out_sigma = lognormal_sigma(t.output_tokens)
        share = 1.0 - t.prefix_cache_hit_rate
        mean = queueing.lognormal_mean(p50, sigma)
        out_mean = float(queueing.lognormal_mean(t.output_tokens.p50, out_sigma))
        return cls(
            prompt_p50=p50,
            prompt_sigma=sigma,
            hit_rate=t.prefix_cache_hit_rate,
            output_p50=t.output_tokens.p50,
            output_sigma=out_sigma,
            prompt_mean=mean,
            prompt_p99=queueing.lognormal_p99(p50, sigma),
            uncached_share=share,
            uncached_mean=mean * share,
            uncached_second_moment=(share * p50) ** 2 * math.exp(2.0 * sigma * sigma),
            output_mean=out_mean,
            decode_context_mean=mean + out_mean / 2.0,
        )
