"""What expert parallelism costs and buys a mixture-of-experts model.

Under expert parallelism (EP) each GPU of a replica holds 1/EP of the routed experts, while the
rest of the model (attention, dense layers, shared experts, embeddings: the "non-expert" part)
is held by every data-parallel (DP) attention rank. Each MoE layer then sends every token's
hidden state to the GPUs holding its top-k experts (dispatch) and brings the weighted outputs
back (combine): two all-to-alls per MoE layer, over NVLink inside a scale-up domain and over
RDMA between domains.

The all-to-all is priced as DeepEP runs it: a fixed cost per operation plus the bytes that leave
the GPU over the slower of its two paths. Low-latency mode (decode) sends every top-k copy of a
token separately; normal mode (prefill) sends a token once to each remote domain it needs and
forwards it over NVLink there. The fixed cost is read off DeepEP's EP8 row; the other rows of
the same table (EP16 to EP128, across nodes) are reproduced by this model in the tests.
"""

from __future__ import annotations

import numpy as np

from disagg_decider import dtypes
from disagg_decider.calc.physics import model_costs
from disagg_decider.catalog import ModelSpec

# DeepEP V1 low-latency kernels, H800 EP8 (docs/legacy.md of deepseek-ai/DeepEP): dispatch of
# 128 tokens x top-8 x 7,168 FP8 (6.6 MB leaving the GPU) takes 77 us where ~160 GB/s NVLink
# moves the bytes in ~41 us; combine (BF16, 12.8 MB) 114 us against ~80 us. Both leave ~35 us.
ALLTOALL_FIXED_US = 35.0
ALLTOALL_SOURCE = "https://github.com/deepseek-ai/DeepEP/blob/main/docs/legacy.md#performance"

# Max over mean expert load per GPU under EP: SGLang's prefill on 4 x 8 H100 (EP32) ran 50,302
# tok/s per node with the default expert distribution against 59,337 with a simulated perfect
# EPLB (1.18x); "this imbalance forces the system to wait for the slowest GPU computation or
# communication" (LMSYS large-scale EP blog, 2025-05-05). TP-only layouts shard every expert
# across all ranks and do not pay it.
EXPERT_IMBALANCE = 1.18
EXPERT_IMBALANCE_SOURCE = "https://lmsys.org/blog/2025-05-05-large-scale-ep/"

FP8_SCALE_GROUP = 128  # DeepEP FP8 dispatch carries one fp32 scale per 128 channels


def routed_expert_bytes(model: ModelSpec, dtype: str) -> float:
    """All routed experts of all MoE layers: what EP spreads over its ranks."""
    if model.moe is None:
        return 0.0
    return (
        model_costs.moe_layers(model)
        * model.moe.experts
        * model_costs.expert_bytes_per_layer(model, dtype)
    )


def non_expert_bytes(model: ModelSpec, dtype: str) -> float:
    """Attention, dense layers, shared experts and embeddings: what every DP rank holds."""
    return model_costs.weight_bytes(model, dtype) - routed_expert_bytes(model, dtype)


def routed_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs of the routed experts one token activates (top-k SwiGLU in each MoE layer)."""
    if model.moe is None:
        return 0.0
    per_expert = 2.0 * 3.0 * model.hidden * model.moe.expert_ffn_dim
    return model_costs.moe_layers(model) * model.moe.experts_active * per_expert


def expert_gemm_extra_flops(model: ModelSpec, routed_flops_per_token, eff) -> float:
    """FLOP-equivalents a prompt-carrying pass adds because each expert GEMM is short.

    A pass of T tokens reaches MFU x T / (T + s) (`passes.PassTerms.ms`, s the saturation
    tokens), but a routed expert receives only t = T k / E of them, so its GEMMs run at
    MFU x t / (t + s). The difference, routed FLOPs x (1 / mfu(t) - 1 / mfu(T)), is
    routed_flops_per_token x s (E / k - 1) / MFU whatever T is: the time to stream E / k
    times the active experts' weights through short GEMMs. Dense models add nothing.
    """
    if model.moe is None:
        return 0.0
    spread = model.moe.experts / model.moe.experts_active - 1.0
    return routed_flops_per_token * eff.saturation_tokens * spread / eff.prefill_mfu


def weights_per_gpu_bytes(model: ModelSpec, dtype: str, tp, ep):
    """Weight bytes on one GPU: non-expert part over attention TP, experts over EP (or TP).

    With `ep` 1 the layout is tensor-parallel only and experts are sharded `tp` ways like
    everything else.
    """
    tp, ep = np.asarray(tp, dtype=float), np.asarray(ep, dtype=float)
    experts = routed_expert_bytes(model, dtype)
    expert_shards = np.where(ep > 1, ep, tp)
    return non_expert_bytes(model, dtype) / tp + experts / expert_shards


def dispatch_bytes_per_copy(model: ModelSpec, weights_dtype: str) -> float:
    """One token's hidden state as dispatched: FP8 with scales where the experts run a
    low-precision format (FP8 or FP4), else BF16."""
    if dtypes.parts(weights_dtype)[1] in dtypes.LOW_PRECISION:
        return model.hidden * (1.0 + 4.0 / FP8_SCALE_GROUP)
    return model.hidden * model_costs.ACTIVATION_BYTES


def combine_bytes_per_copy(model: ModelSpec) -> float:
    """Combine returns BF16 expert outputs (DeepEP's BF16 combine)."""
    return model.hidden * model_costs.ACTIVATION_BYTES


def alltoall_us(
    tokens_per_gpu,
    bytes_per_copy: float,
    topk: int,
    ep,
    domain_gpus,
    nvlink_gb_per_s: float,
    rdma_gb_per_s: float,
    low_latency: bool = True,
    fixed_us: float = ALLTOALL_FIXED_US,
):
    """Time of one dispatch (or one combine) on the busiest GPU, uniform routing.

    Of a token's `topk` copies, a share (D - 1) / EP goes to other GPUs of its scale-up domain
    (D GPUs) and (EP - D) / EP to other domains; both paths run at once. Normal mode sends a
    token once per remote domain it touches and forwards it over NVLink on arrival.
    """
    n = np.asarray(tokens_per_gpu, dtype=float)
    ep = np.asarray(ep, dtype=float)
    d = np.minimum(np.asarray(domain_gpus, dtype=float), ep)
    local_copies = topk * (d - 1.0) / ep
    remote_copies = topk * (ep - d) / ep
    if not low_latency:
        domains = ep / d
        with np.errstate(divide="ignore", invalid="ignore"):
            touched = domains * (1.0 - (1.0 - 1.0 / domains) ** topk)
            remote_domains = np.where(domains > 1, touched * (domains - 1.0) / domains, 0.0)
        remote_copies = np.minimum(remote_copies, remote_domains)
    nvlink_s = n * local_copies * bytes_per_copy / (nvlink_gb_per_s * 1e9)
    rdma_s = np.where(
        remote_copies > 0, n * remote_copies * bytes_per_copy / (rdma_gb_per_s * 1e9), 0.0
    )
    busy = np.where(ep > 1, fixed_us + np.maximum(nvlink_s, rdma_s) * 1e6, 0.0)
    return busy


def alltoall_coefficients(
    model: ModelSpec,
    weights_dtype: str,
    ep,
    gpus,
    domain_gpus,
    nvlink_gb_per_s: float,
    rdma_gb_per_s: float,
    low_latency: bool,
):
    """(ms per token of the replica's pass, fixed ms) of every MoE layer's dispatch + combine.

    Tokens spread evenly over the replica's GPUs; the busiest GPU carries EXPERT_IMBALANCE
    times the mean traffic. Zero where the layout has no EP.
    """
    if model.moe is None:
        zero = np.zeros(np.shape(np.asarray(ep)))
        return zero, zero
    ep = np.asarray(ep, dtype=float)
    gpus = np.asarray(gpus, dtype=float)
    layers = model_costs.moe_layers(model)
    k = model.moe.experts_active
    dispatch = dispatch_bytes_per_copy(model, weights_dtype)
    combine = combine_bytes_per_copy(model)

    def per_op(tokens_per_gpu, fixed_us):
        args = (k, ep, domain_gpus, nvlink_gb_per_s, rdma_gb_per_s, low_latency, fixed_us)
        return alltoall_us(tokens_per_gpu, dispatch, *args) + alltoall_us(
            tokens_per_gpu, combine, *args
        )

    fixed_ms = per_op(0.0, ALLTOALL_FIXED_US) * layers / 1e3
    # Per token of the whole replica's pass: 1 / gpus tokens land on each GPU.
    per_token_ms = (per_op(1.0, 0.0) * EXPERT_IMBALANCE / gpus) * layers / 1e3
    return per_token_ms, fixed_ms
