"""The example workloads get the verdict their file names promise, from the rulebook."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES, decide_json

REQUIRED_METRICS = {
    "kv_bytes_per_token",
    "kv_bytes_per_request",
    "kv_transfer_ms",
    "prefill_ms",
    "decode_step_ms",
    "goodput_per_gpu_colocated",
    "goodput_per_gpu_disaggregated",
    "gain",
    "crossover_prompt_tokens",
}


def test_there_are_at_least_eight_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_verdict_matches_its_name(path):
    verdict = decide_json(path)
    promised = path.stem.rsplit("-", 1)[-1]
    promised = "llm-d" if path.stem.endswith("llm-d") else promised
    assert verdict["decision"] == promised, verdict["summary"]
    assert verdict["disaggregate"] == (promised != "colocate")
    assert verdict["fired_rules"], "every verdict names the rules behind it"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_json_contract(path):
    v = decide_json(path)
    assert set(v) >= {
        "decision",
        "disaggregate",
        "summary",
        "fired_rules",
        "metrics",
        "sizing",
        "conditional_disagg_threshold_tokens",
        "warnings",
    }
    assert set(v["metrics"]) >= REQUIRED_METRICS
    assert {"prefill_gpus", "decode_gpus", "colocated_gpus"} <= set(v["sizing"])
    assert all("id" in r for r in v["fired_rules"])
    s = v["sizing"]
    # A replica is dp attention ranks of tp GPUs each (calc/physics/parallel.py).
    assert s["prefill_gpus"] == s["prefill_replicas"] * s["prefill_tp"] * s["prefill_dp"]
    assert s["decode_gpus"] == s["decode_replicas"] * s["decode_tp"] * s["decode_dp"]


def test_specific_reasons():
    by_stem = {p.stem: p for p in EXAMPLES}
    two_gpu = decide_json(by_stem["two-gpu-colocate"])
    assert "DSG001" in [r["id"] for r in two_gpu["fired_rules"] if r["kind"] == "veto"]
    tcp = decide_json(by_stem["tcp-25gbe-colocate"])
    assert "DSG004" in [r["id"] for r in tcp["fired_rules"]]
    assert tcp["metrics"]["kv_transfer_path"] == "network"
    assert tcp["metrics"]["kv_transfer_rdma"] is False
    low = decide_json(by_stem["low-maturity-team-colocate"])
    assert "DSG003" in [r["id"] for r in low["fired_rules"]]
    chat = decide_json(by_stem["chat-short-colocate"])
    assert "DSG002" in [r["id"] for r in chat["fired_rules"]]


def test_readme_sample_output_is_current():
    """The Quick start shows what `decide` prints today (80 columns, trailing spaces trimmed)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    start = readme.index("The first prints:\n\n```text\n") + len("The first prints:\n\n```text\n")
    shown = readme[start : readme.index("```\n", start)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "COLUMNS": "80"}
    example = "examples/rag-8k-h200-rdma-dynamo.yaml"
    out = subprocess.run(
        [sys.executable, "-m", "disagg_decider", "--workload", example],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    printed = "\n".join(line.rstrip() for line in out.splitlines()) + "\n"
    assert shown == printed, "README's sample output is stale: paste the current output"
