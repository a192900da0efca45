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


def test_deploy_json_names_the_conditional_layout_it_wrote(tmp_path):
    """The RAG example deploys the conditional graph on Dynamo (a prefill pool for prompts
    above the routing threshold); `--json` said "disaggregated"."""
    import json

    from tests.conftest import RAG_EXAMPLE, decide_json, run_cli

    verdict = decide_json(RAG_EXAMPLE)
    assert verdict["layout"] == "conditional"
    proc = run_cli("deploy", "-w", str(RAG_EXAMPLE), "-t", "dynamo", "-o", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["layout"] == "conditional"
    assert payload["threshold_tokens"] == verdict["conditional"]["threshold_tokens"] > 0
    graph = (tmp_path / "dynamo-graph.yaml").read_text()
    assert str(payload["threshold_tokens"]) in graph
