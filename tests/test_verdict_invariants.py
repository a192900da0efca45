"""Invariants every verdict keeps, over generated workloads from the whole input space.

Every catalog model and GPU, 1-64 GPUs, prompts 16-200K tokens, outputs 1-8K, 0.01-500 req/s
(log-uniform), tight to loose SLOs, every network and engine (`workloads`); most of that space
cannot be served (beyond the context, out of memory, targets out of reach), so a second
generator (`served_workloads`) draws where serving usually is possible and splits get chosen.
The CI profile runs 200 of each (`tests/conftest.py`); the on-demand profile 2,000 of each:

    HYPOTHESIS_PROFILE=large python -m pytest tests/test_verdict_invariants.py -q

What must hold, whatever the input: a split is chosen only when it is feasible, and where
colocation also carries the rate, only when it needs fewer GPUs for it (DSG020); a feasible
verdict's chosen mode meets both p99 targets (within 0.1%) on no more GPUs than the cluster
has; the gain is the goodput ratio or null; `gpus_needed_for_rate` covers the layout that
serves the rate; the verdict's crossover equals `decide sweep`'s; the JSON holds no NaN or
infinity; nothing raises.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_decider import catalog
from disagg_decider.decide import decide
from disagg_decider.sim.sweep import run_sweep
from disagg_decider.verdict import Verdict
from disagg_decider.workload import Workload

MODELS = sorted({m.id for m in catalog.models().values()})
GPUS = sorted({g.id for g in catalog.gpus().values()})
LINKS = sorted({link.id for link in catalog.links().values()})
SCALE_OUT_LINKS = [x for x in LINKS if catalog.get_link(x).kind != "scale-up"]
TOLERANCE = 1.001  # "at or under the target, within 0.1%"


def log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """Spread over decades, so short prompts and low rates are drawn as often as long ones."""
    return st.floats(math.log10(low), math.log10(high)).map(lambda e: 10.0**e)


@st.composite
def workloads(draw) -> Workload:
    prompt_p50 = draw(log_uniform(16, 200_000))
    prompt_p99 = prompt_p50 * draw(st.floats(1.0, 4.0))
    output_p50 = draw(log_uniform(1, 8192))
    output_p99 = output_p50 * draw(st.floats(1.0, 4.0))
    gpus = draw(st.integers(1, 64))
    weights = draw(st.sampled_from(["bf16", "fp8", "fp4"]))
    gpu = draw(st.sampled_from(GPUS))
    # NVLink only where the GPU has it (elsewhere the workload is refused as an input error).
    links = LINKS if catalog.get_gpu(gpu).scaleup_gb_per_s > 0 else SCALE_OUT_LINKS
    return Workload.model_validate(
        {
            "name": "generated",
            "model": draw(st.sampled_from(MODELS)),
            "weights_dtype": weights,
            "engine": draw(st.sampled_from(["vllm", "sglang", "trtllm"])),
            "traffic": {
                "prompt_tokens": {"p50": prompt_p50, "p99": prompt_p99},
                "output_tokens": {"p50": output_p50, "p99": output_p99},
                "requests_per_second": draw(log_uniform(0.01, 500)),
                "prefix_cache_hit_rate": draw(st.sampled_from([0.0, 0.1, 0.5, 0.9])),
            },
            "slo": {
                "ttft_ms": draw(st.sampled_from([50, 500, 1000, 3000, 10_000, 600_000])),
                "tpot_ms": draw(st.sampled_from([2, 10, 20, 50, 100, 1000])),
            },
            "cluster": {
                "gpu": gpu,
                "gpus": gpus,
                "gpus_per_node": draw(st.sampled_from([1, 2, 4, 8, 8, 8])),
                "network": draw(st.sampled_from(links)),
            },
            "ops": {"maturity": draw(st.sampled_from(["low", "medium", "high"]))},
        }
    )


@st.composite
def served_workloads(draw) -> Workload:
    """Where serving usually is possible: models that fit, 4-64 GPUs in 8-GPU nodes, 256-32K
    prompts, interactive to batch SLOs. Here splits are chosen and clusters run short, so the
    invariants about a chosen split and about `gpus_needed_for_rate` are exercised often."""
    prompt_p50 = draw(log_uniform(256, 32_768))
    output_p50 = draw(log_uniform(16, 2048))
    gpu = draw(st.sampled_from(["h100", "h200", "b200", "mi300x", "a100-80g"]))
    return Workload.model_validate(
        {
            "name": "served",
            "model": draw(st.sampled_from(["llama-3.1-8b", "qwen3-32b", "llama-3.3-70b"])),
            "weights_dtype": "bf16"
            if gpu == "a100-80g"
            else draw(st.sampled_from(["bf16", "fp8"])),
            "engine": draw(st.sampled_from(["vllm", "sglang", "trtllm"])),
            "traffic": {
                "prompt_tokens": {"p50": prompt_p50, "p99": prompt_p50 * draw(st.floats(1, 3))},
                "output_tokens": {"p50": output_p50, "p99": output_p50 * draw(st.floats(1, 3))},
                "requests_per_second": draw(log_uniform(0.1, 100)),
                "prefix_cache_hit_rate": draw(st.sampled_from([0.0, 0.3, 0.6])),
            },
            "slo": {
                "ttft_ms": draw(st.sampled_from([500, 1000, 2000, 5000])),
                "tpot_ms": draw(st.sampled_from([8, 15, 30, 60])),
            },
            "cluster": {
                "gpu": gpu,
                "gpus": draw(st.sampled_from([4, 8, 16, 24, 32, 64])),
                "gpus_per_node": 8,
                "network": draw(st.sampled_from(["ib-ndr-400", "roce-200", "efa", "tcp-100"])),
            },
        }
    )


def check_invariants(w: Workload, v: Verdict) -> None:
    """Every invariant of one verdict; an AssertionError names the one that broke."""
    payload = json.dumps(v.model_dump(mode="json"), allow_nan=False)  # no NaN or inf
    assert "NaN" not in payload and "Infinity" not in payload
    c, d = v.colocated, v.disaggregated
    slo, cluster = w.slo, w.cluster.gpus
    assert v.disaggregate == (v.decision != "colocate")
    if v.disaggregate:
        assert d.feasible, "a split was chosen that meets no target"
        assert d.fits_cluster or not c.fits_cluster, "a short split chosen over a colocated fit"
        if c.fits_cluster:  # DSG020: a split must save GPUs at the workload's own rate
            assert d.gpus_needed_for_rate < c.gpus_needed_for_rate, (
                d.gpus_needed_for_rate,
                c.gpus_needed_for_rate,
            )
    chosen = d if v.disaggregate else c
    assert v.feasible == chosen.feasible
    if not c.feasible and not d.feasible:
        assert v.decision == "colocate" and not v.feasible
        assert v.summary.startswith("No layout meets the targets"), v.summary
        assert v.limits, "infeasible without a limit"
    for mode in (c, d):
        if mode.feasible:
            assert mode.ttft_p99_ms is not None and mode.tpot_p99_ms is not None
            assert mode.ttft_p99_ms <= slo.ttft_ms * TOLERANCE, (mode.mode, mode.ttft_p99_ms)
            assert mode.tpot_p99_ms <= slo.tpot_ms * TOLERANCE, (mode.mode, mode.tpot_p99_ms)
            assert mode.gpus <= cluster, (mode.mode, mode.gpus, cluster)
            assert mode.gpus_needed_for_rate is not None
            assert mode.gpus_needed_for_rate >= mode.gpus
            assert mode.fits_cluster == (mode.gpus_needed_for_rate <= cluster)
            assert mode.max_rate_per_s > 0
        else:
            assert mode.gpus_needed_for_rate is None and not mode.fits_cluster
            assert mode.ttft_p99_ms is None and mode.tpot_p99_ms is None
            assert mode.max_rate_per_s == 0
        if mode.fits_cluster:
            assert mode.gpus == mode.gpus_needed_for_rate
        elif mode.feasible:
            assert any(x.kind == "rate" and x.mode == mode.mode for x in v.limits)
    if c.feasible and d.feasible:
        assert v.metrics.gain is not None
        assert math.isclose(v.metrics.gain, d.goodput_per_gpu / c.goodput_per_gpu, rel_tol=1e-9)
    else:
        assert v.metrics.gain is None
    check_conditional(w, v)


def check_conditional(w: Workload, v: Verdict) -> None:
    """The conditional layout (issue 14): T = 0 and no prefill pool are among its thresholds,
    so its best goodput is never below either mode's (the chosen threshold, the largest within
    1% of that best, at most 1% below); when it serves, its p99s meet the targets on
    no more GPUs than the cluster has; the verdict's threshold and layout are its own."""
    k, c, d, slo = v.conditional, v.colocated, v.disaggregated, w.slo
    assert k is not None
    best = max(c.goodput_per_gpu if c.feasible else 0.0, d.goodput_per_gpu if d.feasible else 0.0)
    top = max(g.goodput_per_gpu for g in k.curve)
    assert top >= best * (1 - 1e-12), (top, best)  # the best threshold: never below either
    # The chosen one is the largest threshold within 1% of that best (fewest KV transfers).
    assert k.goodput_per_gpu >= 0.99 * top * (1 - 1e-12), (k.goodput_per_gpu, top)
    assert k.goodput_per_gpu <= top * (1 + 1e-12)
    if not (c.feasible or d.feasible or k.feasible):
        # Nothing meets the targets: the verdict names no layout and no threshold (issue 26).
        assert v.layout == "none" and v.dynamo_layout == "none", v.layout
        assert v.conditional_disagg_threshold_tokens is None
    else:
        assert v.layout == k.layout
        assert v.conditional_disagg_threshold_tokens == k.threshold_tokens
    assert (k.threshold_tokens is None) == (k.layout == "colocated")
    assert (k.threshold_tokens == 0) == (k.layout == "disaggregated")
    assert 0.0 <= k.share_to_prefill <= 1.0
    if k.layout == "conditional":
        assert k.ttft_p99_ms is not None and k.tpot_p99_ms is not None
        gpus = k.prefill_replicas * k.prefill_tp + k.decode_replicas * k.decode_tp
        assert gpus <= v.sizing.cluster_gpus
        assert 0.0 < k.share_to_prefill < 1.0
        assert k.ttft_p99_ms <= slo.ttft_ms * TOLERANCE, k.ttft_p99_ms
        assert k.tpot_p99_ms <= slo.tpot_ms * TOLERANCE, k.tpot_p99_ms


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workloads(), steps=st.integers(2, 12))
def test_every_verdict_keeps_its_invariants(w: Workload, steps: int) -> None:
    v = decide(w)
    check_invariants(w, v)
    sweep = run_sweep(w, None, 64, 65536, steps)
    assert sweep.crossover_analytic == v.metrics.crossover_prompt_tokens


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=served_workloads(), steps=st.integers(2, 12))
def test_served_workloads_keep_the_invariants(w: Workload, steps: int) -> None:
    v = decide(w)
    check_invariants(w, v)
    sweep = run_sweep(w, None, 64, 65536, steps)
    assert sweep.crossover_analytic == v.metrics.crossover_prompt_tokens
