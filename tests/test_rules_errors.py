"""Bad rule files fail before any verdict, with exit code 2 and a message that names the file
and the rule id, whether they come through `decide --rules` or `decide rules lint`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rules_support import EXAMPLES_DIR, rule, rule_file, run_decide

WORKLOAD = EXAMPLES_DIR / "two-gpu-colocate.yaml"

# name -> (the rule's `when`, a phrase the message must contain)
BAD_CONDITIONS = {
    "malformed": ({"all": [{"metric": "requests_per_second"}]}, "when.all[0].op"),
    "not-a-list": ({"all": {"metric": "requests_per_second", "op": ">", "param": "busy_rps"}},
                   "when.all"),
    "unknown-metric": ({"metric": "requests_per_secnd", "op": ">=", "param": "busy_rps"},
                       "did you mean 'requests_per_second'"),
    "unknown-operator": ({"metric": "requests_per_second", "op": "=>", "param": "busy_rps"},
                         "'=>'"),
    "missing-parameter": ({"metric": "requests_per_second", "op": ">=", "param": "busy_rp"},
                          "did you mean 'busy_rps'"),
    "expression-string": ("requests_per_second > 512", "expression strings are not supported"),
    "both-sides": ({"metric": "requests_per_second", "op": ">=", "param": "busy_rps", "value": 3},
                   "exactly one of 'param' or 'value'"),
    "bool-vs-number": ({"metric": "network_rdma", "op": "==", "value": 1}, "a bool"),
    "enum-typo": ({"metric": "ops_maturity", "op": "==", "value": "lo"}, "low, medium, high"),
    "ordering-an-enum": ({"metric": "ops_maturity", "op": "<", "value": "high"},
                         "orders numbers"),
    "list-with-less-than": ({"metric": "requests_per_second", "op": "<", "value": [1, 2]},
                            "got a list"),
    "in-with-a-parameter": ({"metric": "requests_per_second", "op": "in", "param": "busy_rps"},
                            "takes a list"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_CONDITIONS))
def test_a_bad_condition_exits_2_naming_file_and_rule(case: str, tmp_path: Path) -> None:
    when, phrase = BAD_CONDITIONS[case]
    path = rule_file(tmp_path / f"{case}.yaml", [rule("USR042", when=when)])
    result = run_decide("--workload", WORKLOAD, "--rules", path)
    assert result.returncode == 2, result.stderr
    message = " ".join(result.stderr.split())  # rich may wrap long lines
    assert str(path) in message and "USR042" in message and phrase in message
    assert "Traceback" not in result.stderr


def test_a_python_tag_exits_2_naming_file_line_and_rule(tmp_path: Path) -> None:
    path = rule_file(tmp_path / "tag.yaml", [rule("USR001"), rule("USR002", name="second")])
    marker = tmp_path / "pwned"
    tagged = f"id: USR002\n  payload: !!python/object/apply:os.system ['touch {marker}']"
    path.write_text(path.read_text().replace("id: USR002", tagged))
    for args in (("--workload", WORKLOAD, "--rules", path), ("rules", "lint", path)):
        result = run_decide(*args)
        assert result.returncode == 2, result.stderr
        message = " ".join(result.stderr.split())
        assert str(path) in message and "rule USR002" in message and "tag" in message
    assert not marker.exists()


def test_malformed_yaml_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("rulebook: x\nrules:\n  - id: USR001\n    when: {metric: [\n")
    for args in (("--workload", WORKLOAD, "--rules", path), ("rules", "lint", path)):
        result = run_decide(*args)
        assert result.returncode == 2
        assert str(path) in " ".join(result.stderr.split())


def test_a_rule_without_effect_or_veto_names_its_id(tmp_path: Path) -> None:
    bad = rule("USR007")
    del bad["veto"]
    path = rule_file(tmp_path / "noeffect.yaml", [bad])
    result = run_decide("--workload", WORKLOAD, "--rules", path)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2
    assert "USR007" in message and "exactly one of 'effect', 'veto' or 'advice'" in message


def test_the_same_id_in_two_extra_files_exits_2_naming_both(tmp_path: Path) -> None:
    first = rule_file(tmp_path / "a.yaml", [rule("USR001")])
    second = rule_file(tmp_path / "b.yaml", [rule("USR001")], parameters={})
    result = run_decide("--workload", WORKLOAD, "--rules", first, "--rules", second)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2
    assert "USR001" in message and str(first) in message and str(second) in message


def test_a_rule_file_that_is_not_a_mapping_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- id: USR001\n")
    result = run_decide("--workload", WORKLOAD, "--rules", path)
    assert result.returncode == 2 and str(path) in " ".join(result.stderr.split())
