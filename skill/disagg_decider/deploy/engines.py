"""Engine command lines (vLLM, SGLang, TensorRT-LLM) and the plain vLLM/SGLang deployments.

The `*_args` functions are the one place a pool's numbers become engine flags; Dynamo and
llm-d reuse them, so all four targets start the same engines with the same limits.
`files` emits the `vllm`/`sglang` targets: a launch script per pool and a Kubernetes
Deployment (GPU limit = TP) per pool, plus the P/D router in front.
Flag names: vLLM `docs/features/nixl_connector_usage.md`, SGLang
`docs/advanced_features/pd_disaggregation.md` (see shared/reference/dynamo_llmd.md, C1-C2).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from disagg_decider.deploy import lws
from disagg_decider.deploy.placement import rank_flags
from disagg_decider.deploy.plan import DeployPlan, Pool
from disagg_decider.deploy.yamltext import yaml_docs_text

# Pinned defaults; every target takes --image to replace them.
VLLM_IMAGE = "vllm/vllm-openai:v0.18.2"
SGLANG_IMAGE = "lmsysorg/sglang:v0.5.17"

SERVE_PORT = 8000
NIXL_SIDE_CHANNEL_PORT = 5600  # vLLM's default; base + DP rank
DECODE_SIDE_PORT_OFFSET = 50  # decode side channels on one host start at 5650
SGLANG_BOOTSTRAP_PORT = 8998  # SGLang's default --disaggregation-bootstrap-port
LOCAL_PORT_BASE = {"prefill": 8100, "decode": 8200, "colocated": 8100}
ROUTER_PORT = 8000

# kv_role is a placeholder for NixlConnector (the proxy decides who prefills); kv_both is what
# vLLM's, Dynamo's and llm-d's own examples use on both sides.
NIXL_KV_TRANSFER = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def nixl_kv_transfer_json() -> str:
    return json.dumps(NIXL_KV_TRANSFER, separators=(",", ":"))


def vllm_args(plan: DeployPlan, pool: Pool) -> list[str]:
    """vLLM engine flags for one pool (no model, host or port: callers add those)."""
    args = ["--tensor-parallel-size", str(pool.attention_tp)]
    if pool.dp > 1:
        args += ["--data-parallel-size", str(pool.dp)]
    if pool.ep > 1:
        args += ["--enable-expert-parallel"]
    if pool.max_num_seqs is not None:
        args += ["--max-num-seqs", str(pool.max_num_seqs)]
    args += ["--max-num-batched-tokens", str(pool.max_num_batched_tokens)]
    args += ["--gpu-memory-utilization", f"{plan.hbm_utilization:g}"]
    if plan.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if pool.role != "colocated":
        args += ["--kv-transfer-config", nixl_kv_transfer_json()]
    return args


def sglang_args(plan: DeployPlan, pool: Pool, *, bootstrap_port: int = SGLANG_BOOTSTRAP_PORT):
    """SGLang server flags for one pool; P/D pools use NIXL for the KV transfer."""
    args = ["--tp", str(pool.tp)]
    if pool.dp > 1:
        args += ["--dp", str(pool.dp), "--enable-dp-attention"]
    if pool.ep > 1:
        # DeepEP: low-latency kernels for decode, normal (high-throughput) ones for prefill.
        mode = {"decode": "low_latency", "prefill": "normal"}.get(pool.role, "auto")
        args += ["--ep-size", str(pool.ep), "--moe-a2a-backend", "deepep", "--deepep-mode", mode]
    if pool.max_num_seqs is not None:
        args += ["--max-running-requests", str(pool.max_num_seqs)]
    if pool.role != "decode":  # a P/D decode server never prefills, so has no chunk budget
        args += ["--chunked-prefill-size", str(pool.max_num_batched_tokens)]
    args += ["--mem-fraction-static", f"{plan.hbm_utilization:g}"]
    if plan.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if pool.role != "colocated":
        args += [
            "--disaggregation-mode",
            pool.role,
            "--disaggregation-transfer-backend",
            "nixl",
            "--disaggregation-bootstrap-port",
            str(bootstrap_port),
        ]
    return args


def trtllm_args(plan: DeployPlan, pool: Pool) -> list[str]:
    """dynamo.trtllm flags; the KV transfer backend lives in TensorRT-LLM's engine config."""
    args = ["--tensor-parallel-size", str(pool.tp)]
    if pool.ep > 1:
        args += ["--expert-parallel-size", str(pool.ep)]
    if pool.dp > 1:
        args += ["--enable-attention-dp"]
    if pool.max_num_seqs is not None:
        args += ["--max-batch-size", str(pool.max_num_seqs)]
    args += ["--max-num-tokens", str(pool.max_num_batched_tokens)]
    return args


def engine_args(plan: DeployPlan, pool: Pool) -> list[str]:
    return {"vllm": vllm_args, "sglang": sglang_args, "trtllm": trtllm_args}[plan.engine](
        plan, pool
    )


def default_image(plan: DeployPlan) -> str:
    return plan.image or (SGLANG_IMAGE if plan.engine == "sglang" else VLLM_IMAGE)


# --- the vllm / sglang targets ----------------------------------------------------------------


def files(plan: DeployPlan) -> dict[str, str]:
    out = {"launch.sh": launch_script(plan)}
    for pool in plan.pools:
        out[f"k8s/{pool.role}.yaml"] = yaml_docs_text(
            pool_objects(plan, pool), _k8s_header(plan, pool)
        )
    out["k8s/router.yaml"] = yaml_docs_text(router_objects(plan), _router_header(plan))
    return out


def serve_command(plan: DeployPlan, pool: Pool, model: str, served: str, port: str) -> list[str]:
    """The server command line for one replica; `model`/`served`/`port` may be shell words."""
    if plan.engine == "sglang":
        head = ["python3", "-m", "sglang.launch_server", "--model-path", model]
        rest = ["--served-model-name", served, "--host", "0.0.0.0", "--port", port]
        return [*head, *rest, *sglang_args(plan, pool)]
    head = ["vllm", "serve", model, "--served-model-name", served]
    return [*head, "--host", "0.0.0.0", "--port", port, *vllm_args(plan, pool)]


# Each engine's router: its launcher and the flags that turn on prefill/decode routing. The
# two take the same --prefill/--decode/--worker-urls arguments. vllm-router's --kv-connector
# already defaults to nixl; it is spelled out so the transfer backend is visible.
ROUTERS = {
    "sglang": (("python3", "-m", "sglang_router.launch_router"), ("--pd-disaggregation",)),
    "vllm": (("vllm-router",), ("--vllm-pd-disaggregation", "--kv-connector", "nixl")),
}
# The SGLang router's Kubernetes discovery: pods are reached on this port (its default is 80),
# and a prefill pod's bootstrap port is read from this annotation.
SGLANG_BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"


def router_command(plan: DeployPlan, prefill: list[str], decode: list[str]) -> list[str]:
    """The load balancer / P/D router; `prefill`/`decode` are URLs (decode = all for colocated)."""
    launcher, pd_flags = ROUTERS["sglang" if plan.engine == "sglang" else "vllm"]
    cmd = list(launcher)
    if plan.disaggregated:
        cmd += pd_flags
        for url in prefill:
            cmd += ["--prefill", url]
        for url in decode:
            cmd += ["--decode", url]
    else:
        cmd += ["--worker-urls", *decode]
    return [*cmd, "--host", "0.0.0.0", "--port", str(ROUTER_PORT)]


def _shell(words: list[str], raw: set[str]) -> str:
    """Quote every word except the shell expansions listed in `raw`."""
    return " ".join(w if w in raw else shlex.quote(w) for w in words)


def launch_script(plan: DeployPlan) -> str:
    """One script for bare metal: start one replica of a pool, the router, or all on one node."""
    engine = plan.engine
    v = plan.verdict
    layout = ", ".join(f"{p.replicas} {p.role} x {p.layout}" for p in plan.pools)
    raw = {'"$MODEL"', '"$SERVED_MODEL_NAME"', '"$port"'}
    lines = [
        "#!/usr/bin/env bash",
        f"# {engine} launch commands generated by disagg-decider for workload {v.workload!r}.",
        f"# Verdict: {v.decision}; pools: {layout} ({plan.total_gpus} GPUs).",
        "# The numbers come from `decide --workload ... --format json`; regenerate, don't edit.",
        "#",
        "# Usage:",
    ]
    for pool in plan.pools:
        lines.append(
            f"#   ./launch.sh {pool.role} GPU_IDS PORT{_third_arg(plan, pool)[0]}"
            f"   one {pool.role} server on {pool.tp} GPU(s); run {pool.replicas} of them"
            if pool.nodes == 1
            else f"#   ./launch.sh {pool.role} GPU_IDS PORT{_third_arg(plan, pool)[0]}"
            f"   one node ({pool.gpus_per_pod} GPUs) of a {pool.role} replica spanning "
            f"{pool.nodes} nodes: run it on each with NODE_RANK=0..{pool.nodes - 1} and "
            "LEADER_ADDR=<node 0's address>"
        )
    lines += [
        "#   ./launch.sh router PREFILL_URLS DECODE_URLS   comma-separated http://host:port lists"
        if plan.disaggregated
        else "#   ./launch.sh router WORKER_URLS   comma-separated http://host:port list",
        "#   ./launch.sh local    every replica and the router on this node"
        f" (needs {plan.total_gpus} GPUs here)",
        "# Set HOST_IP to this node's address reachable from the other pool"
        + (" (NIXL side channel)." if engine == "vllm" else " (bootstrap server)."),
        "set -euo pipefail",
        "",
        f'MODEL="${{MODEL:-{plan.model_path}}}"',
        f'SERVED_MODEL_NAME="${{SERVED_MODEL_NAME:-{plan.served_model_name}}}"',
        'HOST_IP="${HOST_IP:-127.0.0.1}"',
    ]
    if plan.multinode:  # which node of a multi-node replica this is, and where node 0 runs
        lines += ['NODE_RANK="${NODE_RANK:-0}"', 'LEADER_ADDR="${LEADER_ADDR:-$HOST_IP}"']
    lines += [
        "",
    ]
    for pool in plan.pools:
        lines += _pool_function(plan, pool, raw)
    lines += _router_function(plan)
    lines += _local_function(plan)
    lines += _dispatch(plan)
    return "\n".join(lines) + "\n"


def _pool_function(plan: DeployPlan, pool: Pool, raw: set[str]) -> list[str]:
    cmd = serve_command(plan, pool, '"$MODEL"', '"$SERVED_MODEL_NAME"', '"$port"')
    env = ['CUDA_VISIBLE_DEVICES="$gpus"']
    params = 'local gpus="$1" port="$2"'
    if plan.engine == "vllm" and pool.role != "colocated":
        params += ' side_port="$3"'
        env += [
            'VLLM_NIXL_SIDE_CHANNEL_HOST="$HOST_IP"',
            'VLLM_NIXL_SIDE_CHANNEL_PORT="$side_port"',
        ]
    if plan.engine == "sglang" and pool.role == "prefill":
        params += ' bootstrap_port="$3"'
        i = cmd.index("--disaggregation-bootstrap-port")
        cmd[i + 1] = '"$bootstrap_port"'
        raw = raw | {'"$bootstrap_port"'}
    if plan.engine == "sglang" and pool.role == "decode":
        i = cmd.index("--disaggregation-bootstrap-port")
        del cmd[i : i + 2]  # decode servers learn each prefill's port from the router
    if pool.nodes > 1:  # this node's part of a replica spanning pool.nodes nodes
        flags = rank_flags(plan.engine, pool, '"$LEADER_ADDR"', "$NODE_RANK")
        cmd += flags
        raw = raw | {f for f in flags if "$" in f}
    body = " \\\n    ".join([" ".join(env), _shell(cmd, raw)])
    return [f"{pool.role}() {{", f"  {params}", f"  {body}", "}", ""]


def _third_arg(plan: DeployPlan, pool: Pool) -> tuple[str, int | None]:
    """The per-replica port beyond HTTP: vLLM's NIXL side channel, SGLang prefill's bootstrap."""
    if plan.engine == "vllm" and pool.role == "prefill":
        return " NIXL_SIDE_PORT", NIXL_SIDE_CHANNEL_PORT
    if plan.engine == "vllm" and pool.role == "decode":
        return " NIXL_SIDE_PORT", NIXL_SIDE_CHANNEL_PORT + DECODE_SIDE_PORT_OFFSET
    if plan.engine == "sglang" and pool.role == "prefill":
        return " BOOTSTRAP_PORT", SGLANG_BOOTSTRAP_PORT
    return "", None


def _router_function(plan: DeployPlan) -> list[str]:
    lines = ["router() {"]
    if plan.disaggregated:
        lines += ['  local prefill_urls="$1" decode_urls="$2" args=()', "  local url"]
        if plan.engine == "sglang":
            # SGLang's router takes each prefill's bootstrap port after its URL.
            lines += [
                "  for url in ${prefill_urls//,/ }; do",
                '    args+=(--prefill "${url%%#*}")',
                '    if [[ "$url" == *#* ]]; then args+=("${url##*#}"); fi',
                "  done",
            ]
        else:
            lines += ['  for url in ${prefill_urls//,/ }; do args+=(--prefill "$url"); done']
        lines += ['  for url in ${decode_urls//,/ }; do args+=(--decode "$url"); done']
        head = router_command(plan, [], [])
    else:
        lines += ['  local worker_urls="$1"', "  local args=(--worker-urls ${worker_urls//,/ })"]
        head = [w for w in router_command(plan, [], []) if w != "--worker-urls"]
    cut = head.index("--host")
    lines.append("  " + " ".join([*map(shlex.quote, head[:cut]), '"${args[@]}"', *head[cut:]]))
    return [*lines, "}", ""]


def _local_function(plan: DeployPlan) -> list[str]:
    lines = ["local_all() {"]
    if plan.total_gpus > plan.gpus_per_node:
        lines += [
            f'  echo "the pools need {plan.total_gpus} GPUs, more than one node '
            f'({plan.gpus_per_node}); start each pool on its own hosts" >&2',
            "  exit 2",
            "}",
            "",
        ]
        return lines
    lines += ["  trap 'kill 0' EXIT", "  local urls_prefill=() urls_decode=()"]
    gpu = 0
    for pool in plan.pools:
        for i in range(pool.replicas):
            ids = ",".join(str(g) for g in range(gpu, gpu + pool.tp))
            gpu += pool.tp
            port = LOCAL_PORT_BASE[pool.role] + i
            extra = ""
            url = f"http://127.0.0.1:{port}"
            if plan.engine == "vllm" and pool.role != "colocated":
                offset = 0 if pool.role == "prefill" else DECODE_SIDE_PORT_OFFSET
                side = NIXL_SIDE_CHANNEL_PORT + offset + i
                extra = f" {side}"
            if plan.engine == "sglang" and pool.role == "prefill":
                boot = SGLANG_BOOTSTRAP_PORT + i
                extra = f" {boot}"
                url += f"#{boot}"
            bucket = "urls_prefill" if pool.role == "prefill" else "urls_decode"
            lines.append(f"  {pool.role} {ids} {port}{extra} &")
            lines.append(f'  {bucket}+=("{url}")')
    lines += [
        '  for url in "${urls_prefill[@]}" "${urls_decode[@]}"; do',
        '    until curl -sf "${url%%#*}/health" >/dev/null; do sleep 5; done',
        "  done",
    ]
    if plan.disaggregated:
        lines.append(
            '  router "$(IFS=,; echo "${urls_prefill[*]}")" "$(IFS=,; echo "${urls_decode[*]}")"'
        )
    else:
        lines.append('  router "$(IFS=,; echo "${urls_decode[*]}")"')
    return [*lines, "}", ""]


def _dispatch(plan: DeployPlan) -> list[str]:
    lines = ['case "${1:-}" in']
    for pool in plan.pools:
        gpus = ",".join(str(g) for g in range(pool.gpus_per_pod))
        defaults = [gpus, str(LOCAL_PORT_BASE[pool.role])]
        third = _third_arg(plan, pool)[1]
        if third is not None:
            defaults.append(str(third))
        call = " ".join(f'"${{{k + 2}:-{d}}}"' for k, d in enumerate(defaults))
        lines.append(f"  {pool.role}) {pool.role} {call} ;;")
    lines += [
        '  router) shift; router "$@" ;;',
        "  local) local_all ;;",
        '  *) sed -n "2,/^set -euo/p" "$0" | sed "$ d"; exit 2 ;;',
        "esac",
    ]
    return lines


# --- Kubernetes -------------------------------------------------------------------------------


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


def _k8s_header(plan: DeployPlan, pool: Pool) -> list[str]:
    return [
        f"{plan.engine} {pool.role} pool for workload {plan.verdict.workload!r}, generated by "
        "disagg-decider.",
        f"{pool.replicas} replica(s) x {pool.layout} = {pool.gpus} GPUs (the verdict's sizing).",
        "Create the model token first: kubectl create secret generic hf-token-secret "
        "--from-literal=HF_TOKEN=...",
    ]


def _router_header(plan: DeployPlan) -> list[str]:
    if plan.engine == "sglang":
        what = "SGLang router (sglang_router, shipped in the SGLang image)"
    else:
        what = (
            "vllm-router (vllm-project/router; not in the vLLM image: build one FROM it with "
            "`pip install vllm-router`, or pass --image)"
        )
    return [f"Router for workload {plan.verdict.workload!r}: {what}."]
