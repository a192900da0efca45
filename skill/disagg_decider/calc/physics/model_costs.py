"""What a model costs per token: weight bytes, FLOPs, attention work.

Everything here follows physics.md section 2.1: forward FLOPs per token are 2 x active params
plus causal attention, and decode reads every weight (or every expert touched) once per step.
"""

from __future__ import annotations

import numpy as np

from disagg_decider import dtypes
from disagg_decider.catalog import Gpu, ModelSpec

# Bytes per element of each format, block scales included (`disagg_decider/dtypes.py`).
DTYPE_BYTES: dict[str, float] = dtypes.BYTES_PER_ELEMENT
ACTIVATION_BYTES = 2.0  # activations and all-reduces stay in bf16
PCIE_GB_PER_S = 25.0  # one way, for cards without NVLink (L40S); PCIe Gen4 x16 is 32 GB/s raw


def routed_expert_params(model: ModelSpec) -> float:
    """Parameters of all routed experts of all MoE layers."""
    if model.moe is None:
        return 0.0
    return moe_layers(model) * model.moe.experts * 3.0 * model.hidden * model.moe.expert_ffn_dim


def weight_bytes(model: ModelSpec, dtype: str) -> float:
    """All weights under a precision (`dtypes`): routed experts at the experts' format, the
    rest (attention, dense layers, shared experts, embeddings) at the dense format."""
    dense, expert = dtypes.parts(dtype)
    if dense == expert:
        return model.params_total_b * 1e9 * DTYPE_BYTES[dense]
    experts = routed_expert_params(model)
    rest = model.params_total_b * 1e9 - experts
    return rest * dtypes.dense_bytes(dtype) + experts * dtypes.expert_bytes(dtype)


def expert_bytes_per_layer(model: ModelSpec, dtype: str) -> float:
    """One routed expert's SwiGLU weights in one layer."""
    if model.moe is None:
        return 0.0
    return 3.0 * model.hidden * model.moe.expert_ffn_dim * dtypes.expert_bytes(dtype)


def moe_layers(model: ModelSpec) -> int:
    return 0 if model.moe is None else model.layers - model.moe.dense_layers


def experts_touched(model: ModelSpec, tokens: np.ndarray | float) -> np.ndarray | float:
    """Distinct experts a batch of tokens routes to per layer, under uniform routing."""
    if model.moe is None:
        return 0.0
    e, k = model.moe.experts, model.moe.experts_active
    return e * (1.0 - (1.0 - k / e) ** np.maximum(tokens, 0.0))


def weight_bytes_read(model: ModelSpec, dtype: str, tokens: np.ndarray | float):
    """Bytes of weights one forward pass reads: all dense weights, plus the experts touched."""
    total = weight_bytes(model, dtype)
    if model.moe is None:
        return total
    per_expert = expert_bytes_per_layer(model, dtype)
    all_experts = moe_layers(model) * model.moe.experts * per_expert
    touched = moe_layers(model) * experts_touched(model, tokens) * per_expert
    return total - all_experts + touched


def linear_flops_per_token(model: ModelSpec) -> float:
    return 2.0 * model.params_active_b * 1e9


def _qk_v_dims(model: ModelSpec) -> tuple[int, int]:
    if model.mla is not None:
        return model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim, model.mla.v_head_dim
    return model.head_dim, model.head_dim


def attention_flops(model: ModelSpec, new_tokens, context_start):
    """Causal attention FLOPs for `new_tokens` appended after `context_start` cached tokens.

    Each new token at position t does QK^T and AV over t keys: 2*H*(d_qk + d_v)*t FLOPs per
    layer. Sliding-window layers see at most `sliding_window` keys.
    """
    d_qk, d_v = _qk_v_dims(model)
    per_key = 2.0 * model.heads * (d_qk + d_v)
    n, s = new_tokens, context_start
    keys_full = n * s + n * n / 2.0
    full_layers = model.layers - model.sliding_window_layers
    flops = per_key * full_layers * keys_full
    if model.sliding_window_layers and model.sliding_window:
        keys_window = n * np.minimum(s + n / 2.0, model.sliding_window)
        flops = flops + per_key * model.sliding_window_layers * keys_window
    return flops


def format_tflops(gpu: Gpu, dtype: str) -> float:
    """The fastest tensor-core rate one weight format can use on this GPU."""
    if dtype in dtypes.FOUR_BIT and gpu.fp4_dense_tflops:
        return gpu.fp4_dense_tflops
    if dtype in dtypes.LOW_PRECISION and gpu.fp8_dense_tflops:
        return gpu.fp8_dense_tflops
    return gpu.bf16_dense_tflops


def peak_tflops(gpu: Gpu, dtype: str, model: ModelSpec | None = None) -> float:
    """The tensor-core rate of a precision on this GPU.

    Mixed precision (experts in one format, the rest in another) runs each part's linear
    FLOPs at its own rate: the one rate that takes the same time is their FLOP-weighted
    harmonic mean (routed experts' share of a token's linear FLOPs at the experts' rate).
    """
    dense, experts = dtypes.parts(dtype)
    if dense == experts or model is None or model.moe is None:
        return format_tflops(gpu, dense)
    per_expert = 2.0 * 3.0 * model.hidden * model.moe.expert_ffn_dim
    routed = moe_layers(model) * model.moe.experts_active * per_expert
    share = min(routed / linear_flops_per_token(model), 1.0)
    return 1.0 / (share / format_tflops(gpu, experts) + (1.0 - share) / format_tflops(gpu, dense))


def scaleup_gb_per_s(gpu: Gpu) -> float:
    return gpu.scaleup_gb_per_s if gpu.scaleup_gb_per_s > 0 else PCIE_GB_PER_S
