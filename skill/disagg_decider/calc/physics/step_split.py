"""The fitted step physics: a forward pass with attention, routed experts and communication
priced each on its own terms (issue 24; constants in `calc/step_fit.json`).

The plain roofline (`passes.PassTerms.roofline_ms`) folds attention into one max(memory,
compute) with the linear layers and prices every GEMM at one MFU. Measured kernels do not
behave that way: attention and the GEMMs run one after the other, attention's efficiency is
its own (decode attention streams the KV cache, prefill attention is FLOP-bound), routed
experts see only the tokens routed to them (T k / E of the pass's T), GEMMs sharded over more
TP ranks are smaller and reach less of peak, and an expert-parallel layout adds per-rank
overhead as EP grows. The pass here is

    max(weights / (HBM x mbu),
        dense FLOPs / mfu(T) + routed FLOPs x (1 + s_ep (EP - 1)) / mfu(T k / E))
    + max(KV bytes / (HBM x kv_mbu), attention FLOPs / (peak x attention_mfu))
    + all-reduce and all-to-all time (each scaled by its fitted factor) + fixed time

with mfu(t) = MFU x t / (t + saturation) / (1 + s_tp log2 TP), t the pass's tokens for the dense
layers and T k / E for a routed expert (whose saturation is its own).
`benchmarks/fit_step_physics.py` fits the constants per GPU x engine x model family x weight
format to aiconfigurator-core's measured step times; a workload gets them by default
(`catalog/step_fit.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from disagg_decider.calc.physics import model_costs, moe

if TYPE_CHECKING:
    from disagg_decider.calc.physics.passes import PassTerms
    from disagg_decider.calc.physics.step import Engine


@dataclass(frozen=True)
class SplitConstants:
    """What the fitted pass needs of an engine, computed once per engine."""

    dense_flops_per_token: np.ndarray | float  # linear FLOPs outside the routed experts
    routed_flops_per_token: np.ndarray | float  # routed experts' FLOPs (EP imbalance, slope in)
    routed_share: float  # tokens an expert receives per token of the pass: k / E (1: dense)
    mfu_divisor: np.ndarray | float  # 1 + mfu_tp_slope x log2(TP)
    expert_saturation_tokens: float


def engine_constants(engine: Engine) -> SplitConstants:
    """The engine's `SplitConstants` (`Engine.split_constants` caches them)."""
    m, eff = engine.model, engine.eff
    dense = engine.linear_flops_per_token
    routed = 0.0
    share = 1.0
    if m.moe is not None:
        # Under EP the busiest GPU's experts carry the imbalance (`Engine.linear_flops_per_token`).
        routed = moe.routed_flops_per_token(m)
        routed = np.where(engine.expert_parallel, routed * moe.EXPERT_IMBALANCE, routed)
        dense = dense - routed
        if eff.expert_parallel_slope:
            ep = np.asarray(engine.ep, dtype=float)
            routed = routed * (1.0 + eff.expert_parallel_slope * (ep - 1.0))
        share = m.moe.experts_active / m.moe.experts
    tp = np.asarray(engine.tp, dtype=float)
    divisor = 1.0 + eff.mfu_tp_slope * np.log2(tp) if eff.mfu_tp_slope else 1.0
    saturation = eff.expert_saturation_tokens
    return SplitConstants(
        dense_flops_per_token=dense,
        routed_flops_per_token=routed,
        routed_share=share,
        mfu_divisor=divisor,
        expert_saturation_tokens=eff.saturation_tokens if saturation is None else saturation,
    )


# From this many elements a pass whose elements all carry prompt tokens reads the prefill
# values as one number (`pass_ms`): ~20 us less on a batch's 28,000-element passes.
ONE_NUMBER_MIN_POINTS = 1_024


def pass_ms(terms: PassTerms, decode_batch, prefill_tokens):
    """One pass of `decode_batch` decode sequences and `prefill_tokens` prompt tokens."""
    e = terms.engine
    m, eff, k = e.model, e.eff, e.split_constants
    b, c = decode_batch, prefill_tokens
    tokens = b + c
    weights_ms = e.dense_weights_ms
    if weights_ms is None:
        weights = model_costs.weight_bytes_read(m, e.weights_dtype, tokens) + e.extra_weight_bytes
        weights_ms = weights * e.ms_per_byte
    scalar_c = isinstance(c, (float, int))
    # Large passes that all carry prompt tokens (a batch's chunk-carrying passes) take the
    # prefill values as one number: dividing by it, and adding the one branch, is what
    # selecting it at every element does (the same bits, on the shape the pass's tokens give
    # anyway). Small ones select, as do passes led by a pure decode slot (`paired_ms`'s): the
    # test would cost a call more than it saves.
    every = (
        not scalar_c and c.size >= ONE_NUMBER_MIN_POINTS and c.flat[0] > 0 and bool((c > 0).all())
    )
    if scalar_c:
        mfu = eff.prefill_mfu if c > 0 else eff.decode_mfu
    else:
        mfu = eff.prefill_mfu if every else np.where(c > 0, eff.prefill_mfu, eff.decode_mfu)
    mfu = mfu / k.mfu_divisor
    # tokens + 1e-30: an empty pass costs no FLOPs, and 0 / 0 must not turn into nan.
    dense_ms = tokens * k.dense_flops_per_token * (tokens + eff.saturation_tokens)
    dense_ms = dense_ms / (tokens + 1e-30)
    compute_ms = dense_ms
    if m.moe is not None:
        routed_tokens = tokens * k.routed_share
        routed_ms = tokens * k.routed_flops_per_token * (routed_tokens + k.expert_saturation_tokens)
        compute_ms = compute_ms + routed_ms / (routed_tokens + 1e-30)
    compute_ms = compute_ms / mfu * e.ms_per_flop
    kv_ms = b * terms.kv_read_ms_per_sequence
    attention_flops = b * terms.decode_attention_flops
    if not (scalar_c and c == 0 and terms.no_prefill_context):
        attention_flops = attention_flops + model_costs.attention_flops(m, c, terms.prefill_context)
    attention_ms = np.maximum(kv_ms, attention_flops * e.ms_per_flop / eff.attention_mfu)
    comm_ms = e.allreduce_coefficients[0] * tokens + terms.fixed_ms
    if terms.moe_comm:
        (ll_token, ll_fixed), (nm_token, nm_fixed) = e.decode_alltoall, e.prefill_alltoall
        if every:  # (the normal mode's all-to-all at every element)
            comm_ms = comm_ms + (nm_token * tokens + nm_fixed)
        else:
            comm_ms = comm_ms + np.where(
                c > 0, nm_token * tokens + nm_fixed, ll_token * tokens + ll_fixed
            )
    return np.maximum(weights_ms, compute_ms) + attention_ms + comm_ms
