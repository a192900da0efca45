"""Kubernetes objects for the plain `vllm`/`sglang` targets: a Deployment (or LeaderWorkerSet)
and Service per pool, and the P/D router with its pod discovery."""

from __future__ import annotations

from typing import Any

from disagg_decider.deploy import lws
from disagg_decider.deploy.engines import (
    NIXL_SIDE_CHANNEL_PORT,
    ROUTER_PORT,
    SERVE_PORT,
    SGLANG_BOOTSTRAP_ANNOTATION,
    SGLANG_BOOTSTRAP_PORT,
    default_image,
    router_command,
    serve_command,
)
from disagg_decider.deploy.plan import DeployPlan, Pool


def _labels(plan: DeployPlan, role: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": plan.name, "app.kubernetes.io/component": role}


def pool_objects(plan: DeployPlan, pool: Pool) -> list[dict[str, Any]]:
    """A Deployment (one pod per replica, GPU limit = TP) and a Service in front of it."""
    name = f"{plan.name}-{pool.role}"
    labels = _labels(plan, pool.role)
    cmd = serve_command(plan, pool, plan.model_path, plan.served_model_name, str(SERVE_PORT))
    env: list[dict[str, Any]] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {
                "secretKeyRef": {"name": "hf-token-secret", "key": "HF_TOKEN", "optional": True}
            },
        },
    ]
    ports = [{"name": "http", "containerPort": SERVE_PORT}]
    if plan.engine == "vllm" and pool.role != "colocated":
        env += [
            {
                "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
        ]
        ports.append({"name": "nixl", "containerPort": NIXL_SIDE_CHANNEL_PORT})
    if plan.engine == "sglang" and pool.role == "prefill":
        ports.append({"name": "bootstrap", "containerPort": SGLANG_BOOTSTRAP_PORT})
    container = {
        "name": "engine",
        "image": default_image(plan),
        "command": cmd[:1] if plan.engine == "vllm" else cmd[:3],
        "args": cmd[1:] if plan.engine == "vllm" else cmd[3:],
        "env": env,
        "ports": ports,
        "resources": {
            "limits": {"nvidia.com/gpu": str(pool.tp)},
            "requests": {"nvidia.com/gpu": str(pool.tp)},
        },
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "startupProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": 15,
            "failureThreshold": 120,
        },
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    pod_meta: dict[str, Any] = {"labels": labels}
    if plan.engine == "sglang" and pool.role == "prefill":
        pod_meta["annotations"] = {SGLANG_BOOTSTRAP_ANNOTATION: str(SGLANG_BOOTSTRAP_PORT)}
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
    }
    if pool.node_selector:  # the pool's GPU type (deploy/placement.py)
        pod_spec["nodeSelector"] = dict([pool.node_selector])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": pool.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": pod_meta, "spec": pod_spec},
        },
    }
    if pool.nodes > 1:  # one pod per node of a replica, grouped by a LeaderWorkerSet
        container["resources"] = {
            "limits": {"nvidia.com/gpu": str(pool.gpus_per_pod)},
            "requests": {"nvidia.com/gpu": str(pool.gpus_per_pod)},
        }
        shell = lws.shell_command(plan.engine, pool, cmd)
        container["command"], container["args"] = shell[:2], shell[2:]
        group = lws.leader_worker_set(plan.engine, pool, name, labels, pod_meta, pod_spec)
        return [group, http_service(name, lws.serving_labels(plan.engine, labels), SERVE_PORT)]
    return [deployment, http_service(name, labels, SERVE_PORT)]


def http_service(name: str, labels: dict[str, str], port: int) -> dict[str, Any]:
    """A Service in front of the pods with `labels`, on their port named http."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": labels,
            "ports": [{"name": "http", "port": port, "targetPort": "http"}],
        },
    }


def router_objects(plan: DeployPlan) -> list[dict[str, Any]]:
    """The router as a Deployment + Service.

    vLLM's NIXL prefill response names the pod that holds the KV (side-channel host = pod IP),
    so the vLLM router can address each pool through its Service. SGLang's decode server must
    reach the exact prefill pod's bootstrap server, so its router discovers pods by label.
    """
    name = f"{plan.name}-router"
    labels = _labels(plan, "router")
    objects: list[dict[str, Any]] = []
    url = {p.role: f"http://{plan.name}-{p.role}:{SERVE_PORT}" for p in plan.pools}
    if plan.engine == "sglang" and plan.disaggregated:
        cmd = [
            "python3",
            "-m",
            "sglang_router.launch_router",
            "--pd-disaggregation",
            "--service-discovery",
            "--prefill-selector",
            *_selector(plan, "prefill"),
            "--decode-selector",
            *_selector(plan, "decode"),
            "--service-discovery-port",
            str(SERVE_PORT),
            "--service-discovery-namespace",
            "$(POD_NAMESPACE)",  # Kubernetes expands it from the env below; the Role is namespaced
            "--host",
            "0.0.0.0",
            "--port",
            str(ROUTER_PORT),
        ]
        objects += _discovery_rbac(plan, name)
    elif plan.disaggregated:
        cmd = router_command(plan, [url["prefill"]], [url["decode"]])
    else:
        cmd = router_command(plan, [], [url["colocated"]])
    split = 3 if cmd[0] == "python3" else 1
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "router",
                "image": default_image(plan),
                "command": cmd[:split],
                "args": cmd[split:],
                "ports": [{"name": "http", "containerPort": ROUTER_PORT}],
            }
        ]
    }
    if plan.engine == "sglang" and plan.disaggregated:
        pod_spec["serviceAccountName"] = name
        pod_spec["containers"][0]["env"] = [
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            }
        ]
    objects += [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
        http_service(name, labels, ROUTER_PORT),
    ]
    return objects


def _selector(plan: DeployPlan, role: str) -> list[str]:
    """The SGLang router's pod selector for a role: its serving pods (LWS leaders when a
    replica spans nodes)."""
    labels = _labels(plan, role)
    if plan.pool(role).nodes > 1:
        labels = lws.serving_labels(plan.engine, labels)
    return [f"{k}={v}" for k, v in labels.items()]


def _discovery_rbac(plan: DeployPlan, name: str) -> list[dict[str, Any]]:
    """Lets the SGLang router list and watch the pool's pods, nothing else."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
    ]


def k8s_header(plan: DeployPlan, pool: Pool) -> list[str]:
    return [
        f"{plan.engine} {pool.role} pool for workload {plan.verdict.workload!r}, generated by "
        "disagg-decider.",
        f"{pool.replicas} replica(s) x {pool.layout} = {pool.gpus} GPUs (the verdict's sizing).",
        "Create the model token first: kubectl create secret generic hf-token-secret "
        "--from-literal=HF_TOKEN=...",
    ]


def router_header(plan: DeployPlan) -> list[str]:
    if plan.engine == "sglang":
        what = "SGLang router (sglang_router, shipped in the SGLang image)"
    else:
        what = (
            "vllm-router (vllm-project/router; not in the vLLM image: build one FROM it with "
            "`pip install vllm-router`, or pass --image)"
        )
    return [f"Router for workload {plan.verdict.workload!r}: {what}."]
