"""Replicas wider than a node (wide EP) and heterogeneous pools in `decide deploy`.

Multi-node: Dynamo's `multinode.nodeCount` with the GPU limit per node (the operator starts
one pod per node and adds each engine's rank flags); llm-d's chart in `multinode: true` mode
(LeaderWorkerSet) with vLLM's hybrid data-parallel launch per pod. Heterogeneous: each pool
pinned to its GPU type through the GPU Feature Discovery product label. Every emitted manifest
is checked against the published schemas in ../shared/schemas.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
import yaml

from disagg_decider.decide import decide
from disagg_decider.deploy.bundle import build
from disagg_decider.errors import UserError
from disagg_decider.workload import load_workload_text
from tests.deploy_helpers import SCHEMAS, example, helm_merge, run_cli, schema, validation_errors

DGD_SCHEMA = {
    "v1beta1": "dynamo/dynamographdeployment.v1beta1.schema.json",
    "v1alpha1": "dynamo/dynamographdeployment.schema.json",
}
DEEPSEEK = "deepseek-v3-32xh200-colocate.yaml"
HETERO = "b200-prefill-h200-decode-dynamo.yaml"


@cache
def wide_ep(engine: str):
    """DeepSeek-V3 on 4 x 8 H200: prefill DP8/EP8 on one node, decode DP16/EP16 on two."""
    w = load_workload_text(
        json.dumps(
            {
                "name": "dsv3-wide-ep",
                "model": "deepseek-v3",
                "weights_dtype": "fp8",
                "engine": engine,
                "traffic": {"prompt_tokens": 4000, "output_tokens": 1000, "requests_per_second": 2},
                "slo": {"ttft_ms": 2000, "tpot_ms": 50},
                "cluster": {"gpu": "h200", "gpus": 32, "gpus_per_node": 8, "network": "ib-ndr-400"},
                "parallelism": {"prefill": {"dp": 8, "ep": 8}, "decode": {"dp": 16, "ep": 16}},
            }
        ),
        source="dsv3-wide-ep.yaml",
    )
    return w, decide(w)


def _components(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["spec"]["components"]}


def _args(component: dict) -> list[str]:
    return component["podTemplate"]["spec"]["containers"][0]["args"]


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("api", ["v1beta1", "v1alpha1"])
def test_dynamo_deepseek_example_runs_its_dp32_replica_on_four_nodes(api: str) -> None:
    w, v = example(DEEPSEEK)
    assert v.sizing.colocated_dp == 32 and w.cluster.gpus_per_node == 8
    text = build(w, v, "dynamo", dynamo_api=api).files["dynamo-graph.yaml"]
    doc = yaml.safe_load(text)
    assert validation_errors(doc, schema(DGD_SCHEMA[api])) == []
    if api == "v1beta1":
        worker = _components(doc)["SglangWorker"]
        gpus = worker["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]
        gpus, args = int(gpus["nvidia.com/gpu"]), _args(worker)
    else:
        worker = doc["spec"]["services"]["SglangWorker"]
        gpus = int(worker["resources"]["limits"]["gpu"])
        args = worker["extraPodSpec"]["mainContainer"]["args"]
    assert worker["multinode"] == {"nodeCount": 4}
    # Dynamo's guide: total GPUs = nodeCount x GPU limit, and --tp must equal that total.
    assert gpus == 8 and int(_value(args, "--tp")) == 4 * gpus == 32
    assert _value(args, "--dp") == "32" and _value(args, "--ep-size") == "32"
    # The operator adds the rank flags per pod; writing them here would clash with its own.
    assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(args)
    assert "colocated replicas span 4 nodes x 8 GPUs" in text and "--nnodes N" in text


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_dynamo_wide_ep_decode_spans_two_nodes_and_prefill_one(engine: str) -> None:
    w, v = wide_ep(engine)
    assert (v.sizing.decode_dp, v.sizing.decode_ep, v.sizing.prefill_dp) == (16, 16, 8)
    bundle = build(w, v, "dynamo", layout="disaggregated")
    text = bundle.files["dynamo-graph.yaml"]
    doc = yaml.safe_load(text)
    assert validation_errors(doc, schema(DGD_SCHEMA["v1beta1"])) == []
    prefix = {"vllm": "Vllm", "trtllm": "Trtllm"}[engine]
    comps = _components(doc)
    decode, prefill = comps[f"{prefix}DecodeWorker"], comps[f"{prefix}PrefillWorker"]
    assert decode["multinode"] == {"nodeCount": 2} and "multinode" not in prefill
    for c, gpus in ((decode, "8"), (prefill, "8")):
        limits = c["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == gpus
    args = _args(decode)
    if engine == "vllm":
        assert _value(args, "--tensor-parallel-size") == "1"
        assert _value(args, "--data-parallel-size") == "16"
        assert "--enable-expert-parallel" in args
        assert "--data-parallel-start-rank" not in args  # injected per pod by the operator
    else:
        assert _value(args, "--tensor-parallel-size") == "16"
        assert _value(args, "--expert-parallel-size") == "16"
        assert "--enable-attention-dp" in args
        assert "mpirun-ssh-key" in text  # the secret the operator's mpirun launch needs
    assert "decode replicas span 2 nodes x 8 GPUs" in text


def test_llmd_wide_ep_decode_is_a_leader_worker_set_with_hybrid_dp_per_pod() -> None:
    w, v = wide_ep("vllm")
    files = build(w, v, "llm-d", layout="disaggregated").files
    values = yaml.safe_load(files["modelservice-values.yaml"])
    values_schema = schema("llm-d/modelservice-values.schema.json")
    defaults = yaml.safe_load((SCHEMAS / "llm-d/modelservice-values.defaults.yaml").read_text())
    assert validation_errors(values, values_schema) == []
    assert validation_errors(helm_merge(defaults, values), values_schema) == []
    assert values["multinode"] is True
    decode = values["decode"]
    # The chart: LWS group size = workers, GPUs per pod = dataLocal x tensor.
    assert decode["parallelism"] == {"tensor": 1, "data": 16, "dataLocal": 8, "workers": 2}
    p = decode["parallelism"]
    assert p["dataLocal"] * p["tensor"] == w.cluster.gpus_per_node
    assert values["prefill"]["parallelism"] == {"tensor": 1, "data": 8, "dataLocal": 8}
    container = decode["containers"][0]
    assert container["modelCommand"] == "custom" and container["command"] == ["/bin/sh", "-c"]
    script = container["args"][0]
    for piece in (
        "--data-parallel-size 16",
        "--data-parallel-size-local 8",
        "--data-parallel-hybrid-lb",
        "--enable-expert-parallel",
        '--data-parallel-address "$LWS_LEADER_ADDRESS"',
        "--data-parallel-start-rank $(($LWS_WORKER_INDEX * 8))",
        "--port 8200",  # behind the routing sidecar on every decode pod
    ):
        assert piece in script, piece
    keda = schema("k8s/keda-scaledobject.schema.json")
    for doc in yaml.safe_load_all(files["autoscaling.yaml"]):
        assert doc["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
        assert validation_errors(doc, keda) == []


@pytest.mark.parametrize(
    "target,api", [("dynamo", "v1beta1"), ("dynamo", "v1alpha1"), ("llm-d", None), ("vllm", None)]
)
def test_heterogeneous_pools_each_land_on_their_gpu_type(target: str, api: str | None) -> None:
    w, v = example(HETERO)
    assert (w.cluster.prefill_gpu, w.cluster.gpu) == ("b200", "h200")
    files = build(w, v, target, **({"dynamo_api": api} if api else {})).files
    want = {"prefill": "NVIDIA-B200", "decode": "NVIDIA-H200"}
    if target == "dynamo":
        doc = yaml.safe_load(files["dynamo-graph.yaml"])
        assert validation_errors(doc, schema(DGD_SCHEMA[api])) == []
        if api == "v1beta1":
            got = {
                c["type"]: c["podTemplate"]["spec"].get("nodeSelector")
                for c in doc["spec"]["components"]
            }
        else:
            got = {
                s.get("subComponentType", s["componentType"]): s["extraPodSpec"].get("nodeSelector")
                for s in doc["spec"]["services"].values()
            }
        assert got["frontend"] is None
        for role, value in want.items():
            assert got[role] == {"nvidia.com/gpu.product": value}
    elif target == "llm-d":
        values = yaml.safe_load(files["modelservice-values.yaml"])
        assert validation_errors(values, schema("llm-d/modelservice-values.schema.json")) == []
        for role, value in want.items():
            assert values[role]["acceleratorTypes"] == {
                "labelKey": "nvidia.com/gpu.product",
                "labelValues": [value],
            }
    else:
        for role, value in want.items():
            dep = next(yaml.safe_load_all(files[f"k8s/{role}.yaml"]))
            assert dep["spec"]["template"]["spec"]["nodeSelector"] == {
                "nvidia.com/gpu.product": value
            }


def test_heterogeneous_layouts_with_two_engine_kinds_per_role_are_refused() -> None:
    """Colocated on both pools is two colocated deployments of different GPUs: refused."""
    w, v = example(HETERO)
    with pytest.raises(UserError, match="own homogeneous workload"):
        build(w, v, "dynamo", layout="colocated")
    spill = v.model_copy(
        update={
            "disaggregated": v.disaggregated.model_copy(
                update={"prefill_layout": "TP1 on b200 (+2 x TP1 on h200)"}
            )
        }
    )
    with pytest.raises(UserError, match="spare decode-pool GPUs"):
        build(w, spill, "dynamo")


def test_gpu_label_key_and_products_are_configurable(tmp_path) -> None:
    out = tmp_path / "het"
    proc = run_cli(
        "deploy",
        "-w",
        f"examples/{HETERO}",
        "-t",
        "dynamo",
        "-o",
        str(out),
        "--gpu-label-key",
        "cloud.example.com/accelerator",
        "--gpu-product",
        "prefill=b200-sxm",
    )
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load((out / "dynamo-graph.yaml").read_text())
    comps = doc["spec"]["components"]
    sel = {c["type"]: c["podTemplate"]["spec"].get("nodeSelector") for c in comps}
    assert sel["prefill"] == {"cloud.example.com/accelerator": "b200-sxm"}
    assert sel["decode"] == {"cloud.example.com/accelerator": "NVIDIA-H200"}
    # A homogeneous cluster gets selectors only when asked, on every pool.
    w, v = example("rag-8k-h200-rdma-dynamo.yaml")
    plain = yaml.safe_load(build(w, v, "dynamo").files["dynamo-graph.yaml"])
    assert "nodeSelector" not in json.dumps(plain)
    pinned = build(w, v, "dynamo", gpu_products={"prefill": "X", "decode": "X"}).files
    assert json.dumps(yaml.safe_load(pinned["dynamo-graph.yaml"])).count('"nodeSelector"') == 2
    bad = run_cli(
        "deploy", "-w", f"examples/{HETERO}", "-t", "dynamo", "-o", str(tmp_path / "b"),
        "--gpu-product", "router=X",
    )  # fmt: skip
    assert bad.returncode == 2 and "--gpu-product 'router=X'" in bad.stderr
    assert "Traceback" not in bad.stderr
    with pytest.raises(UserError, match="not a Kubernetes label key"):
        build(w, v, "dynamo", gpu_label_key="bad key", gpu_products={"decode": "X"})
    with pytest.raises(UserError, match="not a Kubernetes label value"):
        build(w, v, "dynamo", gpu_products={"decode": "H200; rm -rf"})


def _docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_plain_sglang_target_runs_a_leader_worker_set_serving_from_the_leader(tmp_path) -> None:
    """SGLang over 4 nodes: one LWS group of 4 pods x 8 GPUs, node ranks from LWS; only the
    leader serves HTTP, so only it has probes and the Service selects leaders."""
    import shutil
    import subprocess

    w, v = example(DEEPSEEK)
    files = build(w, v, "sglang").files
    group, service = _docs(files["k8s/colocated.yaml"])
    assert group["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert group["kind"] == "LeaderWorkerSet" and group["spec"]["replicas"] == 1
    template = group["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 4
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    for c in (leader, worker):
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert c["command"] == ["/bin/sh", "-c"]
        script = c["args"][0]
        assert "--tp 32 --dp 32" in script and "--nnodes 4" in script
        assert '--dist-init-addr "$LWS_LEADER_ADDRESS":29500' in script
        assert "--node-rank $LWS_WORKER_INDEX" in script
    assert "readinessProbe" in leader and "readinessProbe" not in worker
    assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    launch = files["launch.sh"]
    assert 'NODE_RANK="${NODE_RANK:-0}"' in launch
    assert '--dist-init-addr "$LEADER_ADDR":29500 --nnodes 4 --node-rank $NODE_RANK' in launch
    if shutil.which("bash"):
        script_path = tmp_path / "launch.sh"
        script_path.write_text(launch)
        assert subprocess.run(["bash", "-n", str(script_path)]).returncode == 0


def test_plain_vllm_wide_ep_decode_serves_from_every_pod() -> None:
    w, v = wide_ep("vllm")
    files = build(w, v, "vllm", layout="disaggregated").files
    group, service = _docs(files["k8s/decode.yaml"])
    assert group["kind"] == "LeaderWorkerSet"
    template = group["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2 and "leaderTemplate" not in template
    script = template["workerTemplate"]["spec"]["containers"][0]["args"][0]
    for piece in (
        "--tensor-parallel-size 1 --data-parallel-size 16",
        "--data-parallel-size-local 8",
        "--data-parallel-hybrid-lb",
        '--data-parallel-address "$LWS_LEADER_ADDRESS"',
        "--data-parallel-start-rank $(($LWS_WORKER_INDEX * 8))",
    ):
        assert piece in script, piece
    assert "leaderworkerset.sigs.k8s.io/worker-index" not in service["spec"]["selector"]
    assert _docs(files["k8s/prefill.yaml"])[0]["kind"] == "Deployment"  # DP8 fits a node


def test_sglang_router_discovers_only_the_leaders_of_multi_node_replicas() -> None:
    w, v = wide_ep("sglang")
    files = build(w, v, "sglang", layout="disaggregated").files
    router = next(d for d in _docs(files["k8s/router.yaml"]) if d["kind"] == "Deployment")
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    prefill = args[args.index("--prefill-selector") + 1 : args.index("--decode-selector")]
    decode = args[args.index("--decode-selector") + 1 : args.index("--service-discovery-port")]
    assert "leaderworkerset.sigs.k8s.io/worker-index=0" in decode
    assert not any("worker-index" in a for a in prefill)
