"""Labels agree with what the verdict says can run (issue 26): an infeasible verdict names no
layout and no threshold, rather than the search's last candidate."""

from __future__ import annotations

from disagg_decider.decide import decide
from disagg_decider.workload import Workload
from tests.conftest import MINIMAL_WORKLOAD

NOTHING_FITS = {
    **MINIMAL_WORKLOAD,
    "name": "405b-on-two-h100",
    "model": "llama-3.1-405b",
    "slo": {"ttft_ms": 2000, "tpot_ms": 50},
    "cluster": {"gpu": "h100", "gpus": 2},
}


def test_an_infeasible_verdict_names_no_layout_and_no_threshold():
    v = decide(Workload.model_validate(NOTHING_FITS))
    assert not v.feasible and not v.colocated.feasible and not v.disaggregated.feasible
    assert v.layout == "none" and v.dynamo_layout == "none"
    assert v.conditional_disagg_threshold_tokens is None
    assert any(x.kind == "memory" for x in v.limits), [x.kind for x in v.limits]


def test_a_feasible_verdict_keeps_its_layout(tmp_path):
    data = {**NOTHING_FITS, "model": "llama-3.1-8b", "name": "8b-on-two-h100"}
    v = decide(Workload.model_validate(data))
    assert v.feasible and v.layout in {"colocated", "disaggregated", "conditional"}


def test_the_orchestrator_follows_the_plan_that_carries_the_rate():
    """Dynamo's plan here is the always-split pools (cold prompts, DSG018): 17 GPUs for 35 req/s
    on a 16-GPU cluster; llm-d's conditional pools carry it on 16. It used to say Dynamo."""
    from tests.conftest import ROOT, decide_json

    v = decide_json(ROOT / "examples" / "mixed-chat-rag-llm-d.yaml")
    assert v["decision"] == "llm-d"
    assert not v["disaggregated"]["fits_cluster"]
    assert "ORC010" in [f["id"] for f in v["fired_rules"]]
    k = v["conditional"]
    assert k["prefill_replicas"] * k["prefill_tp"] + k["decode_replicas"] * k["decode_tp"] <= 16
    assert "ORC010" in v["summary"] and "Short of GPUs" not in v["summary"]
