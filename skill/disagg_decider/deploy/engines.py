"""Engine command lines (vLLM, SGLang, TensorRT-LLM) and the plain vLLM/SGLang deployments.

The `*_args` functions are the one place a pool's numbers become engine flags; Dynamo and
llm-d reuse them, so all four targets start the same engines with the same limits.
The `vllm`/`sglang` targets themselves (launch script, Kubernetes objects, router) are in
`deploy/plain.py`.
Flag names: vLLM `docs/features/nixl_connector_usage.md`, SGLang
`docs/advanced_features/pd_disaggregation.md` (see shared/reference/dynamo_llmd.md, C1-C2).
"""

from __future__ import annotations

import json

from disagg_decider.deploy.plan import DeployPlan, Pool

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
