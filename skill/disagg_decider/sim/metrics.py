"""From per-request first/last token times to what an operator compares.

TTFT is first token minus arrival; TPOT is the mean gap between a request's later tokens,
(last - first) / (output - 1), DistServe's definition (one-token requests have none and
count as meeting it). A request meets the SLO when both hold; attainment is the share that
does. Goodput per GPU is the rate of SLO-meeting requests per GPU of the mode's pools, over
the span from the first arrival to the last token. Costs charge every GPU of the pools for that
span, per request and per million (prompt + output) tokens, as the calculator's costs do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from disagg_decider.sim.outcome import Outcome
from disagg_decider.sim.requests import Requests


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p90: float
    p99: float
    mean: float


@dataclass(frozen=True)
class ModeMetrics:
    mode: str
    layout: str
    gpus: int
    requests: int
    duration_s: float
    throughput_requests_per_s: float
    throughput_tokens_per_s: float  # prompt + output tokens
    output_tokens_per_s: float
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    slo_attainment: float
    goodput_per_gpu: float  # SLO-meeting requests per second per GPU
    cost_per_request_usd: float
    cost_per_million_tokens_usd: float

    def as_dict(self) -> dict:
        return asdict(self)


def ttft_ms(outcome: Outcome, requests: Requests) -> np.ndarray:
    return outcome.first_token_ms - requests.arrival_ms


def tpot_ms(outcome: Outcome, requests: Requests) -> np.ndarray:
    """Per-request TPOT; 0 for one-token requests (they have no second token to wait for)."""
    gaps = np.maximum(requests.output - 1, 1)
    return np.where(requests.output > 1, (outcome.done_ms - outcome.first_token_ms) / gaps, 0.0)


WARMUP_SHARE = 0.2  # of arrivals, excluded from steady-state attainment
DRAIN_SHARE = 0.1


def steady_window(n: int) -> slice:
    """The requests that arrive in steady state: after the first 20% of arrivals (the pools
    fill up from empty) and before the last 10% (the pools drain, nothing queues behind)."""
    return slice(
        int(n * WARMUP_SHARE), max(int(n * (1.0 - DRAIN_SHARE)), int(n * WARMUP_SHARE) + 1)
    )


def attainment(
    outcome: Outcome,
    requests: Requests,
    ttft_slo_ms: float,
    tpot_slo_ms: float,
    steady: bool = False,
):
    """Share and count of requests meeting both SLOs; `steady` counts only `steady_window`."""
    met = (ttft_ms(outcome, requests) <= ttft_slo_ms) & (tpot_ms(outcome, requests) <= tpot_slo_ms)
    if steady:
        met = met[steady_window(len(met))]
    return float(met.mean()), int(met.sum())


def summarize(
    outcome: Outcome,
    requests: Requests,
    ttft_slo_ms: float,
    tpot_slo_ms: float,
    usd_per_gpu_hour: float,
) -> ModeMetrics:
    n = len(requests)
    span_s = max(float(outcome.done_ms.max() - requests.arrival_ms.min()) / 1e3, 1e-9)
    share, met = attainment(outcome, requests, ttft_slo_ms, tpot_slo_ms)
    tokens = float((requests.prompt + requests.output).sum())
    usd = outcome.gpus * usd_per_gpu_hour * span_s / 3600.0
    multi = requests.output > 1
    tpot = tpot_ms(outcome, requests)[multi] if multi.any() else np.zeros(1)
    return ModeMetrics(
        mode=outcome.mode,
        layout=outcome.layout,
        gpus=outcome.gpus,
        requests=n,
        duration_s=span_s,
        throughput_requests_per_s=n / span_s,
        throughput_tokens_per_s=tokens / span_s,
        output_tokens_per_s=float(requests.output.sum()) / span_s,
        ttft_ms=_percentiles(ttft_ms(outcome, requests)),
        tpot_ms=_percentiles(tpot),
        slo_attainment=share,
        goodput_per_gpu=met / span_s / outcome.gpus,
        cost_per_request_usd=usd / n,
        cost_per_million_tokens_usd=usd / tokens * 1e6,
    )


def _percentiles(x: np.ndarray) -> Percentiles:
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return Percentiles(float(p50), float(p90), float(p99), float(x.mean()))
