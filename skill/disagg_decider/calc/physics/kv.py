"""KV-cache bytes: GQA, MLA and sliding-window layers (physics.md section 2.2)."""

from __future__ import annotations

import numpy as np

from disagg_decider.calc.physics.model_costs import DTYPE_BYTES
from disagg_decider.catalog import ModelSpec


def kv_bytes(model: ModelSpec, dtype: str, tokens):
    """Whole-model KV bytes for a sequence of `tokens` tokens.

    MLA stores one compressed latent (kv_lora_rank + rope dims) per token per layer, shared by
    all heads; GQA stores K and V for each KV head; sliding-window layers keep at most the window.
    """
    n = np.asarray(tokens, dtype=float)
    b = DTYPE_BYTES[dtype]
    if model.mla is not None:
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * model.layers * b * n
    per_layer_token = 2.0 * model.kv_heads * model.head_dim * b
    full_layers = model.layers - model.sliding_window_layers
    total = per_layer_token * full_layers * n
    if model.sliding_window_layers and model.sliding_window:
        total = total + per_layer_token * model.sliding_window_layers * np.minimum(
            n, model.sliding_window
        )
    return total


def kv_bytes_per_token(model: ModelSpec, dtype: str, context_tokens=1.0):
    """Average KV bytes per token at a given context (constant unless the model has windows).

    A float for one context, an array for an array of them.
    """
    per_token = kv_bytes(model, dtype, context_tokens) / np.asarray(context_tokens, dtype=float)
    return float(per_token) if np.ndim(per_token) == 0 else per_token


def kv_replication(model: ModelSpec, tp):
    """How many copies of the KV a TP group holds in total.

    GQA shards KV heads across TP ranks until TP exceeds the KV-head count, then replicates.
    The MLA latent is shared by every head, so plain TP replicates it on every rank.
    """
    tp = np.asarray(tp, dtype=float)
    if model.mla is not None:
        return tp
    return tp / np.minimum(tp, model.kv_heads)
