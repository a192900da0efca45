"""`decide simulate --layout conditional|all` and `decide sweep --layout all`: the conditional
layout (router threshold T, Dynamo's policies) from the command line, text and JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from tests.bimodal_support import bimodal_data
from tests.hostile_support import assert_user_error, run_decide

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture()
def mix(tmp_path: Path) -> Path:
    """The issue's bimodal workload at 28 req/s, where only the conditional layout carries the
    rate on the 16 GPUs (its max about 29 req/s, always-split 26, colocated 17)."""
    path = tmp_path / "mix.yaml"
    data = bimodal_data(requests_per_second=28)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _json(capsys, *args: str) -> dict:
    result = run_decide(capsys, *args, "--format", "json", "--quiet", "--jobs", "1")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def test_simulate_all_layouts_json_uses_the_verdicts_threshold(mix, capsys) -> None:
    out = _json(capsys, "simulate", "-w", str(mix), "--layout", "all", "-n", "1500")
    assert {"colocated", "disaggregated", "conditional"} <= out.keys()
    cond, priced = out["conditional"], out["calculator"]["conditional"]
    assert cond["threshold_tokens"] == priced["threshold_tokens"] > 0
    assert cond["policy"] == "isl_bounding"
    # the simulated router sends about the share the calculator priced (requests above T)
    assert cond["share_to_prefill"] == pytest.approx(priced["share_to_prefill"], abs=0.04)
    assert priced["ttft_p99_ms"] is not None
    assert cond["gpus"] == out["colocated"]["gpus"] == 16
    # at the workload's rate the conditional layout meets the targets the two modes miss
    assert cond["slo_attainment"] > max(
        out["colocated"]["slo_attainment"], out["disaggregated"]["slo_attainment"]
    )


def test_simulate_conditional_threshold_and_policy_flags(mix, capsys) -> None:
    args = ("simulate", "-w", str(mix), "--layout", "conditional", "-n", "800")
    zero = _json(capsys, *args, "--pd-threshold", "0")
    assert set(zero) & {"colocated", "disaggregated"} == set()
    assert zero["conditional"]["share_to_prefill"] == 1.0  # T = 0: every prompt to prefill
    assert zero["calculator"]["conditional"]["ttft_p99_ms"] is None  # not what it priced
    load = _json(capsys, *args, "--policy", "prefill_load")
    assert load["conditional"]["policy"] == "prefill_load"
    assert load["conditional"]["share_to_prefill"] > 0.5  # short prompts too, when idle
    cold = _json(capsys, *args, "--eff-isl-ratio-threshold", "1.0")
    assert cold["conditional"]["eff_isl_ratio_threshold"] == 1.0
    assert cold["conditional"]["share_to_prefill"] == 1.0  # no prefix hits: none stays local
    text = run_decide(capsys, *args, "--policy", "isl_or_load", "--quiet", "--jobs", "1")
    assert text.code == 0, text.stderr
    assert "share sent to prefill" in text.stdout and "isl_or_load" in text.stdout


def test_simulate_conditional_without_conditional_pools_is_a_user_error(capsys) -> None:
    workload = str(EXAMPLES / "chat-short-colocate.yaml")
    result = run_decide(capsys, "simulate", "-w", workload, "--layout", "conditional")
    assert_user_error(result, "--layout conditional", "colocated layout", "--layout both")
    result = run_decide(capsys, "simulate", "-w", workload, "--pd-threshold", "100")
    assert_user_error(result, "--pd-threshold", "--layout all")


def test_sweep_all_layouts_json_and_markdown(capsys) -> None:
    workload = str(EXAMPLES / "rag-8k-h200-rdma-dynamo.yaml")
    args = ("sweep", "-w", workload, "--prompt-tokens", "256:16384", "--steps", "3")
    out = _json(capsys, *args, "--layout", "all")
    c = out["conditional"]
    assert len(c["layout"]) == len(out["prompt_tokens"]) == 3
    for layout, t, share in zip(
        c["layout"], c["threshold_tokens"], c["share_to_prefill"], strict=True
    ):
        if layout == "conditional":
            assert t > 0 and 0 < share < 1
    # the search includes T = 0 and "no prefill pool": never below either mode's gain
    for cond, split in zip(c["analytic_gain"], out["analytic_gain"], strict=True):
        if cond is not None and split is not None:
            assert cond >= 0.99 * max(split, 1.0)
    plain = _json(capsys, *args)
    assert "conditional" not in plain  # the default output is unchanged
    md = run_decide(capsys, *args, "--layout", "all", "--format", "markdown")
    assert "| layout (threshold) |" in md.stdout


def test_sweep_simulated_conditional_column(capsys) -> None:
    workload = str(EXAMPLES / "rag-8k-h200-rdma-dynamo.yaml")
    args = ("sweep", "-w", workload, "--prompt-tokens", "2048:4096", "--steps", "2")
    out = _json(capsys, *args, "--layout", "all", "--simulate", "-n", "400")
    c = out["conditional"]
    assert c["policy"] == "isl_bounding"
    assert len(c["simulated_gain"]) == 2
    assert all(g is not None and math.isfinite(g) and g > 0 for g in c["simulated_gain"])


def test_sweep_refuses_mixed_traffic_with_a_reason(mix, capsys) -> None:
    result = run_decide(capsys, "sweep", "-w", str(mix), "--steps", "2", "--simulate", "-q")
    assert_user_error(result, "traffic.classes", "--layout all")
