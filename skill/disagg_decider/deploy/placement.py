"""Where each pool's pods land: nodes per replica (multi-node wide EP) and GPU-type selection.

A replica wider than a node (DeepSeek-V3 decode DP16/EP16 on 2 x 8 H200) runs as one engine
spread over `nodes` pods, one per node, each holding `gpus_per_node` GPUs: Dynamo's
`multinode.nodeCount` (the operator starts the ranks), llm-d's LeaderWorkerSet (the chart's
`multinode: true`). A heterogeneous cluster (B200 prefill, H200 decode) pins each pool to its
GPU type with a node selector on the GPU Feature Discovery product label.
"""

from __future__ import annotations

import re
from dataclasses import replace

from disagg_decider.errors import UserError, excerpt

# NVIDIA GPU Feature Discovery labels every GPU node with nvidia.com/gpu.product: the NVML
# device name with spaces turned into dashes (k8s-device-plugin, "NVIDIA H100 80GB HBM3" ->
# "NVIDIA-H100-80GB-HBM3"). The names below are those devices' NVML names; variants exist
# (H200 NVL, SXM suffixes), so `--gpu-product ROLE=VALUE` replaces them.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_PRODUCT = {
    "a100-80g": "NVIDIA-A100-SXM4-80GB",
    "h100": "NVIDIA-H100-80GB-HBM3",
    "h800": "NVIDIA-H800",
    "h200": "NVIDIA-H200",
    "b200": "NVIDIA-B200",
    "gb200": "NVIDIA-GB200",
    "l40s": "NVIDIA-L40S",
}
ROLES = ("prefill", "decode", "colocated")
# vLLM's data-parallel coordinator (--data-parallel-rpc-port); any free port works, this is
# the one llm-d's wide-EP guide uses.
DP_RPC_PORT = 5555
# SGLang's torch.distributed rendezvous on the leader (--dist-init-addr HOST:PORT); the port
# the Dynamo operator injects for SGLang multinode workers.
SGLANG_DIST_PORT = 29500


# LeaderWorkerSet: the label on every pod of a group (0 = the leader) and the env it sets in
# every container (kubernetes-sigs/lws; llm-d guides/wide-ep-lws use the same names).
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_LEADER = '"$LWS_LEADER_ADDRESS"'
LWS_RANK = "$LWS_WORKER_INDEX"


def rank_flags(engine: str, pool, leader: str, rank: str) -> list[str]:
    """The flags one pod (node `rank` of a replica led by `leader`, both shell words) adds to
    the replica's command: vLLM's hybrid data parallelism (an API server per node for its own
    DP ranks), SGLang's torch.distributed rendezvous (HTTP on node 0 only)."""
    if engine == "sglang":
        return [
            "--dist-init-addr",
            f"{leader}:{SGLANG_DIST_PORT}",
            "--nnodes",
            str(pool.nodes),
            "--node-rank",
            rank,
        ]
    return [
        "--data-parallel-size-local",
        str(pool.dp_local),
        "--data-parallel-rpc-port",
        str(DP_RPC_PORT),
        "--data-parallel-hybrid-lb",
        "--data-parallel-address",
        leader,
        "--data-parallel-start-rank",
        f"$(({rank} * {pool.dp_local}))",
    ]


def nodes_per_replica(gpus: int, gpus_per_node: int) -> int:
    """Nodes one replica spans: 1 when it fits on a node, else whole nodes."""
    return 1 if gpus <= gpus_per_node else -(-gpus // gpus_per_node)


def multi_node_errors(pool, gpus_per_node: int, target: str, engine: str) -> list[str]:
    """Why a replica wider than a node cannot be emitted for this target, if it cannot."""
    if pool.tp <= gpus_per_node:
        return []
    where = f"{pool.role} pool: {pool.layout} ({pool.tp} GPUs per replica, {gpus_per_node} a node)"
    if pool.tp % gpus_per_node or gpus_per_node % pool.attention_tp:
        return [
            f"{where}: a replica wider than a node must fill whole nodes with whole DP ranks "
            "(GPUs per replica a multiple of cluster.gpus_per_node, attention TP dividing it)"
        ]
    if target == "llm-d" and engine == "sglang":
        return [
            f"{where} spans {pool.tp // gpus_per_node} nodes: llm-d's wide-EP path "
            "(LeaderWorkerSet, every pod serving its local DP ranks) runs vLLM's hybrid "
            "data-parallel load balancing; SGLang serves HTTP from node 0 only, and the chart "
            "labels every pod for the EPP. Use --target dynamo or --target sglang (a "
            "LeaderWorkerSet whose Service selects the leaders) for multi-node SGLang"
        ]
    return []


# Kubernetes label syntax: an optional DNS-subdomain prefix and a name of at most 63
# characters (alphanumerics, '-', '_', '.'; alphanumeric at both ends); values the same or empty.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
LABEL_VALUE = re.compile(rf"^{_NAME}$")


def check_label(key: str, values: dict[str, str]) -> None:
    if not LABEL_KEY.match(key):
        raise UserError(
            f"--gpu-label-key {excerpt(key)}: not a Kubernetes label key (optional prefix/, "
            "then up to 63 letters, digits, '-', '_' or '.'), e.g. nvidia.com/gpu.product"
        )
    for role, value in values.items():
        if not LABEL_VALUE.match(value):
            raise UserError(
                f"--gpu-product {role}={excerpt(value)}: not a Kubernetes label value (up to 63 "
                "letters, digits, '-', '_' or '.', alphanumeric at both ends), e.g. NVIDIA-H200"
            )


def parse_gpu_products(items: list[str]) -> dict[str, str]:
    """`--gpu-product VALUE` (every pool) or `--gpu-product ROLE=VALUE`."""
    out: dict[str, str] = {}
    for item in items:
        role, sep, value = item.partition("=")
        if not sep:
            out.update({r: item for r in ROLES})
            continue
        if role not in ROLES or not value:
            raise UserError(
                f"--gpu-product {excerpt(item)}: expected VALUE or ROLE=VALUE with ROLE one of "
                f"{', '.join(ROLES)} (for example prefill=NVIDIA-B200)"
            )
        out[role] = value
    return out


def pool_gpu(workload, role: str) -> str:
    c = workload.cluster
    if role == "prefill" and c.prefill_gpu:
        return c.prefill_gpu
    if role == "decode" and c.decode_gpu:
        return c.decode_gpu
    return c.gpu


def with_placement(pools, workload, label_key: str, products: dict[str, str]) -> tuple:
    """Nodes per replica on every pool; a GPU-type node selector on each pool of a
    heterogeneous cluster, and on any pool named by --gpu-product."""
    check_label(label_key, products)
    out = []
    for pool in pools:
        nodes = nodes_per_replica(pool.tp, workload.cluster.gpus_per_node)
        selector = None
        if pool.role in products or workload.cluster.heterogeneous:
            gpu = pool_gpu(workload, pool.role)
            value = products.get(pool.role) or GPU_PRODUCT.get(gpu)
            if value is None:
                raise UserError(
                    f"cluster GPU {gpu!r} ({pool.role} pool) has no default "
                    f"{label_key} value: pass --gpu-product {pool.role}=VALUE (see "
                    f"kubectl get nodes -L {label_key})"
                )
            selector = (label_key, value)
        out.append(replace(pool, nodes=nodes, node_selector=selector))
    return tuple(out)


def heterogeneous_errors(workload, verdict, disaggregated: bool) -> list[str]:
    """Heterogeneous layouts deploy emits: the cross split, prefill pool on the prefill GPU and
    decode pool on the decode GPU. Colocated on both pools, each pool's own split, or prefill
    spilling onto spare decode-pool GPUs are two engine layouts per role: refused by name."""
    c = workload.cluster
    if not c.heterogeneous:
        return []
    if not disaggregated:
        return [
            "cluster.prefill_gpu/decode_gpu: the colocated comparator runs colocated replicas on "
            "both GPU types; deploy each pool as its own homogeneous workload (cluster.gpu = that "
            "pool's GPU)"
        ]
    d = verdict.disaggregated
    if " on " not in (d.prefill_layout or ""):
        return [
            "cluster.prefill_gpu/decode_gpu: the verdict's split runs prefill and decode inside "
            "each pool (each pool's own split beats the cross split); deploy each pool as its own "
            "homogeneous workload"
        ]
    if "(+" in (d.prefill_layout or ""):
        return [
            f"cluster.prefill_gpu/decode_gpu: the verdict also prefills on spare decode-pool GPUs "
            f"({d.prefill_layout}); deploy emits one prefill pool on the prefill GPU. Lower "
            "traffic.requests_per_second or add prefill GPUs so the prefill pool carries it alone"
        ]
    return []


def pool_gpu_errors(pools, workload) -> list[str]:
    """Each pool within its own GPU type's count on a heterogeneous cluster."""
    c = workload.cluster
    if not c.heterogeneous:
        return []
    have = {"prefill": c.prefill_gpus, "decode": c.decode_gpus}
    return [
        f"{p.role} pool needs {p.gpus} {pool_gpu(workload, p.role)} GPUs but cluster."
        f"{p.role}_gpus is {have[p.role]}"
        for p in pools
        if p.role in have and have[p.role] is not None and p.gpus > have[p.role]
    ]
