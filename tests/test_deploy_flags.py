"""Flag and key names the targets emit, as checked against upstream sources.

Each test pins a name that upstream spells one way and that an earlier version of the
emitters got wrong or left implicit; the sources are listed in deploy/readme.VERIFIED_AGAINST.
"""

from __future__ import annotations

import json

import yaml

from disagg_decider.deploy.bundle import build
from disagg_decider.deploy.engines import SERVE_PORT, SGLANG_BOOTSTRAP_PORT
from tests.deploy_helpers import example, pinned

RAG = "rag-8k-h200-rdma-dynamo.yaml"

# Dynamo 1.4 PlannerConfig field names (components/src/dynamo/planner/config/planner_config.py).
# Unknown keys are ignored there, so a misspelt key would silently fall back to a default.
PLANNER_KEYS = {
    "environment",
    "backend",
    "mode",
    "optimization_target",
    "ttft_ms",
    "itl_ms",
    "max_gpu_budget",
    "min_endpoint",
    "prefill_engine_num_gpu",
    "decode_engine_num_gpu",
    "model_name",
    "pre_deployment_sweeping_mode",
    "enable_throughput_scaling",
    "enable_load_scaling",
}


def _components(files: dict[str, str]) -> dict[str, dict]:
    doc = yaml.safe_load(files["dynamo-graph.yaml"])
    return {c["type"]: c for c in doc["spec"]["components"]}


def _container(component: dict) -> dict:
    return component["podTemplate"]["spec"]["containers"][0]


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_planner_config_passes_the_planners_own_checks() -> None:
    w, v = example(RAG)
    planner = json.loads(
        _value(_container(_components(build(w, v, "dynamo").files)["planner"])["args"], "--config")
    )
    assert set(planner) <= PLANNER_KEYS, set(planner) - PLANNER_KEYS
    assert planner["enable_throughput_scaling"] or planner["enable_load_scaling"]
    # The planner rejects throughput scaling without a pre-deployment sweep.
    if planner["pre_deployment_sweeping_mode"] == "none":
        assert planner["enable_throughput_scaling"] is False
    assert planner["optimization_target"] == "sla"  # other targets ignore ttft_ms/itl_ms


def test_dynamo_images_share_one_release_that_knows_the_emitted_flags() -> None:
    w, v = example(RAG)
    comps = _components(build(w, v, "dynamo").files)
    tags = {_container(c)["image"].rsplit(":", 1)[1] for c in comps.values()}
    assert len(tags) == 1
    major, minor = (int(x) for x in tags.pop().split(".")[:2])
    assert (major, minor) >= (1, 4)  # JSON conditional-disagg config and ttft_ms/itl_ms


def test_dynamo_vllm_workers_publish_kv_events_and_use_nixl() -> None:
    w, v = example(RAG)
    comps = _components(build(w, v, "dynamo").files)
    front = _container(comps["frontend"])["args"]
    assert _value(front, "--router-mode") == "kv"
    assert "--router-kv-events" in front and "--router-conditional-disagg" in front
    cfg = json.loads(_value(front, "--router-conditional-disagg-config"))
    assert set(cfg) <= {
        "policy",
        "eff_isl_threshold",
        "eff_isl_ratio_threshold",
        "prefill_busy_threshold",
        "decode_busy_threshold",
    }
    for role in ("prefill", "decode"):
        args = _container(comps[role])["args"]
        assert "--model" in args
        assert json.loads(_value(args, "--kv-transfer-config")) == {
            "kv_connector": "NixlConnector",
            "kv_role": "kv_both",
        }
        events = json.loads(_value(args, "--kv-events-config"))
        assert events["enable_kv_cache_events"] is True and events["publisher"] == "zmq"
        assert _value(args, "--disaggregation-mode") == role


def test_dynamo_trtllm_workers_use_model_and_publish_kv_events() -> None:
    w, v = example(RAG)
    w = w.model_copy(update={"engine": "trtllm"})
    comps = _components(build(w, v, "dynamo").files)
    for role in ("prefill", "decode"):
        args = _container(comps[role])["args"]
        assert "--model" in args and "--model-path" not in args  # --model-path is obsolete
        assert "--publish-kv-events" in args
        assert _value(args, "--max-num-tokens").isdigit()


def test_vllm_router_names_the_nixl_connector() -> None:
    w, v = example(RAG)
    files = build(w, v, "vllm").files
    router = next(
        d for d in yaml.safe_load_all(files["k8s/router.yaml"]) if d["kind"] == "Deployment"
    )
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in args
    assert _value(args, "--kv-connector") == "nixl"
    assert "--vllm-pd-disaggregation --kv-connector nixl" in files["launch.sh"]


def test_sglang_router_discovers_pods_on_the_engine_port_in_its_namespace() -> None:
    w, v = pinned(RAG, prefill_tp=4, decode_tp=4)  # SGLang needs equal TP
    w = w.model_copy(update={"engine": "sglang"})
    files = build(w, v, "sglang").files
    docs = list(yaml.safe_load_all(files["k8s/router.yaml"]))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert "--service-discovery" in args
    assert _value(args, "--service-discovery-port") == str(SERVE_PORT)  # its default is 80
    ns = _value(args, "--service-discovery-namespace")
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert ns == "$(POD_NAMESPACE)"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert any(d["kind"] == "Role" for d in docs)  # namespaced, hence the namespace flag
    prefill = next(
        d for d in yaml.safe_load_all(files["k8s/prefill.yaml"]) if d["kind"] == "Deployment"
    )
    notes = prefill["spec"]["template"]["metadata"]["annotations"]
    assert notes["sglang.ai/bootstrap-port"] == str(SGLANG_BOOTSTRAP_PORT)


def test_readme_lists_where_the_flags_were_verified() -> None:
    w, v = example(RAG)
    for target, needle in (
        ("dynamo", "planner_config.py"),
        ("llm-d", "pd-epp-config.yaml"),
        ("vllm", "vllm-project/router"),
    ):
        readme = build(w, v, target).files["README.md"]
        section = readme.split("## Flags verified against", 1)[1]
        assert needle in section


def _deepseek_on_one_node(engine: str) -> tuple:
    """DeepSeek-V3 on one 8 x H200 node, pinned to DP8/EP8 in both roles."""
    import json as _json

    from disagg_decider.decide import decide
    from disagg_decider.workload import load_workload_text

    w = load_workload_text(
        _json.dumps(
            {
                "name": "dsv3-8xh200",
                "model": "deepseek-v3",
                "weights_dtype": "fp8",
                "engine": engine,
                "traffic": {"prompt_tokens": 4000, "output_tokens": 1000, "requests_per_second": 1},
                "slo": {"ttft_ms": 2000, "tpot_ms": 60},
                "cluster": {"gpu": "h200", "gpus": 8},
                "parallelism": {"colocated": {"dp": 8, "ep": 8}},
            }
        )
    )
    return w, decide(w)


def test_dp_attention_and_expert_parallel_flags_per_engine() -> None:
    """SGLang: --tp 8 --dp 8 --enable-dp-attention --ep-size 8 --moe-a2a-backend deepep
    --deepep-mode (server_args.py); vLLM: --tensor-parallel-size 1 --data-parallel-size 8
    --enable-expert-parallel (arg_utils.py); Dynamo TensorRT-LLM: --expert-parallel-size,
    --enable-attention-dp (dynamo/trtllm backend_args.py)."""
    w, v = _deepseek_on_one_node("sglang")
    assert v.colocated.layout == "DP8/EP8"
    files = build(w, v, "sglang", layout="colocated").files
    args = next(yaml.safe_load_all(files["k8s/colocated.yaml"]))["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert _value(args, "--tp") == "8" and _value(args, "--dp") == "8"
    assert "--enable-dp-attention" in args
    assert _value(args, "--ep-size") == "8"
    assert _value(args, "--moe-a2a-backend") == "deepep"
    assert _value(args, "--deepep-mode") == "auto"

    w, v = _deepseek_on_one_node("vllm")
    files = build(w, v, "vllm", layout="colocated").files
    args = next(yaml.safe_load_all(files["k8s/colocated.yaml"]))["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert _value(args, "--tensor-parallel-size") == "1"
    assert _value(args, "--data-parallel-size") == "8"
    assert "--enable-expert-parallel" in args

    w, v = _deepseek_on_one_node("trtllm")
    worker = _components(build(w, v, "dynamo", layout="colocated").files)
    args = next(c for c in worker.values() if "--expert-parallel-size" in str(c))
    text = " ".join(
        map(str, _container(args).get("args", []) + _container(args).get("command", []))
    )
    assert "--expert-parallel-size 8" in text and "--enable-attention-dp" in text


def test_multi_node_sglang_on_llmd_is_refused_with_the_layout_named() -> None:
    """The one multi-node refusal left (tests/test_deploy_multinode.py has the emitted ones)."""
    import pytest

    from disagg_decider.errors import UserError

    w, v = example("deepseek-v3-32xh200-colocate.yaml")
    assert v.sizing.colocated_dp * v.sizing.colocated_tp > w.cluster.gpus_per_node
    with pytest.raises(UserError, match=r"DP32/EP32 .*multi-node SGLang"):
        build(w, v, "llm-d")
