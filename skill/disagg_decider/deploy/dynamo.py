"""The NVIDIA Dynamo target: one DynamoGraphDeployment (DGD) for the verdict's layout.

Disaggregated: a Frontend whose KV router sends prompts with fewer uncached tokens than the
verdict's threshold to the decode worker itself (conditional disaggregation), prefill and
decode workers at the verdict's replicas and TP, and the SLA planner aimed at the workload's
TTFT/ITL. Colocated: the aggregated graph, one worker component. The current API is
`nvidia.com/v1beta1` (`spec.components`); `v1alpha1` (`spec.services`) is deprecated but served.
Key names and flags: shared/reference/dynamo_llmd.md A2-A5 and the DGD CRD in shared/schemas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from disagg_decider.deploy.engines import engine_args
from disagg_decider.deploy.plan import DeployPlan, Pool
from disagg_decider.deploy.routing import dynamo_needs_always_split
from disagg_decider.deploy.yamltext import yaml_text

ApiVersion = Literal["v1beta1", "v1alpha1"]
API_VERSIONS: tuple[str, ...] = ("v1beta1", "v1alpha1")
# The flags and planner keys below were checked against Dynamo 1.4 (see readme.VERIFIED_AGAINST):
# the JSON --router-conditional-disagg-config and the planner's ttft_ms/itl_ms names are newer
# than 1.1, where the planner silently ignores unknown keys.
DYNAMO_VERSION = "1.4.2"
RUNTIME_IMAGE = {
    "vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime",
    "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime",
    "trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime",
}
PLANNER_IMAGE = "nvcr.io/nvidia/ai-dynamo/dynamo-planner"
HF_SECRET = "hf-token-secret"
WORKER_PREFIX = {"vllm": "Vllm", "sglang": "Sglang", "trtllm": "Trtllm"}
SHARED_MEMORY = {"vllm": "16Gi", "sglang": "16Gi", "trtllm": "80Gi"}  # Dynamo's RDMA guide
# Dynamo also requires eff_isl/prompt < this ratio; 1.0 is the loosest value it accepts, yet a
# prompt with nothing cached (ratio 1) still goes remote (deploy/routing.py).
EFF_ISL_RATIO_THRESHOLD = 1.0
VLLM_KV_EVENTS = {
    "publisher": "zmq",
    "topic": "kv-events",
    "endpoint": "tcp://*:20081",
    "enable_kv_cache_events": True,
}


@dataclass(frozen=True)
class Component:
    """One DGD component, independent of the API version it is rendered in."""

    name: str
    kind: Literal["frontend", "planner", "worker", "prefill", "decode"]
    replicas: int
    image: str
    command: list[str]
    args: list[str]
    gpus: int = 0  # per pod: one node's share when the replica spans nodes
    nodes: int = 1  # multinode.nodeCount when > 1
    node_selector: tuple[str, str] | None = None


def files(plan: DeployPlan, api: ApiVersion = "v1beta1") -> dict[str, str]:
    return {"dynamo-graph.yaml": yaml_text(graph(plan, api), header(plan, api))}


def graph(plan: DeployPlan, api: ApiVersion = "v1beta1") -> dict[str, Any]:
    comps = components(plan)
    spec: dict[str, Any] = {"backendFramework": plan.engine}
    if api == "v1beta1":
        spec["components"] = [_v1beta1(plan, c) for c in comps]
    else:
        spec["services"] = {c.name: _v1alpha1(plan, c) for c in comps}
    return {
        "apiVersion": f"nvidia.com/{api}",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": plan.name},
        "spec": spec,
    }


def conditional_disagg_supported(plan: DeployPlan) -> bool:
    """Dynamo's router-side conditional disaggregation needs KV events, which SGLang lacks;
    with threshold 0 (always disaggregated) there is nothing to configure."""
    return plan.disaggregated and plan.engine != "sglang" and plan.threshold_tokens > 0


def conditional_disagg_config(plan: DeployPlan) -> dict[str, Any]:
    return {
        "policy": "isl_bounding",
        "eff_isl_threshold": plan.threshold_tokens,
        "eff_isl_ratio_threshold": EFF_ISL_RATIO_THRESHOLD,
    }


def planner_config(plan: DeployPlan) -> dict[str, Any]:
    p, d = plan.pool("prefill"), plan.pool("decode")
    return {
        "environment": "kubernetes",
        "backend": plan.engine,
        "mode": "disagg",
        "optimization_target": "sla",
        "ttft_ms": plan.ttft_ms,
        "itl_ms": plan.tpot_ms,
        "max_gpu_budget": plan.cluster_gpus,
        "min_endpoint": 1,
        "prefill_engine_num_gpu": p.tp,
        "decode_engine_num_gpu": d.tp,
        "model_name": plan.served_model_name,
        # Throughput scaling needs a pre-deployment sweep (the planner rejects "none" with it
        # on); load scaling learns online, and the replicas in the graph are its start.
        "pre_deployment_sweeping_mode": "none",
        "enable_throughput_scaling": False,
        "enable_load_scaling": True,
    }


def components(plan: DeployPlan) -> list[Component]:
    image = plan.image or f"{RUNTIME_IMAGE[plan.engine]}:{DYNAMO_VERSION}"
    out = [Component("Frontend", "frontend", 1, image, _FRONTEND_CMD, frontend_args(plan))]
    if plan.disaggregated:
        out.append(
            Component(
                "Planner",
                "planner",
                1,
                f"{PLANNER_IMAGE}:{DYNAMO_VERSION}",
                ["python3", "-m", "dynamo.planner"],
                ["--config", json.dumps(planner_config(plan), separators=(",", ":"))],
            )
        )
    for pool in plan.pools:
        out.append(_worker(plan, pool, image))
    return out


_FRONTEND_CMD = ["python3", "-m", "dynamo.frontend"]


def frontend_args(plan: DeployPlan) -> list[str]:
    args = ["--http-port", "8000", "--router-mode", "kv"]
    if not _publishes_kv_events(plan):
        return [*args, "--no-router-kv-events"]  # route on TTL-predicted cache state
    if conditional_disagg_supported(plan):
        cfg = json.dumps(conditional_disagg_config(plan), separators=(",", ":"))
        args += [
            "--router-kv-events",
            "--router-conditional-disagg",
            "--router-conditional-disagg-config",
            cfg,
        ]
    return args


def _publishes_kv_events(plan: DeployPlan) -> bool:
    return plan.engine in ("vllm", "trtllm")


def _worker(plan: DeployPlan, pool: Pool, image: str) -> Component:
    prefix = WORKER_PREFIX[plan.engine]
    if pool.role == "colocated":
        name, kind = f"{prefix}Worker", "worker"
    else:
        name, kind = f"{prefix}{pool.role.capitalize()}Worker", pool.role
    # dynamo.sglang takes SGLang's own --model-path; dynamo.vllm and dynamo.trtllm take --model
    # (dynamo.trtllm keeps --model-path only as an obsolete alias).
    model_flag = "--model-path" if plan.engine == "sglang" else "--model"
    args = [model_flag, plan.model_path, "--served-model-name", plan.served_model_name]
    args += engine_args(plan, pool)
    if pool.role != "colocated" and plan.engine != "sglang":  # SGLang's args already carry it
        args += ["--disaggregation-mode", pool.role]
    if plan.engine == "vllm":
        args += ["--kv-events-config", json.dumps(VLLM_KV_EVENTS, separators=(",", ":"))]
    if plan.engine == "trtllm":
        args += ["--publish-kv-events"]
    command = ["python3", "-m", f"dynamo.{plan.engine}"]
    return Component(
        name,
        kind,
        pool.replicas,
        image,
        command,
        args,
        gpus=pool.gpus_per_pod,
        nodes=pool.nodes,
        node_selector=pool.node_selector,
    )


def _v1beta1(plan: DeployPlan, c: Component) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": c.image,
        "command": c.command,
        "args": c.args,
    }
    if c.kind != "frontend":
        container["envFrom"] = [{"secretRef": {"name": HF_SECRET}}]
    if c.gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(c.gpus)}}
    pod: dict[str, Any] = {"containers": [container]}
    if c.node_selector:
        pod["nodeSelector"] = dict([c.node_selector])
    out: dict[str, Any] = {
        "name": c.name,
        "type": c.kind,
        "replicas": c.replicas,
        "podTemplate": {"spec": pod},
    }
    if c.nodes > 1:
        # GPUs per node in the container limit; the operator starts one pod per node and
        # adds each engine's rank flags (shared/reference: Dynamo multinode guide).
        out["multinode"] = {"nodeCount": c.nodes}
    if c.gpus:
        out["sharedMemorySize"] = SHARED_MEMORY[plan.engine]
    return out


def _v1alpha1(plan: DeployPlan, c: Component) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.kind != "frontend":
        out["envFromSecret"] = HF_SECRET
    if c.kind in ("prefill", "decode"):
        out["componentType"] = "worker"
        out["subComponentType"] = c.kind
    else:
        out["componentType"] = c.kind
    out["replicas"] = c.replicas
    if c.nodes > 1:
        out["multinode"] = {"nodeCount": c.nodes}
    if c.gpus:
        out["resources"] = {"limits": {"gpu": str(c.gpus)}}
        out["sharedMemory"] = {"size": SHARED_MEMORY[plan.engine]}
    out["extraPodSpec"] = {
        "mainContainer": {"image": c.image, "command": c.command, "args": c.args}
    }
    if c.node_selector:
        out["extraPodSpec"]["nodeSelector"] = dict([c.node_selector])
    return out


def header(plan: DeployPlan, api: ApiVersion) -> list[str]:
    v = plan.verdict
    lines = [
        f"DynamoGraphDeployment ({api}) for workload {v.workload!r}, generated by disagg-decider.",
        f"Verdict: {v.decision}. " + _layout(plan),
        "Numbers come from `decide --workload ... --format json`; regenerate rather than edit.",
    ]
    if api == "v1alpha1":
        lines.append("nvidia.com/v1alpha1 is deprecated (still served); prefer v1beta1.")
    if plan.disaggregated and conditional_disagg_supported(plan):
        lines.append(
            f"Conditional disaggregation: prompts with fewer than {plan.threshold_tokens} "
            "uncached tokens are prefilled on the decode worker (Frontend "
            "--router-conditional-disagg-config)."
        )
    elif plan.disaggregated and plan.threshold_tokens == 0 and dynamo_needs_always_split(v):
        lines.append(
            "Always disaggregated on Dynamo: the verdict's conditional layout keeps cache-cold "
            "prompts local, which Dynamo's router cannot (see README), so no conditional-disagg "
            "config; llm-d runs that layout."
        )
    elif plan.disaggregated and plan.threshold_tokens == 0:
        lines.append(
            "Always disaggregated: the verdict's layout sends every prompt to the prefill pool "
            "(no routing threshold within 1% of its goodput), so no conditional-disagg config."
        )
    elif plan.disaggregated:
        lines.append(
            "Conditional disaggregation is omitted: Dynamo's router does not support it for "
            f"SGLang yet, so every prompt goes to the prefill pool (verdict threshold: "
            f"{plan.threshold_tokens} tokens)."
        )
    if plan.disaggregated:
        lines.append(
            f"SLA planner targets: TTFT {plan.ttft_ms:g} ms, ITL {plan.tpot_ms:g} ms (p99 SLO)."
        )
    lines += multinode_notes(plan)
    for p in plan.pools:
        if p.node_selector:
            key, value = p.node_selector
            lines.append(f"{p.role} pods run on nodes labelled {key}={value}.")
    lines.append(f"Create the model token first: kubectl create secret generic {HF_SECRET} ...")
    return lines


# What the Dynamo operator adds to a multinode component, per backend (Dynamo's multinode
# deployment guide, "Backend-Specific Operator Behavior").
MULTINODE_INJECTS = {
    "sglang": "--dist-init-addr <leader>:29500 --nnodes N --node-rank R",
    "vllm": "--data-parallel-address <leader> --data-parallel-size-local L "
    "--data-parallel-rpc-port 13445 --data-parallel-start-rank S",
    "trtllm": "an mpirun launch over SSH (port 2222) on the leader, sshd on the workers",
}


def multinode_notes(plan: DeployPlan) -> list[str]:
    wide = [p for p in plan.pools if p.nodes > 1]
    if not wide:
        return []
    lines = [
        "Multinode: "
        + ", ".join(f"{p.role} replicas span {p.nodes} nodes x {p.gpus_per_pod} GPUs" for p in wide)
        + f"; the operator adds {MULTINODE_INJECTS[plan.engine]} to each pod (Grove or LWS).",
    ]
    if plan.engine == "trtllm":
        lines.append(
            "TensorRT-LLM multinode needs an SSH keypair secret (mpirun-ssh-key-...) created "
            "before this graph; see Dynamo's multinode deployment guide."
        )
    return lines


def _layout(plan: DeployPlan) -> str:
    parts = [f"{p.replicas} {p.role} x {p.layout}" for p in plan.pools]
    return f"Workers: {' + '.join(parts)} = {plan.total_gpus} GPUs."
