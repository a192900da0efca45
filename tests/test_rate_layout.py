"""The colocated pools a verdict presents: the fewest GPUs that carry the rate.

`calc/layouts/rate_layout.py`. The best layout per GPU on the whole cluster is what the modes are
compared on; at a team's own rate another layout may carry it on fewer GPUs. Before this, an
8B chat service at 10 req/s on 8 H100s was told one TP4 replica (4 GPUs) where one TP1 replica
(1 GPU) meets both targets.
"""

from __future__ import annotations

import sys
from unittest import mock

import pytest

from disagg_decider.calc.compare import analyze
from disagg_decider.calc.layouts import rate_layout
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.workload import Workload, resolve
from tests.conftest import ROOT, edited_example

CHAT = ROOT / "examples" / "chat-short-colocate.yaml"
SMALL_CHAT = {  # the seeded mix's chat-short-32 at 5 req/s and TPOT 8 ms (was 10 and 21 ms: on
    # the fitted physics one TP1 replica is then also the best layout per GPU)
    "traffic.requests_per_second": 5,
    "traffic.prompt_tokens": {"p50": 800, "p99": 1600},
    "traffic.output_tokens": {"p50": 75, "p99": 75},
    "slo.ttft_ms": 500,
    "slo.tpot_ms": 8,
}


def _best_per_gpu(w: Workload):
    """The analysis as it was: the best layouts per GPU presented at the rate."""
    with (
        mock.patch.object(rate_layout, "fewest_gpus_layout", lambda *args: None),
        mock.patch.object(rate_layout, "fewest_gpus_pair", lambda *args: None),
    ):
        return analyze(resolve(w))


def test_the_fewest_gpus_that_carry_the_rate() -> None:
    w = Workload.model_validate(edited_example(CHAT, **SMALL_CHAT))
    best = _best_per_gpu(w).colocated
    c = decide(w).colocated
    assert (best.layout, best.replicas, best.gpus) == ("TP2", 1, 2)
    assert (c.layout, c.replicas, c.gpus) == ("TP1", 1, 1) and c.fits_cluster
    assert c.ttft_p99_ms <= 500 and c.tpot_p99_ms <= 8
    # The goodput stays the best layout's on the whole cluster (what the gain compares).
    assert (c.max_rate_per_s, c.goodput_per_gpu) == (best.max_rate_per_s, best.goodput_per_gpu)
    assert c.cost_per_year_usd == pytest.approx(best.cost_per_year_usd / 2)


def test_never_more_gpus_and_the_same_goodput_over_a_mix() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workload_mix import workload_mix

    fewer = 0
    for w in workload_mix(40, seed=3):
        best, c = _best_per_gpu(w).colocated, analyze(resolve(w)).colocated
        assert (c.max_rate_per_s, c.goodput_per_gpu) == (best.max_rate_per_s, best.goodput_per_gpu)
        assert c.gpus <= best.gpus, (w.name, c.gpus, best.gpus)
        if c.gpus < best.gpus:
            fewer += 1
            assert c.fits_cluster and c.gpus == c.gpus_needed_for_rate
            assert c.ttft_p99_ms <= w.slo.ttft_ms * 1.001 and c.tpot_p99_ms <= w.slo.tpot_ms * 1.001
        else:
            assert c == best
        split, best_split = analyze(resolve(w)).disaggregated, _best_per_gpu(w).disaggregated
        assert split.gpus <= best_split.gpus and split.goodput_per_gpu == best_split.goodput_per_gpu
    assert fewer >= 3, fewer


def test_the_smaller_pool_meets_the_targets_in_the_simulator() -> None:
    w = Workload.model_validate(edited_example(CHAT, **SMALL_CHAT))
    r, v = resolve(w), decide(w)
    requests = run.synthetic_requests(r, 4000, seed=11)
    outcome = run.simulate_mode(run.setup(r, v), "colocated", requests)
    attained = metrics.attainment(outcome, requests, 500, 8, steady=True)[0]
    assert v.sizing.colocated_gpus == 1 and attained >= 0.99, attained


RAG = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"
LOW_RATE_RAG = {  # the seeded mix's rag-8k-h200-380
    "traffic.requests_per_second": 0.75,
    "traffic.prompt_tokens": {"p50": 8192, "p99": 8192},
    "traffic.output_tokens": {"p50": 600, "p99": 1800},
    "traffic.prefix_cache_hit_rate": 0.0,
    "cluster.network": "efa",
}


def test_the_split_takes_the_pair_with_the_fewest_gpus_for_the_rate() -> None:
    """At 0.75 req/s the best pair per GPU (prefill TP1, decode TP8) needs 10 GPUs; prefill TP1
    with decode TP4 carries the rate on 6, and meets both targets in the simulator."""
    w = Workload.model_validate(edited_example(RAG, **LOW_RATE_RAG))
    best = _best_per_gpu(w).disaggregated
    v = decide(w)
    d = v.disaggregated
    assert (best.prefill_tp, best.decode_tp, best.gpus) == (1, 8, 10)
    assert (d.prefill_tp, d.decode_tp, d.gpus) == (1, 4, 6) and d.fits_cluster
    assert (d.max_rate_per_s, d.goodput_per_gpu) == (best.max_rate_per_s, best.goodput_per_gpu)
    assert d.ttft_p99_ms <= 3000 and d.tpot_p99_ms <= 10
    # The per-request figures are the presented pools' (a TP4 decode step is slower than TP8).
    assert v.sizing.decode_tp == 4
    assert v.metrics.decode_step_ms > _best_per_gpu(w).decode_step_ms
    r = resolve(w)
    requests = run.synthetic_requests(r, 3000, seed=7)
    outcome = run.simulate_mode(run.setup(r, v), "disaggregated", requests)
    assert metrics.attainment(outcome, requests, 3000, 10, steady=True)[0] >= 0.99
