"""`p99_check.p99_of_sum_within` gives exactly `within(p99_of_sum_ms(...))`: rows leave the
bisection early only when the answer is already decided."""

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.p99_check import p99_of_sum_within


def _case(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    servers = rng.integers(1, 9, n).astype(float)
    mean_ms = rng.uniform(5.0, 200.0, n)
    rho = rng.uniform(0.05, 1.1, n)  # some saturated: p99 infinite
    rate = rho * servers / mean_ms
    scv = rng.uniform(0.0, 3.0, n)
    base = rng.uniform(10.0, 500.0, n)[:, None]
    nodes = base * np.exp(rng.uniform(0.1, 1.0, n)[:, None] * queueing.Z_NODES)
    return rate, servers, mean_ms, scv, nodes


def test_same_answer_as_solving_the_p99_then_testing_it():
    for seed in range(4):
        args = _case(seed)
        p99 = queueing.p99_of_sum_ms(*args).ravel()
        finite = p99[np.isfinite(p99)]
        rng = np.random.default_rng(100 + seed)
        # Limits around the answers, some exactly on them (the edge case an early exit must get
        # right), plus a monotone transform like the idle interpolation.
        limit = np.where(np.isfinite(p99), p99, finite.mean()) * rng.choice(
            [0.5, 0.999999, 1.0, 1.000001, 2.0], p99.size
        )
        scale = rng.uniform(0.0, 1.0, p99.size)

        def within(x, rows, scale=scale, limit=limit):
            return 3.0 + scale[rows] * (x - 3.0) <= limit[rows]

        expected = within(p99, np.arange(p99.size))
        got = p99_of_sum_within(*args, within)
        assert got.dtype == bool
        assert np.array_equal(got, expected)
        assert 0 < expected.sum() < expected.size  # both outcomes exercised
