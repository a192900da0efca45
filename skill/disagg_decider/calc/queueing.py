"""Queueing: how long a request waits for a busy server (physics.md 2.6).

Prompt lengths are log-normal (fitted from p50 and p99), arrivals Poisson, service FCFS: an
M/G/1 queue. Its mean wait is Pollaczek-Khinchine; its p99 uses the exponential tail
P(W > t) ~ rho * exp(-t * rho / E[W]), which is exact for M/M/1 and close for M/G/1.
"""

from __future__ import annotations

import math

import numpy as np

Z99 = 2.3263478740408408
LN100 = math.log(100.0)
RHO_MAX = 0.95  # never plan a server hotter than this

# Gauss-Hermite (probabilists') nodes and weights for E[f(Z)], Z ~ N(0, 1).
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(7)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()


def lognormal_nodes(p50, sigma) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature points and weights of a log-normal length distribution.

    The nodes broadcast along the last axis, which must be of size one in `p50` and `sigma`.
    """
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, _GH_NODES)), _GH_WEIGHTS


def lognormal_mean(p50, sigma):
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, sigma) / 2.0)


def lognormal_p99(p50, sigma):
    return np.asarray(p50, dtype=float) * np.exp(np.multiply(sigma, Z99))


def wait_p99_ms(rate_per_ms, mean_service_ms, second_moment_ms2):
    """p99 of the M/G/1 waiting time; infinite when the server is saturated.

    Mean wait E[W] = lam E[S^2] / (2 (1 - rho)); the tail E[W] / rho ln(100 rho) needs
    E[W] / rho = E[S^2] / (2 E[S] (1 - rho)), which is how it is computed. Below rho = 0.01
    the p99 wait is zero. Only the loads in between are divided, so nothing warns.
    """
    rho = np.asarray(rate_per_ms * mean_service_ms)
    queued = (rho > 0.01) & (rho < 1.0)
    shape = np.broadcast(rho, second_moment_ms2).shape
    tail = np.divide(
        second_moment_ms2,
        (2.0 * mean_service_ms) * (1.0 - rho),
        out=np.zeros(shape),
        where=queued,
    )
    tail *= np.log(np.maximum(rho, 0.01) * 100.0)
    return np.where(rho >= 1.0, np.inf, tail)


def max_rate_per_ms(budget_ms, mean_service_ms, second_moment_ms2):
    """Largest arrival rate whose p99 wait stays within `budget_ms`.

    Solving wait_p99 <= budget with ln(100 rho) bounded by ln(100) gives a closed form that is
    slightly conservative: rho <= 1 - E[S^2] ln(100) / (2 E[S] budget).
    """
    budget = np.asarray(budget_ms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - second_moment_ms2 * LN100 / (2.0 * mean_service_ms * budget)
    rho = np.clip(np.where(budget > 0, rho, 0.0), 0.0, RHO_MAX)
    return rho / mean_service_ms
