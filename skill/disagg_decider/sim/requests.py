"""The requests one simulation serves: arrival time, prompt, output and cached prefix tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.sim import arrivals, lengths
from disagg_decider.sim.trace_fields import Trace


@dataclass(frozen=True)
class Requests:
    arrival_ms: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cached: np.ndarray

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])

    @property
    def uncached(self) -> np.ndarray:
        return self.prompt - self.cached


def synthetic(
    lengths_fit: Lengths,
    count: int,
    rate_per_s: float,
    seed: int,
    max_context_tokens: int,
    cv: float = 1.0,
) -> Requests:
    """`count` requests at `rate_per_s`; separate streams for gaps and lengths, so changing the
    rate or the burstiness moves arrivals but keeps every request's lengths."""
    gap_stream, length_stream = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2)
    )
    gaps = arrivals.unit_gaps(count, gap_stream, cv)
    prompt, output, cached = lengths.sample(lengths_fit, count, length_stream, max_context_tokens)
    return Requests(arrivals.arrival_times_ms(gaps, rate_per_s), prompt, output, cached)


def from_trace(trace: Trace, max_context_tokens: int, count: int | None = None) -> Requests:
    """The first `count` requests of a trace, lengths clipped to the model's context window."""
    n = len(trace) if count is None else min(count, len(trace))
    prompt, output, _ = lengths.clip_to_context(
        trace.prompt[:n], trace.output[:n], 0.0, max_context_tokens
    )
    cached = np.minimum(trace.cached[:n], prompt - 1)
    return Requests(trace.arrival_ms[:n].astype(float), prompt, output, cached)


def scaled(requests: Requests, rate_per_s: float) -> Requests:
    """The same requests with arrival times stretched to a new mean rate."""
    n = len(requests)
    span = float(requests.arrival_ms[-1]) if n > 1 else 0.0
    if span <= 0:
        return requests
    factor = (n - 1) / span * 1e3 / rate_per_s
    return Requests(requests.arrival_ms * factor, requests.prompt, requests.output, requests.cached)
