"""Changing the rulebook without forking it: `--set`, the workload's `overrides:` block and
`--rules FILE` (add a rule, or replace one by id). The verdict says which overrides applied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from disagg_decider.rules import engine
from disagg_decider.rules.loader import shipped, with_extra
from tests.conftest import RAG_EXAMPLE as RAG
from tests.conftest import edited_example
from tests.rules_support import EXAMPLES_DIR, rule, rule_file, run_decide

CHAT = EXAMPLES_DIR / "chat-short-colocate.yaml"


def verdict(*args: str | Path) -> dict:
    result = run_decide(*args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def fired(v: dict) -> dict[str, dict]:
    return {f["id"]: f for f in v["fired_rules"]}


def test_set_changes_thresholds_and_can_flip_the_verdict(tmp_path: Path) -> None:
    # At 1 req/s both modes carry the rate on the cluster, so the gain alone decides (at the
    # example's 3 req/s only the split fits, and DSG013 keeps it whatever min_gain says).
    path = tmp_path / "rag-1rps.yaml"
    path.write_text(yaml.safe_dump(edited_example(**{"traffic.requests_per_second": 1})))
    base = verdict("--workload", path)
    gain = base["metrics"]["gain"]
    assert base["thresholds"]["min_gain"] == shipped().param_values()["min_gain"]
    if base["decision"] == "colocate" or gain is None:
        raise AssertionError(f"the RAG example should disaggregate today (gain {gain})")
    assert base["colocated"]["fits_cluster"] and base["disaggregated"]["fits_cluster"]
    above = round(gain + 0.5, 2)  # a minimum the calculator's gain cannot reach
    changed = verdict("--workload", path, "--set", f"min_gain={above}")
    assert changed["thresholds"]["min_gain"] == above
    assert any(n.startswith("min_gain:") and "--set" in n for n in changed["overrides_applied"])
    assert changed["decision"] == "colocate"
    assert "DSG006" in fired(changed) and "DSG007" not in fired(changed)
    assert fired(changed)["DSG006"]["compared"][0]["threshold"] == above


def test_the_workload_overrides_block_applies_and_set_wins(tmp_path: Path) -> None:
    data = edited_example(overrides={"min_gpus_for_disaggregation": 64})
    path = tmp_path / "rag-overridden.yaml"
    path.write_text(yaml.safe_dump(data))
    v = verdict("--workload", path)
    assert v["thresholds"]["min_gpus_for_disaggregation"] == 64
    assert v["decision"] == "colocate" and fired(v)["DSG001"]["kind"] == "veto"
    assert any("workload overrides" in n for n in v["overrides_applied"])

    both = verdict("--workload", path, "--set", "min_gpus_for_disaggregation=2")
    assert both["thresholds"]["min_gpus_for_disaggregation"] == 2
    assert "DSG001" not in fired(both)
    assert len(both["overrides_applied"]) == 2


def test_a_bad_set_exits_2_with_the_nearest_name() -> None:
    typo = run_decide("--workload", RAG, "--set", "min_gian=1.2")
    assert typo.returncode == 2 and "did you mean 'min_gain'" in typo.stderr
    wrong_type = run_decide("--workload", RAG, "--set", "min_gain=lots")
    assert wrong_type.returncode == 2 and "min_gain" in wrong_type.stderr
    assert "expected a float" in wrong_type.stderr
    no_value = run_decide("--workload", RAG, "--set", "min_gain")
    assert no_value.returncode == 2 and "PARAMETER=VALUE" in no_value.stderr


def test_a_bad_overrides_block_exits_2_with_the_nearest_name(tmp_path: Path) -> None:
    data = edited_example(overrides={"short_prompt_token": 100})
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_decide("--workload", path)
    assert result.returncode == 2
    assert "did you mean 'short_prompt_tokens'" in result.stderr


def test_rules_file_adds_a_rule_that_changes_the_verdict(tmp_path: Path) -> None:
    path = rule_file(tmp_path / "busy.yaml", [rule("USR001")])  # veto at >= 1 req/s
    base = verdict("--workload", RAG)
    assert base["decision"] != "colocate" and "USR001" not in fired(base)
    v = verdict("--workload", RAG, "--rules", path)
    assert v["decision"] == "colocate"
    assert fired(v)["USR001"]["kind"] == "veto"
    assert v["thresholds"]["busy_rps"] == 1
    assert "USR001" in v["summary"]


def _dsg002_as_veto(tmp_path: Path) -> Path:
    dsg002 = next(r for r in shipped().book.rules if r.id == "DSG002")
    data = dsg002.model_dump(mode="json", by_alias=True, exclude_none=True)
    data.pop("effect")
    data["veto"] = {"pushes": "colocate"}
    return rule_file(tmp_path / "dsg002-veto.yaml", [data], parameters={})


def test_rules_file_replaces_a_rule_by_id(tmp_path: Path) -> None:
    path = _dsg002_as_veto(tmp_path)
    assert fired(verdict("--workload", CHAT))["DSG002"]["kind"] == "effect"
    v = verdict("--workload", CHAT, "--rules", path)
    assert fired(v)["DSG002"]["kind"] == "veto"
    assert [f["id"] for f in v["fired_rules"]].count("DSG002") == 1
    assert "veto DSG002" in v["summary"]

    # Where disaggregation outweighs DSG002's +3, only the veto version keeps it colocated.
    metrics = {
        "prompt_tokens_p50": 400,
        "output_tokens_p50": 150,
        "gain": 2.0,
        "colocated_feasible": False,
        "disaggregated_feasible": True,
        "ops_maturity": "high",
        "cluster_gpus": 16,
        "kubernetes": True,
    }
    params = shipped().param_values()
    assert engine.decide(shipped().book, metrics, params).decision != "colocate"
    replaced = with_extra([path])
    assert len(replaced.book.rules) == len(shipped().book.rules)
    outcome = engine.decide(replaced.book, metrics, params)
    assert outcome.decision == "colocate" and outcome.deciding_veto.id == "DSG002"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("min_gain=-5", "outside its range [0, 1e+09]"),
        ("high_prefix_hit_rate=1.5", "outside its range [0, 1]"),
        ("min_gain=nan", "expected a float"),
    ],
)
def test_set_outside_a_parameters_range_is_refused(setting, message):
    proc = run_decide("--workload", str(RAG), "--set", setting)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_a_parameter_value_outside_its_own_range_is_a_rulebook_error():
    from disagg_decider.rules.schema import Parameter

    with pytest.raises(ValueError, match="outside"):
        Parameter(value=2.0, unit="share", doc="d", source="s", min=0, max=1)
