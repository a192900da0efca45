"""One basis and one name for each figure (issue 26): the static basis's conditional column,
the layout `decide deploy --json` says it wrote, and the crossover beside the winning ranges
and the report's gain table."""

from __future__ import annotations

from disagg_decider.decide import decide
from disagg_decider.workload import load_workload_text

STATIC = """
name: static-case
model: llama-3.1-8b
traffic: {prompt_tokens: 4000, output_tokens: 500, requests_per_second: 4}
slo: {ttft_ms: 600, tpot_ms: 25, basis: static}
cluster: {gpu: h200, gpus: 8}
"""


def test_the_static_basis_prices_the_conditional_column_on_the_static_basis_too():
    """It used to keep the p99 basis's conditional pools (3.61 req/s per GPU, TTFT 449 ms)
    beside static columns (colocated 8.83 req/s per GPU, TTFT 316 ms)."""
    v = decide(load_workload_text(STATIC))
    k, c, d = v.conditional, v.colocated, v.disaggregated
    best = c if c.goodput_per_gpu >= d.goodput_per_gpu else d
    assert k.layout == best.mode
    assert k.goodput_per_gpu == best.goodput_per_gpu
    assert (k.ttft_p99_ms, k.tpot_p99_ms) == (best.ttft_p99_ms, best.tpot_p99_ms)
    assert "slo.basis static" in k.threshold_reason
