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


def _split_p99_written_out(pool, x, rate_per_s, receivers, transfer):
    """`split_ttft_p99_ms` as it read before `SplitNodes` (the reference): every term from the
    nodes again at each call."""
    rate_per_ms = np.asarray(rate_per_s, dtype=float) / 1e3
    c1, theta1 = queueing.wait_tail(rate_per_ms, x, pool.mean_ms, pool.scv)
    c2, theta2 = ingress_queue.transfer_wait_tail(rate_per_ms / receivers, transfer)
    return ingress_queue.p99_with_transfer_wait_ms(c1, theta1, c2, theta2, pool.nodes_ms)


def _short_split_written_out(pool, x, receivers, transfer, most):
    """`short_split_load`'s bisection on the rate, every test from the nodes again."""
    lo, hi = np.zeros(len(x)), most.copy()
    for _ in range(ingress_queue.RATE_BISECTIONS):
        mid = (lo + hi) / 2.0
        ok = _split_p99_written_out(pool, x, mid, receivers, transfer) <= pool.target_ms
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return lo, _split_p99_written_out(pool, x, lo, receivers, transfer)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 20))
def test_rate_free_terms_laid_out_once_give_the_same_bits(seed, rows) -> None:
    """`SplitNodes` (the nodes' quantiles, grid and transfer terms, laid out once for every
    rate `short_split_load` tries and every size `grow_for_transfer_wait` tries) changes no
    bit of either's answer: both against the terms worked out again at each call."""
    from disagg_decider.calc.replicas import prefill

    rng = np.random.default_rng(seed)
    k = queueing.Z_NODES.size
    nodes = np.sort(rng.uniform(50.0, 3000.0, (rows, k)), axis=-1)
    transfer = np.sort(rng.uniform(1.0, 800.0, (rows, k)), axis=-1)
    pool = prefill.Pool(
        rng.uniform(20.0, 400.0, rows), rng.uniform(0.0, 1.5, rows), nodes,
        rng.uniform(500.0, 6000.0, rows),
    )  # fmt: skip
    x, receivers = rng.integers(1, 6, rows).astype(float), rng.integers(1, 9, rows).astype(float)
    most = rng.uniform(0.0, 80.0, rows)
    every = np.ones(rows, dtype=bool)
    rate, ttft = ingress_queue.short_split_load(pool, x, receivers, transfer, most, every)
    at_most = _split_p99_written_out(pool, x, most, receivers, transfer)
    short = ~(at_most <= pool.target_ms * (1.0 + 1e-9)) & (most > 0)
    want_rate, want_ttft = most.copy(), at_most.copy()
    if short.any():
        some = prefill.Pool(*(a[short] for a in (pool.mean_ms, pool.scv, nodes, pool.target_ms)))
        found = _short_split_written_out(
            some, x[short], receivers[short], transfer[short], most[short]
        )
        want_rate[short], want_ttft[short] = found
    assert rate.tobytes() == want_rate.tobytes() and ttft.tobytes() == want_ttft.tobytes()

    rate_per_s = rng.uniform(0.0, 60.0, rows)
    y, d_dp = rng.integers(1, 4, rows).astype(float), rng.integers(1, 3, rows).astype(float)
    sized = rng.random(rows) < 0.8
    got = ingress_queue.grow_for_transfer_wait(
        pool, x, y, 2.0, 4.0, d_dp, rate_per_s, transfer, pool.target_ms, sized
    )
    gx, gy = x.copy(), y.copy()
    p99 = _split_p99_written_out(pool, gx, rate_per_s, gy * d_dp, transfer)
    for _ in range(ingress_queue.ROUNDS):
        miss = sized & ~(p99 <= pool.target_ms * (1.0 + 1e-9))
        if not miss.any():
            break
        more_d = _split_p99_written_out(pool, gx, rate_per_s, (gy + 1.0) * d_dp, transfer)
        more_p = _split_p99_written_out(pool, gx + 1.0, rate_per_s, gy * d_dp, transfer)
        with np.errstate(invalid="ignore"):
            decode_first = ~((p99 - more_p) / 2.0 > (p99 - more_d) / 4.0)
        gy = np.where(miss & decode_first, gy + 1.0, gy)
        gx = np.where(miss & ~decode_first, gx + 1.0, gx)
        p99 = np.where(miss, np.where(decode_first, more_d, more_p), p99)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in (gx, gy, p99)]
