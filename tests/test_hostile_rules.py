"""Hostile rule files and parameter overrides (issue 29): numbers that are not finite or not
sensible, control characters, megabyte-long values echoed back, markup in titles and links.

A custom rulebook is anyone's text: it must be refused (exit 2 from a verdict, a lint problem
from `rules lint`) with a short message naming the rule and field, and what it says must reach
terminals, JSON and markdown inert.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.deploy_shell import live_markup
from tests.hostile_support import assert_user_error, run_decide
from tests.rules_support import EXAMPLES_DIR, rule, rule_file

CHAT = EXAMPLES_DIR / "chat-short-colocate.yaml"  # 40 req/s: the test rule fires on it


def effect_rule(weight: float, **fields) -> dict:
    return rule(veto=None, effect={"pushes": "disaggregate", "weight": weight}, **fields)


# --- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [math.inf, 1e308, 1001.0], ids=["inf", "1e308", "1001"])
def test_weights_must_be_finite_and_bounded(tmp_path, capsys, weight):
    path = rule_file(tmp_path / "r.yaml", [effect_rule(weight)])
    result = run_decide(capsys, "--workload", str(CHAT), "--rules", str(path), "--format", "json")
    assert_user_error(result, "r.yaml", "rule USR001", "effect.weight")


def test_a_bounded_weight_still_gives_valid_json(tmp_path, capsys):
    path = rule_file(tmp_path / "r.yaml", [effect_rule(1000.0)])
    result = run_decide(capsys, "--workload", str(CHAT), "--rules", str(path), "--format", "json")
    assert result.code == 0, result.stderr
    verdict = json.loads(result.stdout)  # strict JSON: no Infinity/NaN
    assert "USR001" in [f["id"] for f in verdict["fired_rules"]]


NAN = math.nan
PARAM = {"value": 1, "unit": "req/s", "doc": "d", "source": "s"}


@pytest.mark.parametrize(
    ("rules", "parameters"),
    [
        ([rule()], {"busy_rps": PARAM | {"value": NAN}}),
        ([rule()], {"busy_rps": PARAM | {"min": NAN}}),
        ([rule()], {"busy_rps": PARAM | {"max": math.inf}}),
        ([rule(examples={"fires": [{"requests_per_second": NAN}], "silent": [{}]})], None),
        ([rule(when={"metric": "requests_per_second", "op": ">=", "value": NAN})], None),
        ([rule(when={"metric": "gpu", "op": "in", "value": ["h100", -math.inf]})], None),
    ],
    ids=["param-value", "param-min", "param-max", "example", "literal", "list-literal"],
)
def test_non_finite_numbers_fail_lint(tmp_path, capsys, rules, parameters):
    path = rule_file(tmp_path / "r.yaml", rules, parameters)
    result = run_decide(capsys, "rules", "lint", str(path))
    assert result.code == 1, (result.stdout, result.stderr)
    assert "not a finite number" in result.stdout, result.stdout


@pytest.mark.parametrize(
    "fields",
    [
        {"title": "bad \x1b[31mred\x1b[0m title"},
        {"title": "\u202eeltit"},
        {"title": "two\nlines"},
        {"references": [{"title": "t\x07", "url": "https://example.org"}]},
        {"rationale": "clear\x1b[2J"},
        {"name": "user-rule", "category": "operations", "title": "t\x9b2J"},
    ],
    ids=["ansi-title", "bidi-title", "newline-title", "bell-reference", "ansi-rationale", "csi"],
)
def test_control_characters_fail_lint(tmp_path, capsys, fields):
    path = rule_file(tmp_path / "r.yaml", [rule(**fields)])
    result = run_decide(capsys, "rules", "lint", str(path))
    assert result.code == 1, (result.stdout, result.stderr)
    assert "control or bidi character" in result.stdout
    assert "\x1b" not in result.stdout + result.stderr


def test_control_characters_in_a_unit_are_refused_by_a_verdict(tmp_path, capsys):
    path = rule_file(tmp_path / "r.yaml", [rule()], {"busy_rps": PARAM | {"unit": "\x1b]0;x\x07"}})
    result = run_decide(capsys, "--workload", str(CHAT), "--rules", str(path))
    assert_user_error(result, "parameter 'busy_rps'", "unit", "U+001B")


@pytest.mark.parametrize(
    ("rules", "parameters"),
    [
        ([rule(rule_id="A" * 900_000)], None),
        ([rule()], {"p" * 900_000: PARAM}),
        ([rule(when={"metric": "m" * 900_000, "op": ">=", "param": "busy_rps"})], None),
        ([rule(examples={"fires": [{"x" * 900_000: 1}], "silent": [{}]})], None),
        ([rule(title="t" * 900_000)], None),
    ],
    ids=["id", "parameter-name", "metric-name", "example-metric", "title"],
)
def test_huge_values_are_cut_in_messages(tmp_path, capsys, rules, parameters):
    path = rule_file(tmp_path / "r.yaml", rules, parameters)
    for args in (["rules", "lint", str(path)], ["--workload", str(CHAT), "--rules", str(path)]):
        result = run_decide(capsys, *args)
        assert result.code in ((1, 2) if args[0] == "rules" else (0, 2)), result.stderr[:500]
        # A whole verdict (plan, reasons, next steps, confidence) is ~4.5K characters; the
        # 900,000-character value must not come through whole.
        assert len(result.stdout) + len(result.stderr) < 8000, (args, len(result.stdout))
        assert "Traceback" not in result.stderr


# --- what a rule says reaches terminals and markdown inert ------------------------------------


def test_rule_titles_are_not_rich_markup(tmp_path, capsys):
    path = rule_file(tmp_path / "r.yaml", [rule(title="t [/] [bold]x")])
    listed = run_decide(capsys, "rules", "list", "--rules", str(path))
    assert listed.code == 0, listed.stderr
    assert "[/]" in listed.stdout
    verdict = run_decide(capsys, "--workload", str(CHAT), "--rules", str(path))
    assert verdict.code == 0, verdict.stderr
    assert "t [/] [bold]x" in verdict.stdout


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(1)", "https://x.org/> <script>alert(1)</script>", "data:text/html,<b>"],
)
def test_reference_urls_are_never_live_links_or_html(tmp_path, capsys, url):
    fields = {"references": [{"title": "<img src=x>", "url": url}]}
    path = rule_file(tmp_path / "r.yaml", [rule(**fields)])
    args = ("--workload", str(CHAT), "--rules", str(path), "--format", "markdown")
    result = run_decide(capsys, *args)
    assert result.code == 0, result.stderr
    assert live_markup(result.stdout) == [], live_markup(result.stdout)


def test_plain_https_references_stay_links(tmp_path, capsys):
    path = rule_file(tmp_path / "r.yaml", [rule()])
    args = ("--workload", str(CHAT), "--rules", str(path), "--format", "markdown")
    result = run_decide(capsys, *args)
    assert "- [test](<https://example.org>)" in result.stdout


# --- parameter overrides ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting",
    ["min_gain=1e308", "min_gpus_saved=-1e300", "short_prompt_tokens=1e10", "strong_gain=2e9"],
)
def test_set_refuses_values_outside_a_sensible_range(capsys, setting):
    result = run_decide(capsys, "--workload", str(CHAT), "--set", setting)
    assert_user_error(result, "--set", setting.split("=")[0], "outside its range")


def test_workload_overrides_obey_the_same_range(tmp_path, capsys):
    text = CHAT.read_text() + "overrides:\n  min_gain: 1.0e+300\n"
    path = tmp_path / "w.yaml"
    path.write_text(text)
    assert_user_error(run_decide(capsys, "--workload", str(path)), "min_gain", "outside its range")


def test_a_custom_parameter_beyond_the_bound_is_refused(tmp_path, capsys):
    path = rule_file(tmp_path / "r.yaml", [rule()], {"busy_rps": PARAM | {"value": 1e300}})
    result = run_decide(capsys, "--workload", str(CHAT), "--rules", str(path))
    assert_user_error(result, "parameter 'busy_rps'", "outside")
