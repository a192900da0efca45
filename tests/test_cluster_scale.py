"""Issue 27: a decision's cost does not grow with the cluster.

The search prices layout shapes; replica counts come from brackets narrowed pass by pass
(`calc/layouts/split_grid.py`), from a split that carries the rate
(`calc/modes/conditional_sizing.py`) and from Erlang C computed where asked for pools past its table
(`calc/queues/erlang.py`). Before, the RAG example took 8.9 CPU-s on 256 GPUs and 63.8 on 1,024, and
100,000 GPUs were refused by a budget of 256 replicas per pool. CPU time (`time.process_time`),
never the wall clock; the least of several interleaved runs, since the machine is shared. Figures:
`benchmarks/cluster_scale.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from disagg_decider.calc.layouts import split_grid
from disagg_decider.calc.queues import erlang, queueing
from disagg_decider.decide import decide
from disagg_decider.workload import Workload
from tests.conftest import edited_example

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import cluster_scale

ROUNDS = 5
# The bounds are 3x and 5x, which `benchmarks/cluster_scale.py` checks and the README
# reports (2.45x and 3.67x on 2026-12-02). Inside a long test process on a loaded machine the
# same ratios read higher (CI on 2026-12-02: 14.0, 42.6 and 55.1 ms, 3.04x and 3.93x), so the
# test's bounds are generous, as the issue asks: a search that grew with the cluster again would
# read hundreds of times more (8.9 CPU-s on 256 GPUs before issue 27).
GENEROUS_1024, GENEROUS_100000 = 4.0, 6.5


def _rag(gpus: int, rate_per_s: float = 3.0) -> Workload:
    data = edited_example(**{"cluster.gpus": gpus, "traffic.requests_per_second": rate_per_s})
    return Workload.model_validate(data)


def test_rag_on_1024_and_100000_gpus_costs_about_what_16_do():
    # The least CPU time of `decide` per size over interleaved rounds after a warm-up (imports
    # and the Erlang table are paid once per process), as the benchmark measures it.
    cpu = cluster_scale.least_cpu_ms([16, 1024, 100_000], ROUNDS)
    assert cpu[1024] <= GENEROUS_1024 * cpu[16], cpu
    assert cpu[100_000] <= GENEROUS_100000 * cpu[16], cpu


def test_the_decision_on_100000_gpus_sizes_pools_for_the_rate():
    small, large = decide(_rag(16)), decide(_rag(100_000))
    busier = decide(_rag(100_000, rate_per_s=30.0))
    assert large.decision == small.decision
    assert large.sizing.cluster_gpus == 100_000
    # The colocated pool the rate needs (48 GPUs, more than 16 hold) is the same on any
    # cluster that holds it.
    assert large.sizing.colocated_gpus == decide(_rag(1024)).sizing.colocated_gpus == 48
    split = large.sizing.prefill_gpus + large.sizing.decode_gpus
    assert split <= 2 * (small.sizing.prefill_gpus + small.sizing.decode_gpus)
    # Ten times the rate takes several times the GPUs, and a sliver of the cluster.
    busier_split = busier.sizing.prefill_gpus + busier.sizing.decode_gpus
    assert 4 * split <= busier_split <= 1_000, (split, busier_split)
    assert 4 * large.sizing.colocated_gpus <= busier.sizing.colocated_gpus <= 2_000


# --- Erlang C past the table -------------------------------------------------------------------


@pytest.mark.parametrize("servers", [65, 100, 257, 1000])
def test_the_integral_matches_the_exact_sum_on_the_whole_load_grid(servers):
    rho = np.linspace(0.0, 1.0, erlang.RHO_STEPS + 1)
    exact = erlang.erlang_c_exact(servers, servers * rho)
    got = erlang.erlang_c_integral(np.full(rho.size, float(servers)), rho)
    assert np.max(np.abs(got - exact)) < 1e-11


def test_the_integral_matches_the_exact_sum_on_a_huge_pool_near_saturation():
    servers, rho = 20_000, np.linspace(0.95, 1.0, 101)
    exact = erlang.erlang_c_exact(servers, servers * rho)
    got = erlang.erlang_c_integral(np.full(rho.size, float(servers)), rho)
    assert np.max(np.abs(got - exact)) < 1e-11
    assert 0.01 < got[90] < 0.99  # the steep part is inside the range checked


def test_a_pool_past_the_table_reads_as_a_table_row_would(monkeypatch):
    c = np.array([65.0, 90.0, 120.0, 65.0])
    a = np.array([40.0, 85.5, 119.0, 64.9])
    computed = queueing.erlang_c(c, a)
    monkeypatch.setattr(erlang, "TABLE_ROWS", 128)  # now the same pools read the table
    tabled = queueing.erlang_c(c, a)
    np.testing.assert_allclose(computed, tabled, rtol=1e-9, atol=1e-12)


def test_the_load_bisection_agrees_past_the_table(monkeypatch):
    from disagg_decider.calc.queues import load_bisection

    args = (
        np.array([[70.0], [100.0], [200.0], [3.0]]),  # servers (one small: both paths in a call)
        np.array([[50.0]]),  # mean service ms
        0.5,
        np.linspace(60.0, 400.0, 25)[None, :],  # S' at the z nodes
        np.array([[900.0]]),
    )
    computed = load_bisection.max_rate_per_ms(*args)
    few = load_bisection.max_rate_per_ms(args[0][:1], *args[1:])
    monkeypatch.setattr(erlang, "TABLE_ROWS", 256)
    monkeypatch.setattr(load_bisection, "TABLE_ROWS", 256)
    tabled = load_bisection.max_rate_per_ms(*args)
    np.testing.assert_allclose(computed, tabled, rtol=1e-9)
    np.testing.assert_allclose(few, tabled[:1], rtol=1e-9)  # `_FewEntries`' path too


# --- brackets of splits ------------------------------------------------------------------------


def _goodput(x: np.ndarray, budget: float, p_tp: int, d_tp: int, shape: float) -> np.ndarray:
    """A unimodal split goodput: a pooled prefill rate growing faster than its size, against
    decode capacity on the replicas left."""
    prefill = x * (1.0 + shape * np.log1p(x))
    return np.minimum(prefill, split_grid.decode_left(budget, x, p_tp, d_tp) * 7.0)


@pytest.mark.parametrize("budget", [16, 300, 5_000, 100_000])
@pytest.mark.parametrize(("p_tp", "d_tp"), [(1, 1), (2, 8), (4, 4)])
def test_narrowed_brackets_find_the_first_best_split_trying_every_split_finds(budget, p_tp, d_tp):
    shapes = np.array([0.0, 0.3, 2.0])[:, None]
    x, used = split_grid.first_grid(budget, p_tp, d_tp, shapes.shape[0])
    passes, priced = 0, 0
    while True:
        passes += 1
        priced = max(priced, x.shape[1])
        total = np.where(used, _goodput(x, budget, p_tp, d_tp, shapes), -1.0)
        x_next, used_next, settled = split_grid.refine(x, used, total)
        if settled:
            break
        x, used = x_next, used_next
    every = np.arange(1.0, split_grid.most_prefill(budget, p_tp, d_tp) + 1.0)
    full = _goodput(every[None, :], budget, p_tp, d_tp, shapes)
    for t in range(shapes.shape[0]):
        k = int(total[t].argmax())
        assert x[t, k] == every[full[t].argmax()]
        assert total[t, k] == full[t].max()
    assert priced <= split_grid.GRID_SIZES
    assert passes <= 6


# --- the bracketed paths on small clusters give what every count gives -----------------------
# Forcing a small cluster through the paths a large one takes (brackets of a few sizes, the ray
# bound, the bisected count) must leave its verdict's meaning unchanged.


def _verdict(workload: Workload) -> dict:
    return decide(workload).model_dump(mode="json")


def _same_meaning(expected: dict, got: dict) -> None:
    from tests.meaning import differences

    assert differences(expected, got) == []


@pytest.mark.parametrize(
    ("example", "gpus"),
    [("rag-8k-h200-rdma-dynamo.yaml", 64), ("mixed-chat-rag-llm-d.yaml", 48)],
)
def test_brackets_of_four_sizes_find_the_splits_every_size_finds(monkeypatch, example, gpus):
    from tests.conftest import ROOT

    data = edited_example(ROOT / "examples" / example, **{"cluster.gpus": gpus})
    expected = _verdict(Workload.model_validate(data))
    monkeypatch.setattr(split_grid, "GRID_SIZES", 4)
    monkeypatch.setattr(split_grid, "BRACKET_SIZES", 4)
    _same_meaning(expected, _verdict(Workload.model_validate(data)))


def test_the_heterogeneous_cross_split_in_brackets_matches_every_count(monkeypatch):
    from tests.conftest import ROOT

    data = edited_example(ROOT / "examples" / "b200-prefill-h200-decode-dynamo.yaml")
    expected = _verdict(Workload.model_validate(data))
    monkeypatch.setattr(split_grid, "GRID_SIZES", 2)
    monkeypatch.setattr(split_grid, "BRACKET_SIZES", 4)
    _same_meaning(expected, _verdict(Workload.model_validate(data)))


def test_the_ray_bound_sizes_the_conditional_layout_as_every_split_does(monkeypatch):
    from disagg_decider.calc.modes import conditional_sizing

    w = _rag(64, rate_per_s=5.0)
    expected = _verdict(w)
    monkeypatch.setattr(conditional_sizing, "FULL_GRID", 0)
    _same_meaning(expected, _verdict(w))


def test_a_bisected_pool_count_is_the_first_that_carries_the_rate(monkeypatch):
    from disagg_decider.calc.layouts import pool_rates

    w = _rag(64, rate_per_s=40.0)  # pools beyond the cluster: sized up to 64 replicas
    expected = _verdict(w)
    monkeypatch.setattr(pool_rates, "BISECT_ABOVE", 0)
    _same_meaning(expected, _verdict(w))
