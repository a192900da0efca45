"""Prompt and output lengths as log-normal distributions, with prefix-cache hits applied.

`prompt_p50` may be a numpy array: the crossover search evaluates many prompt lengths at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

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

    @classmethod
    def of(cls, workload: Workload, prompt_p50=None) -> Lengths:
        t = workload.traffic
        p50 = t.prompt_tokens.p50 if prompt_p50 is None else prompt_p50
        return cls(
            prompt_p50=np.asarray(p50, dtype=float),
            prompt_sigma=lognormal_sigma(t.prompt_tokens),
            hit_rate=t.prefix_cache_hit_rate,
            output_p50=t.output_tokens.p50,
            output_sigma=lognormal_sigma(t.output_tokens),
        )

    @cached_property
    def prompt_mean(self) -> np.ndarray:
        return queueing.lognormal_mean(self.prompt_p50, self.prompt_sigma)

    @cached_property
    def prompt_p99(self) -> np.ndarray:
        return queueing.lognormal_p99(self.prompt_p50, self.prompt_sigma)

    @cached_property
    def uncached_share(self) -> float:
        return 1.0 - self.hit_rate

    @cached_property
    def uncached_mean(self) -> np.ndarray:
        return self.prompt_mean * self.uncached_share

    @cached_property
    def uncached_second_moment(self) -> np.ndarray:
        s = self.uncached_share * self.prompt_p50
        return s * s * math.exp(2.0 * self.prompt_sigma**2)

    @cached_property
    def output_mean(self) -> float:
        return float(queueing.lognormal_mean(self.output_p50, self.output_sigma))

    @cached_property
    def decode_context_mean(self) -> np.ndarray:
        """Average KV context of a decoding request (Dynamo's planner uses ISL + OSL/2)."""
        return self.prompt_mean + self.output_mean / 2.0
