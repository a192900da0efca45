"""The colocated pools a verdict presents: the fewest GPUs that carry the rate.

`calc/rate_layout.py`. The best layout per GPU on the whole cluster is what the modes are
compared on; at a team's own rate another layout may carry it on fewer GPUs. Before this, an
8B chat service at 10 req/s on 8 H100s was told one TP4 replica (4 GPUs) where one TP1 replica
(1 GPU) meets both targets.
"""

from __future__ import annotations

import sys
from unittest import mock

import pytest

from disagg_decider.calc import rate_layout
from disagg_decider.calc.compare import analyze
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.workload import Workload, resolve
from tests.conftest import ROOT, edited_example

CHAT = ROOT / "examples" / "chat-short-colocate.yaml"
SMALL_CHAT = {  # the seeded mix's chat-short-32
    "traffic.requests_per_second": 10,
    "traffic.prompt_tokens": {"p50": 800, "p99": 1600},
    "traffic.output_tokens": {"p50": 75, "p99": 75},
    "slo.ttft_ms": 500,
    "slo.tpot_ms": 21,
}


def _best_per_gpu(w: Workload):
    """The analysis as it was: the best layout per GPU presented at the rate."""
    with mock.patch.object(rate_layout, "fewest_gpus_layout", lambda *args: None):
        return analyze(resolve(w))


def test_the_fewest_gpus_that_carry_the_rate() -> None:
    w = Workload.model_validate(edited_example(CHAT, **SMALL_CHAT))
    best = _best_per_gpu(w).colocated
    c = decide(w).colocated
    assert (best.layout, best.replicas, best.gpus) == ("TP4", 1, 4)
    assert (c.layout, c.replicas, c.gpus) == ("TP1", 1, 1) and c.fits_cluster
    assert c.ttft_p99_ms <= 500 and c.tpot_p99_ms <= 21
    # The goodput stays the best layout's on the whole cluster (what the gain compares).
    assert (c.max_rate_per_s, c.goodput_per_gpu) == (best.max_rate_per_s, best.goodput_per_gpu)
    assert c.cost_per_year_usd == pytest.approx(best.cost_per_year_usd / 4)


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
    assert fewer >= 3, fewer


def test_the_smaller_pool_meets_the_targets_in_the_simulator() -> None:
    w = Workload.model_validate(edited_example(CHAT, **SMALL_CHAT))
    r, v = resolve(w), decide(w)
    requests = run.synthetic_requests(r, 4000, seed=11)
    outcome = run.simulate_mode(run.setup(r, v), "colocated", requests)
    attained = metrics.attainment(outcome, requests, 500, 21, steady=True)[0]
    assert v.sizing.colocated_gpus == 1 and attained >= 0.99, attained
