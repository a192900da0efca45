"""Block-scaled FP8 experts sharded by TP keep whole scale blocks per rank (issue 24).

A 128 x 128 scale block cannot be cut between TP ranks: vLLM refuses to load such a layout
("not divisible by weight quantization block_n"), and AIConfigurator refuses it as an invalid
quantized MoE configuration. Qwen3-235B-A22B-FP8's experts are 1,536 wide: TP8 gives each
rank 192, TP4 384. The search never proposes such a layout, and a pin of one is refused.
"""

from __future__ import annotations

import pytest

from disagg_decider.decide import decide
from disagg_decider.errors import UserError
from disagg_decider.workload import load_workload_text

QWEN_235B = """
name: qwen3-235b-fp8
model: qwen3-235b-a22b
weights_dtype: {dtype}
kv_cache_dtype: bf16
engine: vllm
traffic: {{prompt_tokens: 4000, output_tokens: 500, requests_per_second: 4}}
slo: {{ttft_ms: 2000, tpot_ms: 30}}
cluster: {{gpu: h200, gpus: 16, network: ib-ndr-400}}
parallelism: {{expert_parallel: false{pin}}}
"""


def _decide(dtype: str, pin: str = ""):
    return decide(load_workload_text(QWEN_235B.format(dtype=dtype, pin=pin), "qwen.yaml"))


def test_the_search_keeps_whole_fp8_blocks_per_rank():
    plain = _decide("fp8")  # per-tensor scales: TP8 is a valid layout, and the best one here
    assert plain.colocated.layout == "TP8" and plain.disaggregated.decode_layout == "TP8"
    block = _decide("fp8_block")
    layouts = [block.colocated.layout, block.disaggregated.prefill_layout]
    layouts.append(block.disaggregated.decode_layout)
    assert "TP8" not in layouts, layouts
    assert all(1536 % (int(x.removeprefix("TP")) * 128) == 0 for x in layouts), layouts


def test_a_pinned_tp_that_cuts_a_block_is_refused_naming_the_rule():
    with pytest.raises(UserError, match=r"decode_tp=8: TP 8 cuts qwen3-235b-a22b's block-scaled"):
        _decide("fp8_block", ", decode_tp: 8")
    assert _decide("fp8_block", ", decode_tp: 4").disaggregated.decode_layout == "TP4"


def test_deepseek_v3_keeps_tp8():
    """DeepSeek-V3 ships block FP8 with 2,048-wide experts: 256 per rank at TP8, whole blocks."""
    text = QWEN_235B.format(dtype="fp8_block", pin=", decode_tp: 8").replace(
        "qwen3-235b-a22b", "deepseek-v3"
    )
    v = decide(load_workload_text(text.replace("gpus: 16", "gpus: 32"), "dsv3.yaml"))
    assert v.disaggregated.decode_layout == "TP8"


def test_the_static_basis_keeps_whole_fp8_blocks_too():
    """AIConfigurator's Qwen3-235B-A22B-FP8 case (`benchmarks/aiconfigurator_compare.py`): the
    static basis took a TP8 decode that the engine cannot load."""
    text = QWEN_235B.format(dtype="fp8_block", pin="").replace(
        "tpot_ms: 30}", "tpot_ms: 30, basis: static}"
    )
    v = decide(load_workload_text(text, "static.yaml"))
    assert v.colocated.tp in (1, 2, 4) and v.disaggregated.decode_tp in (1, 2, 4)
