"""KV transfers queue for a decode replica's NICs: the split's p99 TTFT and sizing price it.

`calc/replicas/ingress_queue.py`. Transfers into one decode receiver share its min(prefill TP,
decode TP) NICs (the simulator's `_Link`). Before this the calculator capped that link at 90% load
but priced no wait, so splits over a 25 Gb/s TCP link missed their TTFT target at the rate they
were sized for: rag-8k-low-maturity-51 of `workload_mix(400, 17)`, prefill TP1 x 3 + decode
TP4 x 1, was priced at p99 TTFT 1,082 ms and simulated at 2,220-2,360 ms (85% of requests
within the targets); chat-short-328 (TP1 x 3 + TP1 x 5) at 92-96%.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas import ingress_queue
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.workload import resolve
from tests.conftest import ROOT


def _mix_entry(index: int):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workload_mix import workload_mix

    return workload_mix(400, 17)[index]


@pytest.mark.parametrize("index", [51, 328])
def test_tcp_split_sized_for_the_rate_meets_its_targets_in_the_simulator(index: int) -> None:
    w = _mix_entry(index)
    assert w.cluster.network == "tcp-25"
    r, v = resolve(w), decide(w)
    d = v.disaggregated
    assert d.fits_cluster and d.ttft_p99_ms <= w.slo.ttft_ms
    requests = run.synthetic_requests(r, 3000, seed=1)
    outcome = run.simulate_mode(run.setup(r, v), "disaggregated", requests)
    within, _ = metrics.attainment(outcome, requests, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)
    assert within >= 0.99, (index, d.prefill_layout, d.decode_layout, within)


def test_no_transfer_wait_is_the_prefill_pools_p99() -> None:
    """With an idle link the sum is `queueing.p99_of_sum_ms`'s (one wait and S')."""
    rng = np.random.default_rng(5)
    nodes = np.sort(rng.uniform(100.0, 900.0, (6, 25)), axis=-1)
    c1, theta1 = queueing.wait_tail(np.full(6, 0.002), 2.0, 300.0, 0.3)
    alone = queueing.p99_of_sum_ms(0.002, 2.0, 300.0, 0.3, nodes)
    both = ingress_queue.p99_with_transfer_wait_ms(c1, theta1, 0.0, np.ones((6, 25)), nodes)
    np.testing.assert_allclose(both, alone, rtol=1e-4)
    busy = ingress_queue.p99_with_transfer_wait_ms(c1, theta1, 0.3, theta1[:, None], nodes)
    assert (busy > alone + 50.0).all()


def test_one_transfer_size_waits_as_m_d_1() -> None:
    """On one transfer size the wait is M/D/1's: P(W > 0) = rho, its mean x / 2 / (1 - rho)."""
    nodes = np.full((1, 25), 430.0)
    c2, theta2 = ingress_queue.transfer_wait_tail(np.array([0.32 / 430.0]), nodes)
    assert c2[0] == pytest.approx(0.32)
    assert 1.0 / theta2[0, 0] == pytest.approx(430.0 / 2.0 / 0.68)


def test_the_receivers_rate_keeps_the_links_wait_inside_the_target() -> None:
    """The search's cap: the largest load whose W2 + S' p99 fits, and 0 where S' cannot."""
    t_nodes = np.full((2, 25), 400.0)
    s = np.full((2, 25), 1000.0)
    rate = ingress_queue.receiver_rate_per_s(t_nodes, s, np.array([1500.0, 900.0]))
    assert rate[1] == 0.0
    rho = rate[0] / 1e3 * 400.0
    assert 0.0 < rho < 0.9
    c2, theta2 = ingress_queue.transfer_wait_tail(np.array([rate[0] / 1e3]), t_nodes[:1])
    # P(W2 > 500 ms) is the 1% the target leaves.
    assert c2[0] * np.exp(-theta2[0, 0] * 500.0) == pytest.approx(0.01, rel=1e-3)


def _two_waits_written_out(c1, theta1, c2, theta2, gap_ms):
    """The tail of W1 + W2 as `two_waits_exceed` read it before `TwoWaits` (the reference)."""
    g = np.asarray(gap_ms, dtype=float)
    t1, t2 = np.asarray(theta1, dtype=float), np.asarray(theta2, dtype=float)
    e1, e2 = np.exp(-t1 * g), np.exp(-t2 * g)
    diff = t2 - t1
    close = np.abs(diff) <= 1e-6 * np.maximum(t1, t2)
    with np.errstate(divide="ignore", invalid="ignore"):
        both = np.where(
            close, (1.0 + t1 * g) * e1, (t2 * e1 - t1 * e2) / np.where(close, 1.0, diff)
        )
    return c1 * (1.0 - c2) * e1 + c2 * (1.0 - c1) * e2 + c1 * c2 * both


def test_two_waits_read_at_many_gaps_give_the_written_out_bits() -> None:
    """`TwoWaits` works out what does not depend on the gap once; each reading must be the
    formula's, bit for bit: close and equal rates, no wait, certain waits, zero gaps."""
    rng = np.random.default_rng(27)
    n, k = 300, 25
    c1 = rng.choice([0.0, 1.0, 0.3], n)[:, None] * rng.uniform(0.2, 1.0, (n, 1))
    c2 = rng.uniform(0.0, 1.0, (n, 1))
    t1 = rng.uniform(1e-4, 0.5, (n, 1))
    t2 = t1 * rng.choice([1.0, 1.0 + 1e-8, 1.3, 0.2], (n, 1)) * rng.uniform(0.5, 2.0, (n, k))
    t2[: n // 4] = t1[: n // 4]  # equal rates at every node
    waits = ingress_queue.TwoWaits(c1, t1, c2, t2)
    for scale in (0.0, 1.0, 30.0, 400.0):
        gap = np.maximum(rng.uniform(-5.0, 1.0, (n, k)) * scale, 0.0)
        got = waits.exceed(gap)
        expected = _two_waits_written_out(c1, t1, c2, t2, gap)
        assert got.tobytes() == expected.tobytes()
        assert ingress_queue.two_waits_exceed(c1, t1, c2, t2, gap).tobytes() == got.tobytes()
    # Rows where no rates agree: `exceed_quiet` then skips the selection, the same bits.
    apart = ~waits.close.any(axis=-1)
    assert waits.any_close and 0 < apart.sum() < n
    alone = ingress_queue.TwoWaits(c1[apart], t1[apart], c2[apart], t2[apart])
    assert not alone.any_close
    for scale in (0.0, 1.0, 30.0, 400.0):
        gap = np.maximum(rng.uniform(-5.0, 1.0, (int(apart.sum()), k)) * scale, 0.0)
        expected = _two_waits_written_out(c1[apart], t1[apart], c2[apart], t2[apart], gap)
        assert alone.exceed(gap).tobytes() == expected.tobytes()


def test_broadcast_shape_is_numpys():
    """`array_helpers.broadcast_shape` answers the common cases without numpy's arrays; every
    case, incompatible shapes included, must be `np.broadcast_shapes`'."""
    import itertools

    from disagg_decider.calc.queues.array_helpers import broadcast_shape

    shapes = [(), (1,), (3,), (2, 3), (1, 3), (2, 1), (4, 2, 3), (0,), (3, 0)]
    for k in (0, 1, 2, 3):
        for case in itertools.product(shapes, repeat=k):
            try:
                expected = np.broadcast_shapes(*case)
            except ValueError:
                with pytest.raises(ValueError):
                    broadcast_shape(*case)
                continue
            assert broadcast_shape(*case) == expected, case


def test_the_receivers_rate_on_the_needed_entries_only_is_the_whole_calls() -> None:
    """`needed` prices the entries a caller reads, each from its own nodes: the bits the
    whole call gives them (the load bisected on some, capped at 90% on others, 0 where S'
    alone misses, inf with no transfer), inf on the others. The search's arrays broadcast:
    transfers per (row, prefill layout), S' and targets per (row, layout pair)."""
    rng = np.random.default_rng(27)
    z = np.linspace(-4.0, 4.5, 25)
    rows, tp_p, tp_d = 9, 4, 3
    t_nodes = rng.uniform(2.0, 500.0, (rows, tp_p, 1, 1)) * np.exp(0.6 * z)
    t_nodes[0] = 0.0  # no KV to move (a mean of 0): no cap
    s = rng.uniform(100.0, 1500.0, (rows, tp_p, tp_d, 1)) * np.exp(0.4 * z)
    target = rng.uniform(800.0, 4000.0, (rows, 1, 1))
    needed = rng.random((rows, tp_p, tp_d)) < 0.4
    whole = ingress_queue.receiver_rate_per_s(t_nodes, s, target)
    some = ingress_queue.receiver_rate_per_s(t_nodes, s, target, needed=needed)
    assert some.shape == whole.shape
    assert some[needed].tobytes() == whole[needed].tobytes()
    assert np.isposinf(some[~needed]).all()
    # Every kind of entry is among the needed ones: bisected, at 90%, 0 and uncapped.
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_ms, _ = ingress_queue.transfer_scale_ms(np.broadcast_to(t_nodes, s.shape))
        rho = whole * mean_ms / 1e3
    kinds = [whole == 0, np.isposinf(whole), np.isclose(rho, 0.9), (rho > 0) & (rho < 0.89)]
    assert all((kind & needed).any() for kind in kinds)
