"""The verdict's confidence block (issue 26): a close call says so, a cliff is named.

A gain of about 1.2x against the rulebook's `min_gain` of 1.1 sits inside the calculator's own
measured error (`calc/error_bands.json`): the first paragraph must say so, and a clear win
(the RAG example's 4.4x) must not. The RAG example's routing threshold 5744 sits where the
next grid threshold serves about a third less per GPU: the verdict must say that too.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml

from disagg_decider.confidence import ERROR_BANDS, confidence, gain_error_band
from disagg_decider.decide import decide
from disagg_decider.verdict import Comparison, FiredRule
from disagg_decider.workload import load_workload
from tests.conftest import RAG_EXAMPLE, run_cli

# Llama-3.3-70B FP8 on one 8 x H100 node, 1.5K-token prompts at 12 req/s, TPOT 20 ms: the
# split wins by about 1.16x on the fitted default physics, just over min_gain 1.1.
CLOSE = {
    "name": "close-call-70b-h100",
    "model": "llama-3.3-70b",
    "weights_dtype": "fp8",
    "engine": "vllm",
    "traffic": {
        "prompt_tokens": {"p50": 1536, "p99": 1536},
        "output_tokens": {"p50": 500, "p99": 1500},
        "requests_per_second": 12,
        "prefix_cache_hit_rate": 0.3,
    },
    "slo": {"ttft_ms": 1500, "tpot_ms": 20},
    "cluster": {"gpu": "h100", "gpus": 8, "gpus_per_node": 8, "network": "ib-ndr-400"},
    "ops": {"maturity": "high"},
    "cost": {"usd_per_gpu_hour": 4.0},
}


def first_paragraph(stdout: str) -> str:
    """The text output's paragraph under the headline, joined onto one line."""
    lines = stdout.splitlines()[1:]
    return " ".join(line.strip() for line in lines[: lines.index("")] if line.strip())


@pytest.fixture(scope="module")
def close_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("close") / "close.yaml"
    path.write_text(yaml.safe_dump(CLOSE))
    return path


def test_a_gain_inside_the_error_band_is_a_close_call_in_the_first_paragraph(close_file):
    v = decide(load_workload(close_file))
    assert v.disaggregate and 1.1 < v.metrics.gain < 1.25, v.metrics.gain  # the premise
    c = v.confidence
    assert c.close_call and (c.rule, c.param, c.threshold) == ("DSG007", "min_gain", 1.1)
    assert c.margin == pytest.approx(v.metrics.gain / 1.1 - 1)
    assert 0 < c.distance_in_error_bands <= 1
    assert c.summary.startswith("Close call: ") and "1.1x" in c.summary
    text = run_cli("--workload", str(close_file))
    assert text.returncode == 0, text.stderr
    assert "Close call: the split's" in first_paragraph(text.stdout)
    md = run_cli("--workload", str(close_file), "--format", "markdown").stdout
    headline = next(line for line in md.splitlines() if line.startswith("**"))
    assert "Close call: the split" in headline
    data = json.loads(run_cli("--workload", str(close_file), "--format", "json").stdout)
    assert data["confidence"]["close_call"] is True
    assert data["summary"] == v.summary  # the summary field itself is unchanged


def test_a_clear_win_is_not_a_close_call():
    proc = run_cli("--workload", str(RAG_EXAMPLE))
    assert proc.returncode == 0, proc.stderr
    assert "Close call" not in proc.stdout
    v = decide(load_workload(RAG_EXAMPLE))
    assert v.metrics.gain > 2 and not v.confidence.close_call and v.confidence.summary is None
    assert v.confidence.distance_in_error_bands > 1


def test_the_threshold_comes_from_the_rulebook_as_overridden(close_file):
    """--set min_gain=1.0 puts the same gain ~16% above the threshold: outside the band."""
    v = decide(load_workload(close_file), overrides={"min_gain": 1.0})
    assert v.confidence.threshold == 1.0 and not v.confidence.close_call
    assert v.provenance.fields["confidence.threshold"] == "override"


def test_the_rag_example_threshold_sits_on_a_cliff():
    """5744 tokens is the largest grid threshold within 1% of the best; at the next one (6352)
    goodput per GPU drops about 32%."""
    v = decide(load_workload(RAG_EXAMPLE))
    cliff = v.confidence.cliff
    assert cliff is not None and cliff.threshold_tokens == v.conditional.threshold_tokens
    above = [n for n in cliff.neighbours if n.threshold_tokens > cliff.threshold_tokens]
    assert above and above[0].goodput_ratio < 0.9 and cliff.on_cliff
    drop = f"drops {1 - above[0].goodput_ratio:.0%}"
    assert drop in cliff.sentence and str(above[0].threshold_tokens) in cliff.sentence
    text = run_cli("--workload", str(RAG_EXAMPLE)).stdout
    assert "sits on a cliff" in " ".join(text.split())
    md = run_cli("--workload", str(RAG_EXAMPLE), "--format", "markdown").stdout
    assert "sits on a cliff" in md


def test_layouts_without_a_routing_threshold_have_no_cliff(close_file):
    v = decide(load_workload(close_file))
    assert v.layout != "conditional" and v.confidence.cliff is None


def test_the_error_band_is_read_from_the_one_shipped_file():
    spread = json.loads(ERROR_BANDS.read_text())["calc_vs_sim"]["goodput_calc_over_sim"]
    half = math.hypot(*(math.log(m["p90"] / m["p10"]) / 2 for m in spread.values()))
    low, high = gain_error_band()
    assert (low, high) == pytest.approx((math.exp(-half), math.exp(half)))
    assert 0.8 < low < 0.95 and 1.05 < high < 1.25


def _fired(rule: str, gain: float, param: str, threshold: float, kind="effect") -> FiredRule:
    compared = [Comparison(metric="gain", op=">=", actual=gain, threshold=threshold,
                           param=param, holds=True)]  # fmt: skip
    return FiredRule(
        id=rule, name=rule, title=rule, category="throughput", kind=kind,
        pushes="disaggregate", weight=2, compared=compared, rationale="",
    )  # fmt: skip


def test_a_veto_that_ignores_the_gain_makes_no_close_call():
    """When a veto on something else (no RDMA, a low-maturity team) decided, a gain near its
    threshold changes nothing, so the first paragraph says nothing of it."""
    fired = [_fired("DSG007", 1.15, "min_gain", 1.1)]
    assert confidence(fired, 1.15, None, None).close_call
    veto = FiredRule(
        id="DSG003", name="x", title="x", category="ops", kind="veto", pushes="colocate",
        weight=0, compared=[], rationale="",
    )  # fmt: skip
    assert not confidence(fired, 1.15, None, veto).close_call


def test_the_nearest_gain_threshold_is_the_one_reported():
    fired = [_fired("DSG007", 1.45, "min_gain", 1.1), _fired("DSG008", 1.45, "strong_gain", 1.5)]
    c = confidence(fired, 1.45, None, None)
    assert (c.rule, c.threshold, c.close_call) == ("DSG008", 1.5, True)
    assert confidence([], None, None, None).gain is None


@pytest.mark.anyio
async def test_the_mcp_verdict_carries_confidence_and_provenance():
    """The MCP tool serialises the same verdict (its output schema must admit both blocks)."""
    from mcp import Client

    from disagg_decider import mcp_server

    async with Client(mcp_server.build_server()) as client:
        result = await client.call_tool(
            "decide_disaggregation", {"workload": yaml.safe_load(RAG_EXAMPLE.read_text())}
        )
    assert result.is_error is False, result.content[0].text
    data = result.structured_content
    assert data["confidence"]["cliff"]["on_cliff"] is True
    assert data["provenance"]["fields"]["metrics.gain"] == "derived"
    assert data["provenance"]["inputs"]["gpu"] == "catalog"


@pytest.fixture
def anyio_backend():
    return "asyncio"
