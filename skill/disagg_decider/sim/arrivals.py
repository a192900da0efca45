"""Arrival times: Poisson, bursty (gamma inter-arrivals with a chosen coefficient of variation).

Gaps are drawn for a unit rate and divided by the rate, so the same seed at two rates gives the
same arrival pattern stretched in time: a goodput search over rate then compares like with like
(common random numbers) and attainment falls smoothly as the rate rises.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.errors import UserError


def unit_gaps(count: int, rng: np.random.Generator, cv: float = 1.0) -> np.ndarray:
    """Inter-arrival gaps with mean 1. cv = 1 is Poisson; cv > 1 is burstier (gamma shape 1/cv^2).

    The Azure 2023 conversation trace has cv 1.09 and the code trace 13.2 (physics.md 5.1).
    """
    if cv <= 0:
        raise UserError(f"--cv {cv:g}: the coefficient of variation must be > 0 (1 is Poisson)")
    if cv == 1.0:
        return rng.exponential(1.0, count)
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / shape, count)


def arrival_times_ms(gaps: np.ndarray, rate_per_s: float) -> np.ndarray:
    """Arrival times in ms for unit-mean gaps at `rate_per_s`; the first request arrives at 0."""
    if rate_per_s <= 0:
        raise UserError(f"rate {rate_per_s:g} req/s: must be > 0")
    times = np.cumsum(gaps) * (1e3 / rate_per_s)
    return times - times[0]
