"""What each target says beyond the sizes: thresholds, SLO targets, the colocated path."""

from __future__ import annotations

import json

import yaml

from disagg_decider.deploy.bundle import build
from tests.deploy_helpers import deployed, example, pinned

RAG = "rag-8k-h200-rdma-dynamo.yaml"
CHAT = "chat-short-colocate.yaml"


def _components(files: dict[str, str]) -> dict[str, dict]:
    doc = yaml.safe_load(files["dynamo-graph.yaml"])
    return {c["type"]: c for c in doc["spec"]["components"]}


def _args(component: dict) -> list[str]:
    return component["podTemplate"]["spec"]["containers"][0]["args"]


def test_dynamo_disaggregated_graph_carries_threshold_planner_and_nixl() -> None:
    w, v = example(RAG)
    assert v.disaggregate
    comps = _components(build(w, v, "dynamo").files)
    assert set(comps) == {"frontend", "planner", "prefill", "decode"}
    front = _args(comps["frontend"])
    cfg = json.loads(front[front.index("--router-conditional-disagg-config") + 1])
    assert v.layout == "conditional"  # the verdict's layout is deployed: its pools, its T
    assert cfg["eff_isl_threshold"] == v.conditional_disagg_threshold_tokens
    assert 0 <= cfg["eff_isl_ratio_threshold"] <= 1
    planner = json.loads(_args(comps["planner"])[1])
    assert (planner["ttft_ms"], planner["itl_ms"]) == (w.slo.ttft_ms, w.slo.tpot_ms)
    pools = deployed(w, v)
    assert planner["prefill_engine_num_gpu"] == pools.prefill_tp
    assert planner["decode_engine_num_gpu"] == pools.decode_tp
    decode = _args(comps["decode"])
    assert decode[decode.index("--max-num-seqs") + 1] == str(pools.decode_max_batch)
    assert decode[decode.index("--max-num-batched-tokens") + 1] == str(v.conditional.chunk_tokens)
    kv = json.loads(decode[decode.index("--kv-transfer-config") + 1])
    assert kv["kv_connector"] == "NixlConnector" and "kv_role" in kv
    assert decode[decode.index("--disaggregation-mode") + 1] == "decode"


def test_dynamo_sglang_omits_conditional_disagg_and_says_why() -> None:
    w, v = pinned(RAG, prefill_tp=4, decode_tp=4)  # SGLang needs equal TP
    w = w.model_copy(update={"engine": "sglang"})
    files = build(w, v, "dynamo").files
    comps = _components(files)
    assert not any("conditional-disagg" in a for a in _args(comps["frontend"]))
    assert "does not support it for SGLang" in files["dynamo-graph.yaml"]
    assert "does not support SGLang" in files["README.md"]
    prefill = _args(comps["prefill"])
    assert prefill[prefill.index("--disaggregation-mode") + 1] == "prefill"
    assert prefill[prefill.index("--tp") + 1] == str(v.sizing.prefill_tp)


def test_dynamo_colocated_is_the_aggregated_graph() -> None:
    w, v = example(CHAT)
    assert not v.disaggregate
    for api in ("v1beta1", "v1alpha1"):
        doc = yaml.safe_load(build(w, v, "dynamo", dynamo_api=api).files["dynamo-graph.yaml"])
        text = json.dumps(doc)
        assert "prefill" not in text and "planner" not in text and "NixlConnector" not in text
    comps = _components(build(w, v, "dynamo").files)
    assert set(comps) == {"frontend", "worker"}
    assert comps["worker"]["replicas"] == v.sizing.colocated_replicas
    worker = _args(comps["worker"])
    assert worker[worker.index("--max-num-batched-tokens") + 1] == str(
        v.sizing.colocated_chunk_tokens
    )


def test_dynamo_v1alpha1_uses_services_and_gpu_limits() -> None:
    w, v = example(RAG)
    doc = yaml.safe_load(build(w, v, "dynamo", dynamo_api="v1alpha1").files["dynamo-graph.yaml"])
    services = doc["spec"]["services"]
    prefill = next(s for s in services.values() if s.get("subComponentType") == "prefill")
    assert prefill["componentType"] == "worker"
    assert prefill["resources"]["limits"]["gpu"] == str(deployed(w, v).prefill_tp)
    assert prefill["replicas"] == deployed(w, v).prefill_replicas


def test_llmd_epp_uses_disagg_profile_handler_never_the_deprecated_one() -> None:
    w, v = example("k8s-native-shop-llm-d.yaml")
    files = build(w, v, "llm-d").files
    epp = yaml.safe_load(files["epp-config.yaml"])
    types = [p["type"] for p in epp["plugins"]]
    assert "pd-profile-handler" not in types
    assert "disagg-profile-handler" in types and "prefix-based-pd-decider" in types
    handler = next(p for p in epp["plugins"] if p["type"] == "disagg-profile-handler")
    assert handler["parameters"]["deciders"]["prefill"] == "prefix-based-pd-decider"
    embedded = yaml.safe_load(
        yaml.safe_load(files["router-values.yaml"])["router"]["epp"]["pluginsCustomConfig"][
            "epp-config.yaml"
        ]
    )
    assert embedded == epp


def test_llmd_autoscaling_per_role_signals() -> None:
    w, v = example("k8s-native-shop-llm-d.yaml")
    docs = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all(build(w, v, "llm-d").files["autoscaling.yaml"])
    }
    prefill = next(d for n, d in docs.items() if n.endswith("prefill-scaler"))
    decode = next(d for n, d in docs.items() if n.endswith("decode-scaler"))
    assert "num_requests_waiting" in prefill["spec"]["triggers"][0]["metadata"]["query"]
    assert "kv_cache_usage_perc" in decode["spec"]["triggers"][0]["metadata"]["query"]
    assert prefill["spec"]["minReplicaCount"] == deployed(w, v).prefill_replicas
    assert decode["spec"]["minReplicaCount"] == deployed(w, v).decode_replicas
    for d in (prefill, decode):
        assert d["spec"]["maxReplicaCount"] >= d["spec"]["minReplicaCount"]


def test_llmd_colocated_is_a_single_role_without_pd() -> None:
    w, v = example(CHAT)
    files = build(w, v, "llm-d").files
    values = yaml.safe_load(files["modelservice-values.yaml"])
    assert values["prefill"] == {"create": False}
    assert values["routing"]["proxy"] == {"enabled": False}
    assert values["decode"]["replicas"] == v.sizing.colocated_replicas
    assert "decider" not in files["epp-config.yaml"]
    assert len(list(yaml.safe_load_all(files["autoscaling.yaml"]))) == 1


def test_vllm_target_pools_and_router() -> None:
    w, v = example(RAG)
    files = build(w, v, "vllm").files
    assert set(files) == {
        "launch.sh",
        "k8s/prefill.yaml",
        "k8s/decode.yaml",
        "k8s/router.yaml",
        "README.md",
    }
    script = files["launch.sh"]
    assert '"kv_connector":"NixlConnector"' in script and "kv_role" in script
    assert f"--max-num-seqs {deployed(w, v).decode_max_batch}" in script
    assert "--vllm-pd-disaggregation" in script
    router = list(yaml.safe_load_all(files["k8s/router.yaml"]))
    assert any(d["kind"] == "Deployment" for d in router)


def test_sglang_colocated_router_uses_worker_urls() -> None:
    w, v = example(CHAT)
    files = build(w, v, "sglang").files
    assert "k8s/colocated.yaml" in files
    assert "--disaggregation-mode" not in files["launch.sh"]
    assert "--worker-urls" in files["k8s/router.yaml"]


def test_readme_names_verdict_and_benchmark_at_workload_rate() -> None:
    w, v = example(RAG)
    text = build(w, v, "llm-d").files["README.md"]
    assert v.summary in text
    assert f"--request-rate {w.traffic.requests_per_second:g}" in text
    assert f"--random-output-len {round(w.traffic.output_tokens.p50)}" in text
    assert "aiperf profile" in text and "vllm bench serve" in text


def test_always_disaggregated_layout_sends_every_prompt_to_prefill() -> None:
    """`--layout disaggregated` deploys the always-disaggregated sizing: threshold 0, so no
    conditional-disagg config for Dynamo and llm-d's always-disagg-pd-decider (its
    prefix-based decider's nonCachedTokens: 0 would mean never P/D)."""
    w, v = example(RAG)
    comps = _components(build(w, v, "dynamo", layout="disaggregated").files)
    assert not any("conditional-disagg" in a for a in _args(comps["frontend"]))
    assert comps["prefill"]["replicas"] == v.sizing.prefill_replicas
    epp = yaml.safe_load(build(w, v, "llm-d", layout="disaggregated").files["epp-config.yaml"])
    types = [p["type"] for p in epp["plugins"]]
    assert "always-disagg-pd-decider" in types and "prefix-based-pd-decider" not in types
    handler = next(p for p in epp["plugins"] if p["type"] == "disagg-profile-handler")
    assert handler["parameters"]["deciders"]["prefill"] == "always-disagg-pd-decider"
