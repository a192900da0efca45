"""Entries of the fitted table that saw no prompt pass (issue 24).

aiconfigurator-core's database has DeepSeek-V3's decode kernels under SGLang and TensorRT-LLM
and gpt-oss-120b's under SGLang, not their prompt passes, so the entries fitted there never
constrained `prefill_mfu` or `prefill_overhead_ms`: coordinate descent left prefill_mfu at its
grid's first value (0.02). Priced with that, a 4,000-token DeepSeek-V3 prefill on TP8 H200
took 1,234 ms under SGLang and 1,411 ms under TensorRT-LLM against vLLM's 210 ms (217 ms
measured), and no colocated layout of one 8 x H200 node met a 2 s TTFT at 1 req/s.
"""

from __future__ import annotations

import json

import pytest

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.physics.step import iteration_ms
from disagg_decider.catalog import step_fit
from disagg_decider.workload import load_workload_text, resolve

TABLE = json.loads(step_fit.TABLE_PATH.read_text())
DECODE_ONLY = [f for f in TABLE["fits"] if "prefill" not in f["residuals"]]


def _deepseek(engine: str):
    text = f"""
name: dsv3-{engine}
model: deepseek-v3
weights_dtype: fp8
engine: {engine}
traffic: {{prompt_tokens: 4000, output_tokens: 1000, requests_per_second: 1}}
slo: {{ttft_ms: 2000, tpot_ms: 60}}
cluster: {{gpu: h200, gpus: 8}}
"""
    return resolve(load_workload_text(text))


def test_the_table_has_decode_only_entries_for_the_donor_rule_to_serve():
    """The rule is not idle: ten MoE entries (DeepSeek-V3 fp8, gpt-oss fp4) lack prompt data."""
    assert len(DECODE_ONLY) == 10
    assert {f["family"] for f in DECODE_ONLY} == {"moe"}


@pytest.mark.parametrize(
    "entry", DECODE_ONLY, ids=lambda f: f"{f['gpu']}-{f['engine']}-{f['format']}"
)
def test_decode_only_entries_take_prompt_constants_from_a_prompt_fitted_engine(entry):
    gpu, engine, family, fmt = entry["gpu"], entry["engine"], entry["family"], entry["format"]
    weights = {"fp8": "fp8", "fp4": "mxfp4-experts/bf16"}[fmt]
    fit = step_fit.fitted(gpu, engine, family == "moe", weights)
    assert fit is not None and fit.entry == f"{gpu} {engine} {family} {fmt}"
    donors = [
        f
        for f in TABLE["fits"]
        if (f["gpu"], f["family"], f["format"]) == (gpu, family, fmt)
        and "prefill" in f["residuals"]
    ]
    donor = next(f for e in step_fit.PROMPT_DONORS for f in donors if f["engine"] == e)
    for name in step_fit.PROMPT_ONLY:
        assert fit.constants[name] == donor["constants"][name], name
    # Everything a decode step uses stays the entry's own.
    for name, value in entry["constants"].items():
        if name not in step_fit.PROMPT_ONLY:
            assert fit.constants[name] == value, name
    assert f"decode steps only: prefill_mfu, prefill_overhead_ms from {gpu} {donor['engine']}" in (
        fit.source()
    )


def test_entries_fitted_on_prompts_keep_their_own_prompt_constants():
    fit = step_fit.fitted("h200", "vllm", True, "fp8")
    shipped = next(
        f["constants"]
        for f in TABLE["fits"]
        if (f["gpu"], f["engine"], f["family"], f["format"]) == ("h200", "vllm", "moe", "fp8")
    )
    assert fit.constants == shipped
    assert "decode steps only" not in fit.source()


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_deepseek_prefill_under_a_decode_only_entry_is_near_the_measured_vllm_one(engine):
    """TP8 H200, a 4,000-token prompt: vLLM's entry (fitted on DeepSeek-V3's measured prefills)
    210 ms; SGLang 192 ms, TensorRT-LLM 233 ms with the donor's prompt constants (their own
    decode-fitted all-reduce and attention terms kept); 1,234 and 1,411 ms before."""
    vllm_ms = float(iteration_ms(engine_for(_deepseek("vllm"), 8), 0, 0.0, 4000.0, 0.0))
    ms = float(iteration_ms(engine_for(_deepseek(engine), 8), 0, 0.0, 4000.0, 0.0))
    assert vllm_ms / 1.5 < ms < vllm_ms * 1.5
