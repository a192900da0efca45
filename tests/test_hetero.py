"""Heterogeneous pools: prefill on one GPU type, decode on another (calc/modes/hetero.py)."""

from __future__ import annotations

import pytest

from disagg_decider.calc.compare import analyze
from disagg_decider.errors import UserError
from disagg_decider.workload import Workload, load_workload, load_workload_text, resolve, with_rate
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "b200-prefill-h200-decode-dynamo.yaml"


def _variant(**cluster) -> Workload:
    w = load_workload(EXAMPLE)
    data = w.model_dump(mode="json", exclude_none=True)
    data["cluster"].update(cluster)
    return Workload.model_validate(data)


def _homogeneous(w: Workload, gpu: str, gpus: int) -> Workload:
    data = w.model_dump(mode="json", exclude_none=True)
    for key in ("prefill_gpu", "prefill_gpus", "decode_gpu", "decode_gpus"):
        data["cluster"].pop(key, None)
    data["cluster"].update(gpu=gpu, gpus=gpus)
    return Workload.model_validate(data)


@pytest.mark.parametrize(
    ("prefill_gpus", "decode_gpus", "prompt_p50"),
    [(8, 8, 8192), (8, 24, 8192), (16, 8, 2048), (8, 16, 512), (24, 8, 16000)],
)
def test_never_below_the_better_homogeneous_split_of_the_same_inventory(
    prefill_gpus, decode_gpus, prompt_p50
):
    """Each pool decided as a homogeneous cluster of its own: the heterogeneous verdict's
    disaggregated goodput is at least what the two homogeneous splits serve side by side, and
    its colocated comparator is exactly what the two pools serve colocated."""
    w = _variant(
        gpus=prefill_gpus + decode_gpus, prefill_gpus=prefill_gpus, decode_gpus=decode_gpus
    )
    data = w.model_dump(mode="json", exclude_none=True)
    data["traffic"]["prompt_tokens"] = {"p50": prompt_p50, "p99": 2 * prompt_p50}
    w = Workload.model_validate(data)
    a = analyze(resolve(w))
    b200 = analyze(resolve(_homogeneous(w, "b200", prefill_gpus)))
    h200 = analyze(resolve(_homogeneous(w, "h200", decode_gpus)))
    split_side_by_side = b200.disaggregated.max_rate_per_s + h200.disaggregated.max_rate_per_s
    better = max(
        split_side_by_side, b200.disaggregated.max_rate_per_s, h200.disaggregated.max_rate_per_s
    )
    assert a.disaggregated.max_rate_per_s >= better * (1 - 1e-9)
    total = prefill_gpus + decode_gpus
    assert a.disaggregated.goodput_per_gpu == pytest.approx(a.disaggregated.max_rate_per_s / total)
    colo = b200.colocated.max_rate_per_s + h200.colocated.max_rate_per_s
    assert a.colocated.max_rate_per_s == pytest.approx(colo)


def test_example_puts_prefill_on_b200_and_decode_on_h200_over_the_network():
    a = analyze(resolve(load_workload(EXAMPLE)))
    d = a.disaggregated
    assert d.prefill_layout.endswith("on b200") and d.decode_layout.endswith("on h200")
    assert a.kv_transfer_path == "network"
    assert a.gain is not None and a.gain > 1
    # The crossover re-decides the inventory along the prompt grid: below it colocation wins.
    assert a.crossover_prompt_tokens is not None and a.crossover_prompt_tokens < 8192
    from disagg_decider.calc.compare import gain_curve

    low, high = gain_curve(resolve(load_workload(EXAMPLE)), [64, 8192])
    assert low < 1 < high
    # Each pool's price: the sized split pays B200 hours for prefill, H200 hours for decode.
    usd = d.prefill_gpus * 7.0 + d.decode_gpus * 5.4
    assert d.cost_per_year_usd == pytest.approx(usd * 8760)


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ("{gpu: h200, gpus: 16, prefill_gpu: b200, prefill_gpus: 8}", "both prefill_gpus"),
        ("{gpu: h200, gpus: 16, prefill_gpu: b200, prefill_gpus: 8, decode_gpus: 4}", "must equal"),
        ("{gpu: h200, gpus: 16, prefill_gpus: 8, decode_gpus: 8}", "give prefill_gpu"),
        ("{gpu: h200, gpus: 16, prefill_gpu: b300, prefill_gpus: 8, decode_gpus: 8}", "b300"),
    ],
)
def test_bad_pools_are_named(cluster, message):
    text = f"""
name: x
model: llama-3.3-70b
traffic: {{prompt_tokens: 4000, output_tokens: 500, requests_per_second: 1}}
slo: {{ttft_ms: 2000, tpot_ms: 30}}
cluster: {cluster}
"""
    with pytest.raises(UserError, match=message) as err:
        load_workload_text(text, "w.yaml")
    assert "cluster" in str(err.value)


def test_deploy_emits_heterogeneous_pools_pinned_to_their_gpus():
    """Deploy pins each pool to its GPU type (details: tests/test_deploy_multinode.py); the
    simulator runs the pools on their own GPUs (tests/test_sim_hetero.py)."""
    from disagg_decider.decide import decide
    from disagg_decider.deploy.bundle import build

    w = load_workload(EXAMPLE)
    graph = build(w, decide(w), "dynamo").files["dynamo-graph.yaml"]
    assert "nvidia.com/gpu.product: NVIDIA-B200" in graph
    assert "nvidia.com/gpu.product: NVIDIA-H200" in graph


@pytest.mark.parametrize("rate", [2.0, 400.0])  # both modes carry 2 req/s (colocated at most ~2.9)
def test_cross_split_reports_latencies_within_targets_and_what_the_rate_needs(rate):
    """After the merge with issue 13 the cross split is priced with pooled prefill queues:
    at the sized load the reported p99s stay within the targets, and a rate beyond the
    inventory is a rate limit with the GPUs it needs (issue 11's fields)."""
    w = load_workload(EXAMPLE)
    w = with_rate(w, rate)
    a = analyze(resolve(w))
    for mode in (a.colocated, a.disaggregated):
        assert mode.feasible
        assert mode.ttft_p99_ms <= w.slo.ttft_ms * 1.001
        assert mode.tpot_p99_ms <= w.slo.tpot_ms * 1.001
        assert mode.gpus_needed_for_rate >= mode.gpus
        assert mode.fits_cluster == (mode.gpus_needed_for_rate <= w.cluster.gpus)
        assert mode.fits_cluster == (rate <= mode.max_rate_per_s * (1 + 1e-9))
    rate_limits = {lim.mode for lim in a.limits if lim.kind == "rate"}
    short = {m.mode for m in (a.colocated, a.disaggregated) if not m.fits_cluster}
    assert rate_limits == short
    assert (rate > 100) == bool(short)
