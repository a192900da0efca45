"""Request classes of mixed traffic as log-normal components, and the moments of their mix.

A workload's traffic is one class (its `prompt_tokens`, `output_tokens`, prefix-cache hit rate)
or several (`traffic.classes`, shares summing to 1). Modes that take one length distribution
(colocated, always-disaggregated) take the mix as the log-normal with its mean and second
moment, which keeps what the queues and batches depend on (Pollaczek-Khinchine: the mean and
squared coefficient of variation of service). The conditional layout splits every class at the
routing threshold (`calc/conditional.py`), which needs the partial moments below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Z99 = 2.3263478740408408


@dataclass(frozen=True)
class Component:
    weight: float  # share of requests
    prompt_p50: float
    prompt_sigma: float
    hit_rate: float
    output_p50: float
    output_sigma: float


def sigma_of(p50: float, p99: float) -> float:
    return math.log(p99 / p50) / Z99


def components(workload: Any) -> list[Component]:
    """The workload's (or its traffic's) classes, or its one class, as log-normal components."""
    t = getattr(workload, "traffic", workload)
    classes = getattr(t, "classes", None)
    if not classes:
        return [
            Component(
                1.0,
                t.prompt_tokens.p50,
                sigma_of(t.prompt_tokens.p50, t.prompt_tokens.p99),
                t.prefix_cache_hit_rate,
                t.output_tokens.p50,
                sigma_of(t.output_tokens.p50, t.output_tokens.p99),
            )
        ]
    return [
        Component(
            c.share,
            c.prompt_tokens.p50,
            sigma_of(c.prompt_tokens.p50, c.prompt_tokens.p99),
            c.prefix_cache_hit_rate,
            c.output_tokens.p50,
            sigma_of(c.output_tokens.p50, c.output_tokens.p99),
        )
        for c in classes
    ]


def fit_moments(mean: float, second: float) -> tuple[float, float]:
    """(p50, sigma) of the log-normal with this mean and second moment."""
    var_log = max(math.log(max(second / (mean * mean), 1.0)), 0.0)
    sigma = math.sqrt(var_log)
    return mean / math.exp(var_log / 2.0), sigma


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def partial_moments(p50: float, sigma: float, threshold: float) -> tuple[float, float, float]:
    """P(X <= T), E[X 1{X <= T}], E[X^2 1{X <= T}] for X log-normal (median p50, shape sigma).

    E[X^k 1{X <= T}] = exp(k mu + k^2 s^2 / 2) Phi((ln T - mu - k s^2) / s).
    """
    mu = math.log(p50)
    if threshold <= 0:
        return 0.0, 0.0, 0.0
    if sigma <= 1e-12:
        below = 1.0 if p50 <= threshold else 0.0
        return below, below * p50, below * p50 * p50
    lt = math.log(threshold)
    out = []
    for k in (0, 1, 2):
        out.append(
            math.exp(k * mu + k * k * sigma * sigma / 2) * _phi((lt - mu - k * sigma**2) / sigma)
        )
    return out[0], out[1], out[2]


def mixture_percentiles(
    comps: list[Component],
) -> tuple[tuple[float, float], tuple[float, float], float]:
    """The mix as one class: prompt (p50, p99), output (p50, p99) of the moment-matched
    log-normals, and the token-weighted prefix-cache hit rate."""
    p1 = sum(c.weight * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps)
    p2 = sum(c.weight * c.prompt_p50**2 * math.exp(2 * c.prompt_sigma**2) for c in comps)
    cached = sum(
        c.weight * c.hit_rate * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps
    )
    o1 = sum(c.weight * c.output_p50 * math.exp(c.output_sigma**2 / 2) for c in comps)
    o2 = sum(c.weight * c.output_p50**2 * math.exp(2 * c.output_sigma**2) for c in comps)
    p50, sigma = fit_moments(p1, p2)
    o50, osigma = fit_moments(o1, o2)
    prompt = (p50, p50 * math.exp(Z99 * sigma))
    output = (o50, o50 * math.exp(Z99 * osigma))
    return prompt, output, cached / p1


def batch_context_tokens(workload: Any) -> float:
    """The mean context of a decode batch serving the workload's classes; nan for one class.

    A request holds its seat for its output, so classes with long outputs fill more of the
    batch (Little's law per class): the mean context is output-weighted,
    sum(w o (p + o / 2)) / sum(w o) over class means. With one class it is the calculator's
    convention, prompt + output / 2, and nan says so.
    """
    comps = components(workload)
    if len(comps) == 1:
        return math.nan
    p = [c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps]
    o = [c.output_p50 * math.exp(c.output_sigma**2 / 2) for c in comps]
    seats = [c.weight * oi for c, oi in zip(comps, o, strict=True)]
    return sum(s * (pi + oi / 2) for s, pi, oi in zip(seats, p, o, strict=True)) / sum(seats)
