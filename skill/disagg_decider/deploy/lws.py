"""Multi-node replicas on the plain vllm/sglang targets: one LeaderWorkerSet per pool.

A replica of `nodes` pods (one per node, `gpus_per_pod` GPUs each) is one LWS group; LWS sets
LWS_LEADER_ADDRESS and LWS_WORKER_INDEX in every pod, from which each pod derives its rank
flags (`placement.rank_flags`). vLLM runs hybrid data parallelism, an API server on every pod
for its own DP ranks, so the Service spans all pods; SGLang serves HTTP from node 0 only, so
its Service (and the router's pod discovery) selects the leaders and its workers carry no
HTTP probes. Field names: kubernetes-sigs/lws `leaderworkerset.x-k8s.io/v1` (replicas,
leaderWorkerTemplate.size, leaderTemplate, workerTemplate), as llm-d's wide-EP guide uses them.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

from disagg_decider.deploy.placement import (
    LWS_LEADER,
    LWS_RANK,
    LWS_WORKER_INDEX_LABEL,
    rank_flags,
)

LWS_API = "leaderworkerset.x-k8s.io/v1"
PROBES = ("readinessProbe", "startupProbe", "livenessProbe")


def serving_labels(engine: str, labels: dict[str, str]) -> dict[str, str]:
    """The pods that answer HTTP: all of them for vLLM, the group leaders for SGLang."""
    return labels | {LWS_WORKER_INDEX_LABEL: "0"} if engine == "sglang" else labels


def shell_command(engine: str, pool, cmd: list[str]) -> list[str]:
    """`/bin/sh -c 'exec <cmd> <this pod's rank flags>'`."""
    fixed = " ".join(shlex.quote(w) for w in cmd)
    flags = " ".join(rank_flags(engine, pool, LWS_LEADER, LWS_RANK))
    return ["/bin/sh", "-c", f"exec {fixed} {flags}"]


def leader_worker_set(
    engine: str, pool, name: str, labels: dict[str, str], pod_meta: dict, pod_spec: dict
) -> dict[str, Any]:
    template: dict[str, Any] = {"size": pool.nodes}
    worker_spec = pod_spec
    if engine == "sglang":  # workers join the leader's process group and serve no HTTP
        template["leaderTemplate"] = {"metadata": pod_meta, "spec": pod_spec}
        worker_spec = copy.deepcopy(pod_spec)
        for c in worker_spec["containers"]:
            for probe in PROBES:
                c.pop(probe, None)
    template["workerTemplate"] = {"metadata": pod_meta, "spec": worker_spec}
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": pool.replicas, "leaderWorkerTemplate": template},
    }
