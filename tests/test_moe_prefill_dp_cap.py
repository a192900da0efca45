"""MoE decode under DP attention and MoE prefill passes (issue 24, item 5).

Engines cap sequences per attention-DP rank (vLLM/SGLang `max_num_seqs`, TensorRT-LLM
`max_batch_size` apply to each rank), so a DP16/EP16 replica may hold 16 x 512 sequences.
A pass carrying prompt tokens prices the routed experts' GEMMs at the tokens each expert
receives and the EP all-to-all in DeepEP's normal mode, for the split's prefill and the
colocated chunked passes alike (one function: `passes.PassTerms.ms`).
"""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider import catalog
from disagg_decider.calc.physics import moe
from disagg_decider.calc.physics.step import Engine, iteration_ms
from disagg_decider.calc.replicas import colocated, decode
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.prefill import prefill_ms
from disagg_decider.workload import Efficiency, load_workload_text

H200 = catalog.get_gpu("h200")


def engine(model: str, tp: int, dp: int = 1, ep: int = 1, dtype: str = "fp8") -> Engine:
    return Engine(
        catalog.get_model(model),
        H200,
        dtype,
        "bf16",
        tp,
        Efficiency(),
        dp=dp,
        ep=ep,
        domain_gpus=8,
        rdma_gb_per_s=42.5,
    )


LONG_DECODE = load_workload_text(
    """
name: dp-cap
model: deepseek-v3
weights_dtype: fp8
traffic: {prompt_tokens: 2000, output_tokens: 1000, requests_per_second: 50}
slo: {ttft_ms: 5000, tpot_ms: 100}
cluster: {gpu: h200, gpus: 16}
"""
)


def test_decode_batch_cap_applies_per_attention_dp_rank():
    lengths = Lengths.of(LONG_DECODE)
    dp16 = engine("deepseek-v3", 1, dp=16, ep=16)
    wide = decode.replica_capacity(dp16, lengths, 100.0)
    # KV and the 100 ms TPOT allow thousands of sequences on 16 ranks: far above 512 (32 a
    # rank, what the cap on the whole replica allowed), within 16 x 512.
    assert 16 * 64 < float(np.ravel(wide.batch)[0]) <= 16 * 512
    assert int(dp16.max_decode_batch) == 16 * 512
    # A plain TP8 replica keeps the engine's 512, and so does a DP replica with 1 rank.
    tp8 = engine("deepseek-v3", 8)
    assert int(tp8.max_decode_batch) == 512
    assert float(np.ravel(decode.replica_capacity(tp8, lengths, 1e6).batch)[0]) <= 512
    # Candidates in one array: each under its own cap.
    both = engine("deepseek-v3", *(np.array([[a], [b]]) for a, b in ((8, 1), (1, 16), (1, 16))))
    caps = np.ravel(decode.replica_capacity(both, lengths, 1e6).batch)
    assert caps[0] <= 512 < caps[1] <= 16 * 512


def test_per_rank_cap_reaches_the_step_p99():
    """Above 512 sequences the p99 batch still spreads above the mean (capped per rank)."""
    dp16 = engine("deepseek-v3", 1, dp=16, ep=16)
    ctx = Lengths.of(LONG_DECODE).decode_context_mean
    step99 = decode.step_p99_ms(dp16, ctx, np.array([600.0]), 1e9)
    at_mean = decode.decode_step_ms(dp16, 600.0, ctx)
    assert float(np.ravel(step99)[0]) > float(np.ravel(at_mean)[0])


@pytest.mark.parametrize("tokens", [512.0, 2048.0, 8192.0])
def test_moe_prompt_pass_prices_expert_gemms_at_tokens_per_expert(tokens):
    """Qwen3-235B, TP4 bf16: a pass of T tokens sends T x 8 / 128 to each expert; the routed
    GEMMs alone take at least their FLOPs at the MFU of that many tokens."""
    e = engine("qwen3-235b-a22b", 4, dtype="bf16")
    eff, m = e.eff, e.model
    per_expert = tokens * m.moe.experts_active / m.moe.experts
    mfu = eff.prefill_mfu * per_expert / (per_expert + eff.saturation_tokens)
    routed_ms = tokens * moe.routed_flops_per_token(m) / (float(e.peak_flops) * mfu) * 1e3
    whole_ms = float(np.ravel(iteration_ms(e, 0.0, 0.0, tokens, 0.0))[0])
    assert whole_ms > routed_ms
    # A dense model's prompt pass adds nothing; a decode pass of a MoE model neither.
    assert engine("llama-3.3-70b", 4, dtype="bf16").expert_gemm_ms == 0.0
    plain = iteration_ms(e, 64.0, 1000.0, 0.0, 0.0)
    assert float(np.ravel(plain)[0]) > 0


def test_colocated_chunk_pass_is_the_prefill_physics_with_all_to_all():
    """The colocated replica's chunk-carrying pass and the split's prefill are the same
    function: on an EP layout both carry DeepEP's normal-mode all-to-all and the expert GEMMs
    at tokens per expert."""
    e = engine("deepseek-v3", 1, dp=8, ep=8)
    chunk = 2048.0
    # At least the routed GEMMs at tokens per expert (2,048 tokens x 8 / 256 = 64 each) and the
    # all-to-all: what the colocated replica's chunk pass must cost.
    m, eff = e.model, e.eff
    mfu = eff.prefill_mfu * 64.0 / (64.0 + eff.saturation_tokens)
    routed_ms = chunk * moe.routed_flops_per_token(m) / (float(e.peak_flops) * mfu) * 1e3
    lengths = Lengths.of(LONG_DECODE)
    lines = colocated.lines(e, lengths, 5000.0, 100.0, chunk)
    # No decode batch: the chunk pass is a prefill of `chunk` tokens after the same context.
    context = float(np.ravel(lines.full_pass.prefill_context)[0])
    chunk_ms = float(np.ravel(lines.full_pass.ms(0.0, chunk))[0])
    nm_token, nm_fixed = e.prefill_alltoall
    alltoall_ms = float(np.ravel(nm_token * chunk + nm_fixed)[0])
    assert chunk_ms > routed_ms + alltoall_ms
    split_ms = prefill_ms(e, chunk, context) - e.eff.prefill_overhead_ms
    assert chunk_ms == pytest.approx(float(np.ravel(split_ms)[0]))
    assert alltoall_ms > 1.0  # 58 MoE layers x (dispatch + combine) at 35 us and up
    expert_ms = float(np.ravel(e.expert_gemm_ms)[0])
    assert expert_ms > 5.0
    # Without the two (the pass as priced before), the chunk would be this much shorter.
    assert chunk_ms > alltoall_ms + expert_ms


def test_deploy_caps_each_dp_rank_at_its_share_of_the_replica_batch():
    """The verdict sizes a DP replica's whole batch; the engine flag applies per rank."""
    from pathlib import Path

    from disagg_decider.decide import decide
    from disagg_decider.deploy.plan import make_plan
    from disagg_decider.workload import load_workload

    path = Path(__file__).resolve().parents[1] / "examples" / "deepseek-v3-32xh200-colocate.yaml"
    w = load_workload(path)
    # At the example's TPOT of 25 ms the fitted SGLang DeepSeek-V3 decode (h200 moe fp8) holds
    # one sequence per DP rank (DP32/EP32 at 32, 2.48 req/s; the roofline held 223): a cap of
    # one per rank cannot tell a per-rank flag from a per-replica one. At 50 ms the replica
    # holds 189 (DP32/EP32, 7.2 req/s): 6 per rank, the last one short.
    w = w.model_copy(update={"slo": w.slo.model_copy(update={"tpot_ms": 50})})
    v = decide(w)
    s = v.sizing
    assert s.colocated_dp > 1 and s.colocated_max_batch > 2 * s.colocated_dp
    (pool,) = make_plan(w, v, "sglang", base_dir=path.parent).pools
    assert pool.max_num_seqs == -(-s.colocated_max_batch // s.colocated_dp)
    assert pool.max_num_seqs * s.colocated_dp >= s.colocated_max_batch
