"""The llm-d target: modelservice chart values, the EPP scheduler config and autoscalers.

Disaggregated: prefill and decode roles at the verdict's replicas and TP behind the routing
sidecar (NIXL connector), and an `EndpointPickerConfig` whose `prefix-based-pd-decider` sends a
request to the prefill pool only when its uncached tokens reach the verdict's threshold
(`nonCachedTokens`; 0 would switch P/D off), under `disagg-profile-handler` (the older
`pd-profile-handler` is deprecated and never emitted). Each role gets a KEDA ScaledObject on the
signal that saturates it: queue depth for prefill, KV-cache utilisation for decode.
Colocated: one role, no sidecar, no P/D. Keys: shared/reference/dynamo_llmd.md B1-B5 and the
modelservice values schema in shared/schemas/llm-d.
"""

from __future__ import annotations

import shlex
from typing import Any

from disagg_decider.deploy.engines import (
    NIXL_SIDE_CHANNEL_PORT,
    SGLANG_BOOTSTRAP_PORT,
    SGLANG_IMAGE,
    sglang_args,
    vllm_args,
)
from disagg_decider.deploy.placement import LWS_LEADER, LWS_RANK, rank_flags
from disagg_decider.deploy.plan import DeployPlan, Pool
from disagg_decider.deploy.yamltext import yaml_docs_text, yaml_text

LLMD_VLLM_IMAGE = "ghcr.io/llm-d/llm-d-cuda:v0.6.0"
SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"
SERVICE_PORT = 8000  # what the gateway calls: the sidecar on decode pods, vLLM elsewhere
ENGINE_PORT = 8200  # vLLM behind the sidecar (routing.proxy.targetPort)
HF_SECRET = "hf-token-secret"
PROMETHEUS = "http://prometheus-kube-prometheus-prometheus.monitoring.svc:9090"
# Saturation thresholds: llm-d's WVA defaults (queueLengthThreshold 5, kvCacheThreshold 0.80)
# and its token-aware KEDA guide (decode on vllm:kv_cache_usage_perc at 0.8).
QUEUE_DEPTH_PER_REPLICA = 5
KV_UTILIZATION_PER_REPLICA = 0.8
METRICS = {
    "vllm": {"queue": "vllm:num_requests_waiting", "kv": "vllm:kv_cache_usage_perc"},
    "sglang": {"queue": "sglang:num_queue_reqs", "kv": "sglang:token_usage"},
}


def files(plan: DeployPlan) -> dict[str, str]:
    return {
        "modelservice-values.yaml": yaml_text(values(plan), _values_header(plan)),
        "epp-config.yaml": yaml_text(epp_config(plan), _epp_header(plan)),
        "router-values.yaml": yaml_text(router_values(plan), _router_header(plan)),
        "autoscaling.yaml": yaml_docs_text(scaled_objects(plan), _autoscaling_header(plan)),
    }


def values(plan: DeployPlan) -> dict[str, Any]:
    """Values for the llm-d-modelservice chart; replicas and TP are the verdict's."""
    out: dict[str, Any] = {
        "fullnameOverride": plan.name,
        # true: every role is a LeaderWorkerSet (one pod per node of a replica), as llm-d's
        # wide-EP well-lit path runs them; single-node roles get groups of one.
        "multinode": plan.multinode,
        "modelArtifacts": {
            "uri": f"hf://{plan.model_path}",
            "name": plan.served_model_name,
            "size": f"{plan.model_size_gib}Gi",
            "authSecretName": HF_SECRET,
            "labels": {
                "llm-d.ai/inference-serving": "true",
                "llm-d.ai/model": plan.name,
            },
        },
        "routing": {
            "servicePort": SERVICE_PORT,
            "proxy": _proxy(plan),
        },
    }
    if plan.disaggregated:
        out["decode"] = _role(plan, plan.pool("decode"))
        out["prefill"] = _role(plan, plan.pool("prefill"))
    else:
        out["decode"] = _role(plan, plan.pool("colocated"))
        out["prefill"] = {"create": False}
    return out


def _proxy(plan: DeployPlan) -> dict[str, Any]:
    if not plan.disaggregated:
        return {"enabled": False}
    return {
        "enabled": True,
        "image": SIDECAR_IMAGE,
        "connector": "sglang" if plan.engine == "sglang" else "nixlv2",
        "secure": False,
        "targetPort": ENGINE_PORT,
    }


def _engine_port(plan: DeployPlan, pool: Pool) -> int:
    """Only the decode pods of a P/D pair run the sidecar, so only they move the engine."""
    return ENGINE_PORT if plan.disaggregated and pool.role == "decode" else SERVICE_PORT


def _role(plan: DeployPlan, pool: Pool) -> dict[str, Any]:
    port = _engine_port(plan, pool)
    container: dict[str, Any] = {"name": plan.engine}
    if plan.engine == "sglang":
        container |= {
            "image": plan.image or SGLANG_IMAGE,
            "modelCommand": "custom",
            "command": ["python3", "-m", "sglang.launch_server"],
            "args": [
                "--model-path",
                plan.model_path,
                "--served-model-name",
                plan.served_model_name,
                "--host",
                "0.0.0.0",
                "--port",
                str(port),
                *sglang_args(plan, pool),
            ],
        }
    elif pool.nodes > 1:
        container |= {
            "image": plan.image or LLMD_VLLM_IMAGE,
            "modelCommand": "custom",
            "command": ["/bin/sh", "-c"],
            "args": [hybrid_dp_script(plan, pool, port)],
        }
    else:
        container |= {
            "image": plan.image or LLMD_VLLM_IMAGE,
            "modelCommand": "vllmServe",
            "args": ["--port", str(port), *vllm_args(plan, pool)],
        }
    env: list[dict[str, Any]] = []
    ports = [{"containerPort": port, "name": "engine", "protocol": "TCP"}]
    if plan.disaggregated and plan.engine == "vllm":
        env += [
            {
                "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
        ]
        ports.append({"containerPort": NIXL_SIDE_CHANNEL_PORT, "name": "nixl", "protocol": "TCP"})
    if plan.disaggregated and plan.engine == "sglang" and pool.role == "prefill":
        ports.append(
            {"containerPort": SGLANG_BOOTSTRAP_PORT, "name": "bootstrap", "protocol": "TCP"}
        )
    container |= {
        "env": env,
        "ports": ports,
        "mountModelVolume": True,
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    out = {
        "create": True,
        "replicas": pool.replicas,
        # Attention TP per rank, DP ranks per replica and per pod, pods per replica (the
        # chart's LWS group size, GPUs per pod = dataLocal x tensor): modelservice values schema.
        "parallelism": _parallelism(pool),
        # false: the chart keeps `replicas`; set true once autoscaling.yaml owns them.
        "autoscaling": {"enabled": False},
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
    }
    if pool.node_selector:
        # The chart turns acceleratorTypes into a required node affinity, for Deployments and
        # LeaderWorkerSets alike (templates/_helpers.tpl, llm-d-modelservice.acceleratorTypes).
        key, value = pool.node_selector
        out["acceleratorTypes"] = {"labelKey": key, "labelValues": [value]}
    return out


def _parallelism(pool: Pool) -> dict[str, int]:
    if pool.nodes > 1:
        return {
            "tensor": pool.attention_tp,
            "data": pool.dp,
            "dataLocal": pool.dp_local,
            "workers": pool.nodes,
        }
    if pool.dp > 1:
        return {"tensor": pool.attention_tp, "data": pool.dp, "dataLocal": pool.dp}
    return {"tensor": pool.tp}


def hybrid_dp_script(plan: DeployPlan, pool: Pool, port: int) -> str:
    """One pod per node of a replica, each running vLLM's API server for its own DP ranks
    (--data-parallel-hybrid-lb) so the EPP can route to every pod; rank 0's pod (the LWS
    leader) coordinates. LWS sets LWS_LEADER_ADDRESS and LWS_WORKER_INDEX in every pod."""
    args = [
        "vllm",
        "serve",
        plan.model_path,
        "--served-model-name",
        plan.served_model_name,
        "--port",
        str(port),
        *vllm_args(plan, pool),
    ]
    fixed = " ".join(shlex.quote(a) for a in args)
    return f"exec {fixed} " + " ".join(rank_flags("vllm", pool, LWS_LEADER, LWS_RANK))


def epp_config(plan: DeployPlan) -> dict[str, Any]:
    """The Endpoint Picker (scheduler) configuration, llm-d.ai/v1alpha1."""
    scorers = [
        {"type": "prefix-cache-scorer"},
        {"type": "queue-scorer"},
        {"type": "kv-cache-utilization-scorer"},
        {"type": "max-score-picker"},
    ]
    weights = [
        {"pluginRef": "max-score-picker"},
        {"pluginRef": "prefix-cache-scorer", "weight": 2},
        {"pluginRef": "queue-scorer", "weight": 1},
        {"pluginRef": "kv-cache-utilization-scorer", "weight": 1},
    ]
    if not plan.disaggregated:
        return {
            "apiVersion": "llm-d.ai/v1alpha1",
            "kind": "EndpointPickerConfig",
            "plugins": [*scorers, {"type": "single-profile-handler"}],
            "schedulingProfiles": [{"name": "default", "plugins": weights}],
        }
    plugins = [
        *scorers,
        {"type": "prefill-filter"},
        {"type": "decode-filter"},
        *_decider(plan),
    ]
    return {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *weights]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, *weights]},
        ],
    }


def router_values(plan: DeployPlan) -> dict[str, Any]:
    """Values for llm-d's router (EPP) chart, embedding epp-config.yaml as the guide does."""
    return {
        "router": {
            "epp": {
                "pluginsConfigFile": "epp-config.yaml",
                "pluginsCustomConfig": {"epp-config.yaml": yaml_text(epp_config(plan))},
            },
            "modelServers": {"matchLabels": {"llm-d.ai/model": plan.name}},
        }
    }


def scaled_objects(plan: DeployPlan) -> list[dict[str, Any]]:
    """One KEDA ScaledObject per role, floored at the verdict's replicas, capped by the cluster.

    Prefill is a rate problem (requests queue before it), decode an occupancy problem (KV fills
    up); the colocated role watches both. KEDA's AverageValue target gives
    replicas = ceil(sum(metric) / threshold).
    """
    names = METRICS["sglang" if plan.engine == "sglang" else "vllm"]
    if not plan.disaggregated:
        pool = plan.pool("colocated")
        triggers = [_trigger(plan, "decode", names["queue"], QUEUE_DEPTH_PER_REPLICA)]
        triggers.append(_trigger(plan, "decode", names["kv"], KV_UTILIZATION_PER_REPLICA))
        return [_scaled_object(plan, "decode", pool, _max_replicas(plan, pool), triggers)]
    out = []
    for pool, metric, threshold in (
        (plan.pool("prefill"), names["queue"], QUEUE_DEPTH_PER_REPLICA),
        (plan.pool("decode"), names["kv"], KV_UTILIZATION_PER_REPLICA),
    ):
        trigger = _trigger(plan, pool.role, metric, threshold)
        out.append(_scaled_object(plan, pool.role, pool, _max_replicas(plan, pool), [trigger]))
    return out


def _max_replicas(plan: DeployPlan, pool: Pool) -> int:
    """As many replicas as the GPUs the other pools leave free allow."""
    others = plan.total_gpus - pool.gpus
    return max(pool.replicas, (plan.cluster_gpus - others) // pool.tp)


def _trigger(plan: DeployPlan, role: str, metric: str, threshold: float) -> dict[str, Any]:
    return {
        "type": "prometheus",
        "metadata": {
            "serverAddress": PROMETHEUS,
            "query": f'sum({metric}{{pod=~"{plan.name}-{role}-.*"}})',
            "threshold": f"{threshold:g}",
        },
    }


def _scaled_object(
    plan: DeployPlan, role: str, pool: Pool, max_replicas: int, triggers: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": f"{plan.name}-{role}-scaler"},
        "spec": {
            # The chart's workload per role: a LeaderWorkerSet in multinode mode (LWS has the
            # scale subresource KEDA needs), else a Deployment.
            "scaleTargetRef": (
                {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"}
                if plan.multinode
                else {"apiVersion": "apps/v1", "kind": "Deployment"}
            )
            | {"name": f"{plan.name}-{role}"},
            "minReplicaCount": pool.replicas,
            "maxReplicaCount": max_replicas,
            "pollingInterval": 15,
            "cooldownPeriod": 300,
            "triggers": triggers,
        },
    }


def _values_header(plan: DeployPlan) -> list[str]:
    v = plan.verdict
    parts = " + ".join(f"{p.replicas} {p.role} x {p.layout}" for p in plan.pools)
    lines = [
        f"llm-d-modelservice values for workload {v.workload!r}, generated by disagg-decider.",
        f"Verdict: {v.decision}. Pools: {parts} = {plan.total_gpus} GPUs.",
        "helm install <release> llm-d-modelservice/llm-d-modelservice -f modelservice-values.yaml",
    ]
    if not plan.disaggregated:
        lines.append(
            "Colocated: a single (decode) role serves prefill and decode; no P/D, no sidecar."
        )
    if plan.multinode:
        wide = ", ".join(
            f"{p.role} {p.nodes} pods x {p.gpus_per_pod} GPUs" for p in plan.pools if p.nodes > 1
        )
        lines.append(
            f"multinode: LeaderWorkerSets (install the LWS controller first); per replica: {wide}."
        )
    for p in plan.pools:
        if p.node_selector:
            key, value = p.node_selector
            lines.append(f"{p.role} pods need nodes labelled {key}={value}.")
    return lines


def _decider(plan: DeployPlan) -> list[dict[str, Any]]:
    """Selective P/D at the verdict's threshold; every request to prefill when it is 0
    (`nonCachedTokens: 0` would mean the opposite, never P/D)."""
    if plan.threshold_tokens == 0:
        decider: dict[str, Any] = {"type": "always-disagg-pd-decider"}
    else:
        decider = {
            "type": "prefix-based-pd-decider",
            "parameters": {"nonCachedTokens": plan.threshold_tokens},
        }
    return [
        decider,
        {
            "type": "disagg-profile-handler",
            "parameters": {"deciders": {"prefill": decider["type"]}},
        },
    ]


def _epp_header(plan: DeployPlan) -> list[str]:
    if not plan.disaggregated:
        return ["EndpointPickerConfig: one scheduling profile, no P/D (colocated verdict)."]
    if plan.threshold_tokens == 0:
        return [
            "EndpointPickerConfig: every request goes to the prefill pool (always-disagg-pd-",
            "decider): the verdict's layout is always-disaggregated, no threshold within 1%.",
        ]
    return [
        "EndpointPickerConfig: selective P/D. A request goes to the prefill pool only when its",
        f"uncached prompt tokens on the chosen decode pod reach nonCachedTokens = "
        f"{plan.threshold_tokens}",
        "(the verdict's conditional_disagg_threshold_tokens). Note: nonCachedTokens 0 means",
        "'never P/D', the opposite of the deprecated pd-profile-handler's threshold 0.",
    ]


def _router_header(plan: DeployPlan) -> list[str]:
    return [
        "Values for llm-d's router/EPP chart, with epp-config.yaml embedded (same content).",
    ]


def _autoscaling_header(plan: DeployPlan) -> list[str]:
    return [
        "KEDA ScaledObjects, one per role. minReplicaCount is the verdict's sizing for the",
        "declared rate; maxReplicaCount is what the cluster's GPUs leave room for.",
        "Before applying, set <role>.autoscaling.enabled: true in modelservice-values.yaml so",
        "Helm stops resetting replicas. Needs KEDA and Prometheus scraping the model servers.",
    ]
