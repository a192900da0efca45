"""The calculator against its own simulator: the quick set of `benchmarks/calc_vs_sim.py` and
the layouts of issue 13's "Effect on verdicts".

The full benchmark (40 workloads, `python benchmarks/calc_vs_sim.py`) is a script; this runs
its first eight workloads (about 30 s on one core) as a regression test with asserted bounds.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from disagg_decider.decide import decide
from disagg_decider.sim import run
from disagg_decider.workload import Workload, resolve, with_rate
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import calc_vs_sim


@pytest.fixture(scope="module")
def quick_rows() -> list:
    return calc_vs_sim.run_all(calc_vs_sim.workloads(calc_vs_sim.QUICK))


def test_quick_set_agrees_with_the_simulator(quick_rows) -> None:
    s = calc_vs_sim.summary(quick_rows)
    assert s["winner_agreement"] >= len(quick_rows) - 1
    for mode in ("colocated", "disaggregated"):
        m = s[mode]
        assert 0.85 <= m["goodput_ratio_median"] <= 1.15, (mode, m)
        assert m["goodput_within_0.8_1.25"] >= 0.7, (mode, m)
        assert 0.7 <= m["ttft_p99_ratio_median"] <= 1.4, (mode, m)
        assert 0.8 <= m["tpot_p99_ratio_median"] <= 1.25, (mode, m)


def _effect_workload(prompt_p99: int = 4000, **parallelism: int) -> Workload:
    """16 H200, Llama-3.3-70B bf16, 4000/500 tokens, TTFT 1000 / TPOT 50 ms (issue 13)."""
    data = {
        "name": "effect-on-verdicts",
        "model": "llama-3.3-70b",
        "weights_dtype": "bf16",
        "kv_cache_dtype": "bf16",
        "engine": "vllm",
        "traffic": {
            "prompt_tokens": {"p50": 4000, "p99": prompt_p99},
            "output_tokens": 500,
            "requests_per_second": 1.0,
        },
        "slo": {"ttft_ms": 1000, "tpot_ms": 50},
        "cluster": {"gpu": "h200", "gpus": 16, "gpus_per_node": 8, "network": "ib-ndr-400"},
        "ops": {"maturity": "high"},
    }
    if parallelism:
        data["parallelism"] = parallelism
    return Workload.model_validate(data)


def test_effect_on_verdicts_layouts_match_the_simulator() -> None:
    """3P TP4 + 1D TP4: the calculator's max rate within 25% of the simulator's goodput (the
    old per-replica M/G/1 rated every TP4 prefill layout at 0), and the unpinned search finds a
    split at least as good."""
    pinned = _effect_workload(prefill_tp=4, decode_tp=4)
    v = decide(pinned)
    calc = v.disaggregated.max_rate_per_s
    at_top = decide(with_rate(pinned, calc * 0.999))
    s = run.setup(resolve(pinned), at_top)
    assert (s.disaggregated.prefill_replicas, s.disaggregated.decode_replicas) == (3, 1)
    base = run.synthetic_requests(resolve(pinned), 4000, calc_vs_sim.SEED, rate_per_s=1.0)
    simulated = run.goodput(s, "disaggregated", base, 0.99, start_rate=calc)
    assert calc == pytest.approx(simulated, rel=0.25)
    free = decide(_effect_workload())
    assert free.disaggregated.max_rate_per_s >= calc * (1 - 1e-9)


def test_routers_are_explicit_and_random_routing_queues_more() -> None:
    """A random split makes each prefill replica its own M/G/1 queue: worse p99 TTFT than the
    least-work router the calculator assumes."""
    w = _effect_workload(12000, prefill_tp=4, decode_tp=4)
    r, v = resolve(w), decide(w)
    reqs = run.synthetic_requests(r, 4000, 1, rate_per_s=4.5)  # 3 TP4 prefills at rho ~0.7
    p99 = {}
    for router in ("least-work", "round-robin", "random"):
        s = run.setup(r, v, prefill_gpus=12, decode_gpus=4, router=router)
        out = run.simulate_mode(s, "disaggregated", reqs)
        p99[router] = float(np.percentile(out.first_token_ms - reqs.arrival_ms, 99))
    assert p99["least-work"] < p99["round-robin"] < p99["random"], p99
