"""Prompt and output lengths as log-normal distributions, with prefix-cache hits applied.

Every field may be a numpy array along the calculator's leading axis: one search evaluates many
prompt lengths (the crossover) of many workloads (a batch) at once. Every derived figure is
computed once here, since the search reads them many times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.workload import Workload, lognormal_sigma


@dataclass(frozen=True)
class Lengths:
    prompt_p50: np.ndarray
    prompt_sigma: np.ndarray
    hit_rate: np.ndarray
    output_p50: np.ndarray
    output_sigma: np.ndarray
    prompt_mean: np.ndarray
    prompt_p99: np.ndarray
    uncached_share: np.ndarray
    uncached_mean: np.ndarray
    uncached_second_moment: np.ndarray  # E[u^2] of uncached prompt tokens
    # E[u^2] / E[u]: the mean uncached prompt of the request a random prompt token belongs to
    # (size-biased), the length of the chunk runs a decoding request meets (`colocated`)
    uncached_size_biased: np.ndarray
    output_mean: np.ndarray
    # ISL + OSL/2 (Dynamo planner's convention) with OSL seat-weighted: a decode seat is held
    # by a sequence for its output, so the batch holds long outputs more (E[O^2] / E[O]).
    decode_context_mean: np.ndarray
    # Mixed traffic (set on a mixed workload's own rows, `classes`): the uncached prompt a
    # chunked-prefill token belongs to (`classes.chunk_prompt_tokens`; the mean uncached prompt
    # otherwise), and the squared CV of a decode seat's context across the classes
    # (`classes.seat_context_scv`; 0 otherwise). The colocated model reads both.
    chunk_prompt_tokens: np.ndarray
    context_scv: np.ndarray

    def map(self, each: Callable[[np.ndarray], np.ndarray]) -> Lengths:
        """Every field through `each` (take rows, repeat, reshape): the callers that lay out
        lengths for other axes do it to all fields alike, including ones added later."""
        return Lengths(**{name: each(value) for name, value in vars(self).items()})

    def at(self, index, shape=None) -> Lengths:
        """Every field at `index` (rows taken; then reshaped to `shape`, if given): `map` of
        an indexing, with each field indexed in place rather than through a call apiece (the
        searches take rows of lengths many times a decision)."""
        if shape is None:
            return Lengths(**{name: value[index] for name, value in vars(self).items()})
        return Lengths(**{name: value[index].reshape(shape) for name, value in vars(self).items()})

    @classmethod
    def of(cls, workload: Workload, prompt_p50=None) -> Lengths:
        t = workload.traffic
        return cls.build(
            prompt_p50=t.prompt_tokens.p50 if prompt_p50 is None else prompt_p50,
            prompt_sigma=lognormal_sigma(t.prompt_tokens),
            hit_rate=t.prefix_cache_hit_rate,
            output_p50=t.output_tokens.p50,
            output_sigma=lognormal_sigma(t.output_tokens),
        )

    @classmethod
    def build(cls, prompt_p50, prompt_sigma, hit_rate, output_p50, output_sigma) -> Lengths:
        """From the five numbers a workload gives (scalars or arrays that broadcast)."""
        p50 = np.asarray(prompt_p50, dtype=float)
        sigma = np.asarray(prompt_sigma, dtype=float)
        hit = np.asarray(hit_rate, dtype=float)
        share = 1.0 - hit
        mean = queueing.lognormal_mean(p50, sigma)
        second = (share * p50) ** 2 * np.exp(2.0 * sigma * sigma)
        out_mean = queueing.lognormal_mean(output_p50, output_sigma)
        uncached_mean = mean * share
        return cls(
            prompt_p50=p50,
            prompt_sigma=sigma,
            hit_rate=hit,
            output_p50=np.asarray(output_p50, dtype=float),
            output_sigma=np.asarray(output_sigma, dtype=float),
            prompt_mean=mean,
            prompt_p99=queueing.lognormal_p99(p50, sigma),
            uncached_share=share,
            uncached_mean=uncached_mean,
            uncached_second_moment=second,
            uncached_size_biased=second / np.maximum(uncached_mean, 1e-9),
            output_mean=out_mean,
            decode_context_mean=mean + out_mean * np.exp(np.square(output_sigma)) / 2.0,
            chunk_prompt_tokens=uncached_mean,
            context_scv=np.zeros(uncached_mean.shape),  # a numpy array or scalar
        )
