"""Properties the physics must keep, over many generated workloads."""

from __future__ import annotations

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_decider.calc.compare import analyze
from disagg_decider.decide import decide
from disagg_decider.workload import load_workload_text, resolve
from tests.conftest import edited_example

DENSE_FITS = ["llama-3.1-8b", "qwen3-32b", "llama-3.3-70b", "mixtral-8x7b", "gpt-oss-120b"]


def workload(**changes):
    return load_workload_text(yaml.safe_dump(edited_example(**changes)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(DENSE_FITS),
    gpu=st.sampled_from(["h100", "h200", "b200", "a100-80g", "mi300x"]),
    gpus=st.sampled_from([4, 8, 16, 32]),
    rate=st.floats(0.2, 20),
    tpot=st.sampled_from([10, 20, 40, 80]),
    ttft=st.sampled_from([500, 1000, 3000]),
    network=st.sampled_from(["ib-ndr-400", "roce-100", "tcp-100"]),
)
def test_reasoning_128_in_2000_out_never_disaggregates(model, gpu, gpus, rate, tpot, ttft, network):
    w = workload(
        model=model,
        weights_dtype="fp8" if gpu != "a100-80g" else "bf16",
        kv_cache_dtype=None,
        **{
            "traffic.prompt_tokens": {"p50": 128, "p99": 512},
            "traffic.output_tokens": {"p50": 2000, "p99": 6000},
            "traffic.requests_per_second": rate,
            "traffic.prefix_cache_hit_rate": 0.0,
            "slo.tpot_ms": tpot,
            "slo.ttft_ms": ttft,
            "cluster.gpu": gpu,
            "cluster.gpus": gpus,
            "cluster.network": network,
        },
    )
    verdict = decide(w)
    assert verdict.decision == "colocate", verdict.summary


def test_long_prompts_with_tight_tpot_on_16_rdma_gpus_disaggregate():
    """The split wins by more than 1.1x, or colocation meets the targets nowhere. Since issue
    24 the colocated p99 TPOT of this example (8K-token prompts, 10 ms) is 10.2 ms at one
    sequence per TP8 replica, the smallest batch searched: no colocated layout qualifies."""
    v = decide(workload())
    assert v.decision in ("dynamo", "llm-d")
    assert v.metrics.gain is None or v.metrics.gain > 1.1
    assert v.metrics.goodput_per_gpu_disaggregated > 0
    assert v.metrics.kv_transfer_rdma


def test_tighter_tpot_never_raises_goodput():
    rates = []
    for tpot in (80, 40, 20, 10, 6):
        a = analyze(resolve(workload(**{"slo.tpot_ms": tpot})))
        rates.append((a.colocated.max_rate_per_s, a.disaggregated.max_rate_per_s))
    colo, disagg = np.array(rates).T
    assert np.all(np.diff(colo) <= 1e-9)
    assert np.all(np.diff(disagg) <= 1e-9)


def test_slower_network_never_speeds_up_the_transfer():
    times = [
        analyze(resolve(workload(**{"cluster.network": n}))).kv_transfer_ms
        for n in ("ib-ndr-400", "roce-100", "tcp-25", "tcp-10")
    ]
    assert times == sorted(times)


def test_prefix_hits_shrink_the_transferred_kv():
    sizes = [
        analyze(resolve(workload(**{"traffic.prefix_cache_hit_rate": h}))).kv_bytes_per_request
        for h in (0.0, 0.3, 0.6, 0.9)
    ]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[-1] < sizes[0] * 0.2


def test_more_gpus_serve_at_least_as_much():
    served = [
        analyze(resolve(workload(**{"cluster.gpus": g}))).disaggregated.max_rate_per_s
        for g in (8, 16, 32)
    ]
    assert served == sorted(served)
