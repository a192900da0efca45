"""Goodput: the highest request rate at which enough requests meet both SLOs (DistServe's
definition), found by bisection over the rate with the simulator in the loop.

The same requests are replayed at every rate, their arrival gaps stretched (common random
numbers), so attainment falls almost monotonically with the rate and the bisection converges.
"""

from __future__ import annotations

from collections.abc import Callable

from disagg_decider.errors import UserError
from disagg_decider.sim.requests import Requests, scaled


class GoodputNotBracketed(UserError):
    """The bisection found no rate that fails the target (or none that meets it)."""


def max_rate(
    attainment_at: Callable[[float], float],
    target: float,
    start_rate: float,
    relative_tolerance: float = 0.02,
    max_doublings: int = 20,
) -> float:
    """Largest rate with `attainment_at(rate) >= target`, to within the relative tolerance.

    Starts from `start_rate`, halves or doubles until the target is bracketed, then bisects.
    Raises `GoodputNotBracketed` when no rate within `max_doublings` doublings misses the
    target (a ceiling is not a measurement) and returns 0 when even a very low rate misses it.
    """
    lo, hi = 0.0, max(start_rate, 1e-6)
    if attainment_at(hi) >= target:
        lo = hi
        for _ in range(max_doublings):
            hi = lo * 2.0
            if attainment_at(hi) < target:
                break
            lo = hi
        else:
            raise GoodputNotBracketed(
                f"goodput search: {lo:g} req/s still meets the {target:.0%} target after "
                f"{max_doublings} doublings from {start_rate:g} req/s; no failing rate bracketed "
                "(too few requests to load the pools?)"
            )
    else:
        for _ in range(max_doublings):
            hi_next = hi / 2.0
            if attainment_at(hi_next) >= target:
                lo = hi_next
                break
            hi = hi_next
        else:
            return 0.0
    while hi - lo > relative_tolerance * lo:
        mid = (lo + hi) / 2.0
        if attainment_at(mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def replay_at(requests: Requests, rate_per_s: float) -> Requests:
    """The same requests arriving at `rate_per_s` on average."""
    return scaled(requests, rate_per_s)
