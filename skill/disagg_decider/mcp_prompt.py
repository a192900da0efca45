"""The MCP prompt `collect_workload`: what an agent should ask a user before deciding."""

from __future__ import annotations

import json
from typing import Any


def collect_workload(service: str = "") -> str:
    """Walk through collecting a workload from the user, then call decide_disaggregation."""
    about = f"The user describes the service as: {service}\n\n" if service else ""
    return f"""{about}Help the user decide whether to disaggregate prefill and decode for their \
LLM service. Collect the workload below, asking only for what is missing (offer the default \
when the user does not know), then call the `decide_disaggregation` tool.

1. Model: a catalog id (call `list_catalog` with kind "models"), or {{"hf_config": "path"}} to \
a local Hugging Face config.json. Weight dtype (bf16, fp8, fp4) and KV-cache dtype.
2. Engine: vllm, sglang or trtllm.
3. Prompt tokens at p50 and p99, and output tokens at p50 and p99 (from logs if possible).
   Share of prompt tokens already in the prefix cache (0 to 1; RAG and chat with system \
prompts often 0.1 to 0.5).
4. Request rate (requests per second at peak).
5. SLOs: p99 time to first token (ttft_ms) and p99 time per output token (tpot_ms).
6. GPUs: type (list_catalog "gpus"), how many for this service, GPUs per node.
7. Network between nodes: a link id (list_catalog "links", e.g. ib-ndr-400, roce-100, tcp-25) \
or {{"rdma": true|false, "gbps_per_gpu": N}}; and whether it runs on Kubernetes.
8. Team: ops maturity (low, medium, high) and orchestrator preference (any, \
kubernetes-native, managed-stack); whether they want an SLA planner or scale-to-zero.
9. Optional: GPU price per hour (cost.usd_per_gpu_hour).

Pass it as the `workload` argument, shaped like:
{json.dumps(EXAMPLE_WORKLOAD, indent=2)}

Then report `decision` and `summary`, each fired rule's title and the comparisons behind it, \
the pool sizing and any warnings. If the tool returns an error, it names the field and what \
is valid: fix that field and call again. To go further: `find_crossover` (at which prompt \
length the split starts to pay), `estimate_kv_transfer` (the KV cost on another link), \
`explain_rule` (a rule's thresholds and sources; override them with `overrides`)."""


EXAMPLE_WORKLOAD: dict[str, Any] = {
    "name": "rag-assistant",
    "model": "llama-3.3-70b",
    "weights_dtype": "fp8",
    "engine": "vllm",
    "traffic": {
        "prompt_tokens": {"p50": 8192, "p99": 16384},
        "output_tokens": {"p50": 300, "p99": 800},
        "requests_per_second": 3,
        "prefix_cache_hit_rate": 0.1,
    },
    "slo": {"ttft_ms": 3000, "tpot_ms": 10},
    "cluster": {"gpu": "h200", "gpus": 16, "gpus_per_node": 8, "network": "ib-ndr-400"},
    "ops": {"maturity": "high", "orchestrator_preference": "any"},
}
