"""`decide rules list|show|lint`, `decide schema`, and a verdict decided by a veto.

(That every example gets the verdict its name promises is tests/test_examples.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from disagg_decider.calc.result import ConditionalResult
from disagg_decider.dtypes import DTYPES
from disagg_decider.metrics import METRICS
from disagg_decider.rules.loader import shipped
from disagg_decider.workload import Ops, Workload
from tests.conftest import edited_example
from tests.rules_support import EXAMPLES_DIR, ROOT, rule, rule_file, run_decide


def test_list_json_gives_every_rule_with_its_push() -> None:
    result = run_decide("rules", "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert list(rows) == [r.id for r in shipped().book.rules]
    assert rows["DSG001"]["kind"] == "veto" and rows["DSG001"]["pushes"] == "colocate"
    assert rows["DSG002"]["kind"] == "effect" and rows["DSG002"]["weight"] > 0
    assert rows["ORC008"]["pushes"] == "dynamo"


def test_list_table_names_every_rule() -> None:
    result = run_decide("rules", "list")
    assert result.returncode == 0
    for r in shipped().book.rules:
        assert r.id in result.stdout


def test_show_renders_condition_parameters_and_examples() -> None:
    result = run_decide("rules", "show", "dsg002")  # ids are case-insensitive
    assert result.returncode == 0, result.stderr
    params = shipped().book.parameters
    short = params["short_prompt_tokens"]
    assert f"prompt_tokens_p50 < short_prompt_tokens ({short.value!r} {short.unit})" in (
        result.stdout
    )
    assert "all of:" in result.stdout
    assert short.source in result.stdout and short.doc in result.stdout
    assert "fires " in result.stdout and "silent " in result.stdout
    by_name = run_decide("rules", "show", "short-prompts-and-outputs")
    assert by_name.returncode == 0 and by_name.stdout == result.stdout


def test_show_an_unknown_id_exits_2_with_the_nearest_id() -> None:
    result = run_decide("rules", "show", "DSG002x")
    assert result.returncode == 2 and "did you mean 'DSG002'" in result.stderr


def test_lint_is_clean_on_the_shipped_rulebook() -> None:
    result = run_decide("rules", "lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok:")


def lint(*files: Path) -> tuple[int, str]:
    result = run_decide("rules", "lint", *files)
    return result.returncode, result.stdout


def test_lint_finds_an_unused_parameter(tmp_path: Path) -> None:
    params = {
        "busy_rps": {"value": 1, "unit": "req/s", "doc": "d", "source": "s"},
        "idle_rps": {"value": 0.1, "unit": "req/s", "doc": "d", "source": "s"},
    }
    path = rule_file(tmp_path / "unused.yaml", [rule()], parameters=params)
    code, out = lint(path)
    assert code == 1
    assert f"{path}: parameter 'idle_rps': no rule uses it" in out
    assert "busy_rps" not in out


def test_lint_finds_examples_that_misbehave(tmp_path: Path) -> None:
    examples = {
        "fires": [{"requests_per_second": 0.5}],  # below busy_rps = 1: does not fire
        "silent": [{"requests_per_second": 5}, {"gain": 2.0}],  # fires; omits the metric
    }
    path = rule_file(tmp_path / "examples.yaml", [rule("USR009", examples=examples)])
    code, out = lint(path)
    assert code == 1
    assert f"{path}: rule USR009: examples.fires[0] does not make the rule fire" in out
    assert f"{path}: rule USR009: examples.silent[0] makes it fire" in out
    assert "examples.silent[1]: omits requests_per_second" in out


def test_lint_finds_inlined_numbers_wrong_types_and_duplicates(tmp_path: Path) -> None:
    magic = rule(
        "USR001",
        when={"metric": "requests_per_second", "op": ">=", "value": 1},
        examples={"fires": [{"requests_per_second": 2}], "silent": [{"requests_per_second": 0}]},
    )
    typed = rule(
        "USR002",
        name="typed",
        when={"metric": "ops_maturity", "op": "==", "value": "low"},
        examples={"fires": [{"ops_maturity": "lo"}], "silent": [{"ops_maturity": "high"}]},
    )
    first = rule_file(tmp_path / "a.yaml", [magic, typed], parameters={})
    second = rule_file(tmp_path / "b.yaml", [magic], parameters={})
    code, out = lint(first, second)
    assert code == 1
    assert "rule USR001: requests_per_second >= 1: a numeric threshold is inlined" in out
    assert "rule USR002: examples.fires[0]: ops_maturity='lo' is not one of low" in out
    assert f"{second}: rule USR001: id already used in {first}" in out
    assert "unknown parameter 'busy_rps'" not in out  # no rule here uses it


def test_lint_accepts_a_replacement_of_a_shipped_rule(tmp_path: Path) -> None:
    dsg002 = next(r for r in shipped().book.rules if r.id == "DSG002")
    data = dsg002.model_dump(mode="json", by_alias=True, exclude_none=True)
    path = rule_file(tmp_path / "replace.yaml", [data], parameters={})
    code, out = lint(path)
    assert code == 0, out


def test_schema_workload_is_json_schema_that_validates_the_examples() -> None:
    result = run_decide("schema", "workload")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert {"traffic", "slo", "cluster"} <= set(schema["properties"])
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        errors = [e.message for e in validator.iter_errors(data)]
        assert not errors, f"{path.name}: {errors}"
    bad = edited_example(**{"ops.maturity": "expert"})
    assert not validator.is_valid(bad)


def test_schema_rulebook_validates_the_shipped_rule_files() -> None:
    result = run_decide("schema", "rulebook")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted((ROOT / "rules").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert validator.is_valid(data), path.name
        data["rules"][0]["when"] = {"metric": "gain", "op": "=>", "value": 1}
        assert not validator.is_valid(data)
    assert run_decide("schema", "catalog").returncode == 2


def test_enum_metrics_list_the_workload_values() -> None:
    """Lint checks enum literals against a metric's unit ("low|medium|high"); it must list
    exactly the values the workload schema accepts."""
    fields = {
        "ops_maturity": Ops.model_fields["maturity"],
        "orchestrator_preference": Ops.model_fields["orchestrator_preference"],
        "engine": Workload.model_fields["engine"],
        "layout": ConditionalResult.model_fields["layout"],  # the calculator's, not the workload's
    }
    enums = {m.name: m for m in METRICS if m.kind == "enum"}
    assert set(enums) == {*fields, "weights_dtype"}
    for name, info in fields.items():
        assert set(enums[name].choices) == set(info.annotation.__args__), name
    # weights_dtype takes mixed precision too (mxfp4-experts/bf16): the metric is its bulk
    # format, one of the single formats the workload validates against.
    assert set(enums["weights_dtype"].choices) == set(DTYPES)


def test_two_gpu_example_is_colocated_by_the_dsg001_veto() -> None:
    result = run_decide("--workload", EXAMPLES_DIR / "two-gpu-colocate.yaml", "--format", "json")
    assert result.returncode == 0, result.stderr
    v = json.loads(result.stdout)
    dsg001 = next(f for f in v["fired_rules"] if f["id"] == "DSG001")
    assert v["decision"] == "colocate" and dsg001["kind"] == "veto"
    assert dsg001["compared"][0]["metric"] == "cluster_gpus" and dsg001["compared"][0]["actual"] < 4
    assert "veto DSG001" in v["summary"]
