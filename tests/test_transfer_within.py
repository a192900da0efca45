"""Issue 27 (fifth round): a short split's load is bisected on its own rows, and each load's
test "does the p99 TTFT with both waits fit the target" stops its bisection on the time once
the answer is known (`ingress_queue.p99_with_transfer_wait_within`): the same answer as the
whole bisection, on any inputs, saturated queues included; the verdicts it feeds are the
golden ones (`tests/test_golden_outputs.py`).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas import ingress_queue


def _case(seed: int, rows: int):
    rng = np.random.default_rng(seed)
    k = queueing.Z_NODES.size
    nodes = np.sort(rng.uniform(50.0, 3000.0, (rows, k)), axis=-1)
    transfer = np.sort(rng.uniform(1.0, 500.0, (rows, k)), axis=-1)
    c1, theta1 = queueing.wait_tail(
        rng.uniform(0.0, 0.02, rows), rng.integers(1, 6, rows), rng.uniform(20.0, 400.0, rows), 0.5
    )
    c2, theta2 = ingress_queue.transfer_wait_tail(rng.uniform(0.0, 0.004, rows), transfer)
    return c1, theta1, c2, theta2, nodes


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 30), scale=st.floats(0.3, 3.0))
def test_the_early_stopped_test_answers_as_the_whole_bisection(seed, rows, scale) -> None:
    terms = _case(seed, rows)
    p99 = ingress_queue.p99_with_transfer_wait_ms(*terms)
    finite = np.where(np.isfinite(p99), p99, 1000.0)
    # Limits around each row's p99 (on it, just either side, far either side) and at random.
    rng = np.random.default_rng(seed)
    for limit in (
        finite,
        finite * (1 + 1e-12),
        finite * (1 - 1e-12),
        finite * scale,
        rng.uniform(0.0, 8000.0, rows),
    ):
        got = ingress_queue.p99_with_transfer_wait_within(*terms, limit)
        np.testing.assert_array_equal(got, p99 <= limit)


def test_saturated_rows_never_fit() -> None:
    c1, theta1, c2, theta2, nodes = _case(3, 4)
    p99 = ingress_queue.p99_with_transfer_wait_ms(c1, theta1, c2, theta2, nodes)
    assert np.isinf(p99[[0, 3]]).all() and np.isfinite(p99[[1, 2]]).all()  # two saturated
    got = ingress_queue.p99_with_transfer_wait_within(c1, theta1, c2, theta2, nodes, 1e12)
    np.testing.assert_array_equal(got, [False, True, True, False])
