"""Prefill: time per prompt and how many requests per second a prefill pool serves.

Compute-bound: the roofline in `step.iteration_ms` with no decode tokens. A pool of replicas
behind a load-aware router is one M/G/c queue (`queueing`); the p99 of its wait plus the
service-side time of a request (its prefill, its KV transfer and the decode step it joins)
must fit the TTFT target. Arrays follow the calculator's axes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.physics.step import Engine, iteration_ms
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas.lengths import Lengths


def prefill_ms(engine: Engine, prompt_tokens, cached_tokens=0.0):
    """Time to prefill one prompt alone: its time to first token before queueing and transfer."""
    return iteration_ms(engine, 0.0, 0.0, prompt_tokens, cached_tokens) + (
        engine.prefill_overhead_ms
    )


def prompt_nodes(lengths: Lengths) -> np.ndarray:
    """Prompt lengths at the `queueing.Z_NODES` quantiles, replacing the last axis (size one)."""
    return queueing.lognormal_quantile_nodes(lengths.prompt_p50, lengths.prompt_sigma)


def service_nodes_ms(engine: Engine, lengths: Lengths) -> np.ndarray:
    """Prefill time at each prompt quantile (`queueing.Z_NODES` on the last axis)."""
    nodes = prompt_nodes(lengths)
    share = lengths.uncached_share
    return prefill_ms(engine, nodes * share, nodes * (1.0 - share))


def moments(nodes_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and squared coefficient of variation of a time given at the z quantiles.

    `np.add.reduce` is the reduction `ndarray.sum` ends in (the same bits), without its two
    Python-level calls on the way."""
    w = queueing.Z_WEIGHTS
    mean = np.add.reduce(nodes_ms * w, axis=-1)
    second = np.add.reduce(nodes_ms * nodes_ms * w, axis=-1)
    return mean, np.maximum(second / (mean * mean) - 1.0, 0.0)


def p99_prefill_ms(engine: Engine, lengths: Lengths):
    p99 = lengths.prompt_p99
    return prefill_ms(engine, p99 * lengths.uncached_share, p99 * lengths.hit_rate)


@dataclass(frozen=True)
class Pool:
    """What a prefill pool's TTFT depends on, besides its size and load.

    `nodes_ms` is the service-side part of TTFT (prefill + transfer + first decode step) at
    each prompt quantile (last axis); mean and scv describe the prefill service alone (what
    holds a replica). `target_ms` is the p99 TTFT target.
    """

    mean_ms: np.ndarray
    scv: np.ndarray
    nodes_ms: np.ndarray
    target_ms: np.ndarray

    def rows(self, index) -> Pool:
        """The pool at `index` of its leading axis (rows of a search), every field alike."""
        return Pool(
            self.mean_ms[index], self.scv[index], self.nodes_ms[index], self.target_ms[index]
        )

    def max_rate_per_s(self, servers) -> np.ndarray:
        """Requests per second `servers` replicas sustain with p99 TTFT inside the target."""
        rate = queueing.max_rate_per_ms(
            servers, self.mean_ms, self.scv, self.nodes_ms, self.target_ms
        )
        return rate * 1e3

    def ttft_p99_ms(self, servers, rate_per_s) -> np.ndarray:
        """p99 TTFT at a load: the p99 of wait + prefill + transfer + first step."""
        return queueing.p99_of_sum_ms(
            np.asarray(rate_per_s) / 1e3, servers, self.mean_ms, self.scv, self.nodes_ms
        )

    def servers_needed(self, rate_per_s, most: np.ndarray) -> np.ndarray:
        """Fewest replicas that carry `rate_per_s` within the target; most + 1 where none do.

        One replica's rate bounds the count from above (a pool's per-replica rate only grows
        with its size), so only that many sizes are tried.
        """
        return self.sizing(rate_per_s, most).servers

    def sizing(self, rate_per_s, most: np.ndarray, one=None) -> Sizing:
        """`servers_needed`, with the rates of the sizes it tried (`Sizing.rate_at` reads them
        back, so a caller pricing the chosen size need not bisect its load again). `one`, the
        rate of one replica, may be passed in by a caller that has it (the same numbers)."""
        rate = np.asarray(rate_per_s, dtype=float)
        one = self.max_rate_per_s(1.0) if one is None else one
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(one > 0, np.ceil(rate / one - 1e-9), most)
        top = int(max(np.max(np.minimum(bound, most)), 1))
        sizes = np.arange(1, top + 1, dtype=float)
        pool = Pool(
            *(np.asarray(a)[..., None] for a in (self.mean_ms, self.scv)),
            nodes_ms=np.asarray(self.nodes_ms)[..., None, :],
            target_ms=np.asarray(self.target_ms)[..., None],
        )
        rates = pool.max_rate_per_s(sizes)
        ok = (rates >= rate[..., None] * (1 - 1e-9)) & (sizes <= np.asarray(most)[..., None])
        first = np.where(ok.any(axis=-1), ok.argmax(axis=-1) + 1.0, np.asarray(most) + 1.0)
        return Sizing(servers=first, rates_per_s=rates)


@dataclass(frozen=True)
class Sizing:
    """`Pool.sizing`'s answer: the replicas needed, and the rate at each size tried (1, 2, ...
    along the last axis), each computed exactly as `Pool.max_rate_per_s` at that size."""

    servers: np.ndarray
    rates_per_s: np.ndarray

    def rate_at(self, servers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rate, known): the tried rate at `servers` (one per row) where it was tried."""
        n = self.rates_per_s.shape[-1]
        x = np.asarray(servers, dtype=float)
        known = (x >= 1) & (x <= n) & (x == np.floor(x))
        index = np.where(known, x, 1.0).astype(np.int64) - 1
        rate = np.take_along_axis(self.rates_per_s, index[..., None], axis=-1)[..., 0]
        return rate, known
