"""Checks on rule files, as pure functions that return problems instead of raising.

Two audiences read them. The loader runs the *hard* checks (schema, names, types, operators)
and refuses a rulebook that fails them, because such a rule would crash or silently never fire.
`decide rules lint` runs everything, including what only hurts readers and maintainers:
parameters no rule uses, duplicate ids, literals where a named threshold belongs, and
examples that do not behave as declared (the examples are the rules' executable documentation).
Every problem names the file and the rule id (or the parameter) it is about.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from disagg_decider.errors import excerpt, nearest
from disagg_decider.metrics import BY_NAME, Metric
from disagg_decider.rules import engine
from disagg_decider.rules.schema import Leaf, Parameter, Rule, Rulebook, leaves

ORDERING_OPS = (">", ">=", "<", "<=")
LIST_OPS = ("in", "not_in")
_TAGS = ("leaf", "all", "any", "not")


@dataclass(frozen=True)
class Problem:
    source: str  # the file
    subject: str  # "rule DSG002", "parameter 'min_gain'" or "" for the whole file
    message: str

    def __str__(self) -> str:
        return (
            f"{self.source}: {self.subject}: {self.message}"
            if self.subject
            else (f"{self.source}: {self.message}")
        )


def rule_subject(rule_id: str) -> str:
    return f"rule {rule_id}"


# --- schema --------------------------------------------------------------------------------------


def schema_problems(data: Any, source: str) -> tuple[Rulebook | None, list[Problem]]:
    """Validate one file's YAML data; a problem per pydantic error, named by rule id."""
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        message = f"a rulebook is a mapping with 'rulebook', 'parameters' and 'rules', not {got}"
        return None, [Problem(source, "", message)]
    try:
        return Rulebook.model_validate(data), []
    except ValidationError as exc:
        return None, [_error_problem(err, data, source) for err in exc.errors()]


def _error_problem(err: Mapping[str, Any], data: dict, source: str) -> Problem:
    loc = list(err["loc"])
    subject = ""
    raw_rules = data.get("rules") if isinstance(data.get("rules"), list) else []
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        raw = raw_rules[loc[1]] if loc[1] < len(raw_rules) else None
        rid = raw.get("id") if isinstance(raw, dict) else None
        subject = rule_subject(_shown_id(rid) if rid else f"#{loc[1] + 1} (no id)")
        loc = loc[2:]
    elif len(loc) >= 2 and loc[0] == "parameters":
        subject = f"parameter {excerpt(loc[1])}"
        loc = loc[2:]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "literal_error":
        msg = f"{msg} (got {excerpt(err.get('input'))})"
    elif err["type"] == "missing":
        msg = "required field is missing"
    path = _path(loc)
    return Problem(source, subject, f"{path}: {msg}" if path else msg)


def _shown_id(rid: object) -> str:
    """An id as written when it looks like one; otherwise the user's text, cut and escaped
    (a 900 KB id is not echoed whole)."""
    if isinstance(rid, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", rid):
        return rid
    return excerpt(rid)


def _path(loc: list[Any]) -> str:
    """`when.all[1].metric` from pydantic's loc, without its union tags."""
    out = ""
    expect_tag = False
    previous: Any = None
    for part in loc:
        if isinstance(part, str) and part.startswith("function-"):
            continue
        if expect_tag and part in _TAGS:
            expect_tag = False
            continue
        if isinstance(part, int):
            out += f"[{part}]"
            expect_tag = previous in ("all", "any")
        else:
            out += f".{part}" if out else str(part)
            expect_tag = part in ("when", "not")
        previous = part
    return out


# --- conditions (hard: the loader refuses these) -------------------------------------------------


def condition_problems(
    rule: Rule, parameters: Mapping[str, Parameter], source: str
) -> list[Problem]:
    """Unknown metric or parameter names, thresholds of the wrong type, operators that do not
    fit the metric. Any of these makes a comparison meaningless, so the loader refuses them."""
    problems = []
    for leaf in leaves(rule.when):
        for message in _leaf_problems(leaf, parameters):
            problems.append(Problem(source, rule_subject(rule.id), message))
    return problems


def _leaf_problems(leaf: Leaf, parameters: Mapping[str, Parameter]) -> list[str]:
    metric = BY_NAME.get(leaf.metric)
    if metric is None:
        return [f"unknown metric {excerpt(leaf.metric)}; {nearest(leaf.metric, list(BY_NAME))}"]
    if leaf.param is not None and leaf.param not in parameters:
        hint = nearest(leaf.param, list(parameters)) if parameters else "no parameters are defined"
        return [f"unknown parameter {excerpt(leaf.param)}; {hint}"]
    shown = f"{leaf.metric} {leaf.op}"
    if leaf.op in ORDERING_OPS and metric.kind != "number":
        return [
            f"{shown}: '{leaf.op}' orders numbers, but {leaf.metric} is {_kind_text(metric)}; "
            "use ==, !=, in or not_in"
        ]
    if leaf.param is not None:
        value = parameters[leaf.param].value
        if leaf.op in LIST_OPS:
            return [f"{shown}: '{leaf.op}' takes a list, and parameter '{leaf.param}' is one value"]
        if not fits(metric, value):
            return [
                f"{shown} {leaf.param}: parameter '{leaf.param}' = {excerpt(value)} does not fit "
                f"{leaf.metric}, which is {_kind_text(metric)}"
            ]
        return []
    if leaf.op in LIST_OPS:
        values = leaf.value if isinstance(leaf.value, list) else [leaf.value]
    elif isinstance(leaf.value, list):
        return [f"{shown}: '{leaf.op}' compares with one value, got {excerpt(leaf.value)}"]
    else:
        values = [leaf.value]
    wrong = [v for v in values if not fits(metric, v)]
    if wrong:
        return [
            f"{shown} {excerpt(leaf.value)}: {excerpt(wrong[0])} does not fit {leaf.metric}, "
            "which is "
            f"{_kind_text(metric)}"
        ]
    return []


def fits(metric: Metric, value: Any) -> bool:
    """Can `value` stand where `metric`'s value goes (a threshold, or an example's value)?"""
    if metric.kind == "bool":
        return isinstance(value, bool)
    if metric.kind == "enum":
        return isinstance(value, str) and value in metric.choices
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind_text(metric: Metric) -> str:
    if metric.kind == "bool":
        return "a bool (true or false)"
    if metric.kind == "enum":
        return "one of " + ", ".join(metric.choices)
    return f"a number ({metric.unit})"


# --- style and documentation (lint only) ---------------------------------------------------------


def magic_number_problems(rule: Rule, source: str) -> list[Problem]:
    """A numeric threshold must be a named parameter, so users can see and override it."""
    problems = []
    for leaf in leaves(rule.when):
        metric = BY_NAME.get(leaf.metric)
        if metric is not None and metric.kind == "number" and leaf.value is not None:
            problems.append(
                Problem(
                    source,
                    rule_subject(rule.id),
                    f"{leaf.metric} {leaf.op} {excerpt(leaf.value)}: a numeric threshold is "
                    "inlined; name a parameter (param: NAME) so it carries a unit, a source "
                    "and can be overridden with --set",
                )
            )
    return problems


def example_problems(rule: Rule, params: Mapping[str, Any], source: str) -> list[Problem]:
    """Each example must name every metric the rule reads, with values of the right type, and
    must fire (or stay silent) as declared, under the rulebook's own parameter values."""
    read = list(dict.fromkeys(leaf.metric for leaf in leaves(rule.when)))
    problems = []

    def add(message: str) -> None:
        problems.append(Problem(source, rule_subject(rule.id), message))

    for expected in ("fires", "silent"):
        for i, example in enumerate(getattr(rule.examples, expected)):
            where = f"examples.{expected}[{i}]"
            well_formed = True
            for name, value in example.items():
                metric = BY_NAME.get(name)
                if metric is None:
                    add(f"{where}: unknown metric {excerpt(name)}; {nearest(name, list(BY_NAME))}")
                    well_formed = False
                elif value is not None and not fits(metric, value):
                    add(f"{where}: {name}={excerpt(value)} is not {_kind_text(metric)}")
                    well_formed = False
            missing = [m for m in read if m not in example]
            if missing:
                add(
                    f"{where}: omits {', '.join(missing)}, which the rule reads; give every "
                    "metric of the condition (null for 'unset')"
                )
                well_formed = False
            if not well_formed:
                continue
            fired = engine.fires(rule, example, params)
            if (fired is not None) != (expected == "fires"):
                trail: list = []
                engine.evaluate(rule.when, example, params, trail)
                verb = "does not make the rule fire" if expected == "fires" else "makes it fire"
                add(f"{where} {verb}: {describe_trail(engine.comparisons(trail))}")
    return problems


def describe_trail(trail: list) -> str:
    """`gain=1.05 < 1.1 (min_gain) holds; ...`: what an evaluation compared."""
    parts = []
    for c in trail:
        shown = excerpt(c.threshold)
        threshold = f"{shown} ({c.param})" if c.param else shown
        held = "holds" if c.holds else "no"
        parts.append(f"{c.metric}={excerpt(c.actual)} {c.op} {threshold} {held}")
    return "; ".join(parts)


def unused_parameter_problems(
    parameters: Mapping[str, Parameter], rules: list[Rule], origin: Mapping[str, str]
) -> list[Problem]:
    used = {leaf.param for rule in rules for leaf in leaves(rule.when) if leaf.param}
    return [
        Problem(origin.get(name, "rulebook"), f"parameter '{name}'", "no rule uses it")
        for name in parameters
        if name not in used
    ]


def duplicate_problems(books: list[tuple[str, Rulebook]]) -> list[Problem]:
    """Rule ids and parameter names defined twice within one group of files."""
    problems = []
    seen_rules: dict[str, str] = {}
    seen_params: dict[str, str] = {}
    for source, book in books:
        for rule in book.rules:
            if rule.id in seen_rules:
                first = seen_rules[rule.id]
                problems.append(
                    Problem(source, rule_subject(rule.id), f"id already used in {first}")
                )
            else:
                seen_rules[rule.id] = source
        for name in book.parameters:
            if name in seen_params:
                first = seen_params[name]
                problems.append(
                    Problem(source, f"parameter '{name}'", f"already defined in {first}")
                )
            else:
                seen_params[name] = source
    return problems


# --- a whole rulebook ----------------------------------------------------------------------------


@dataclass
class LintReport:
    problems: list[Problem] = field(default_factory=list)
    rules: int = 0
    parameters: int = 0
    examples: int = 0


def lint_documents(shipped: list[tuple[str, Any]], extra: list[tuple[str, Any]] = ()) -> LintReport:
    """Lint YAML data already read from files: the shipped rulebook plus extra files, which may
    replace shipped rules by id (as `--rules` does) but not repeat an id among themselves."""
    report = LintReport()
    groups: list[list[tuple[str, Rulebook]]] = []
    for docs in (shipped, extra):
        books = []
        for source, data in docs:
            book, problems = schema_problems(data, source)
            report.problems += problems
            if book is not None:
                books.append((source, book))
        report.problems += duplicate_problems(books)
        groups.append(books)

    parameters: dict[str, Parameter] = {}
    rules: dict[str, tuple[str, Rule]] = {}
    origin: dict[str, str] = {}
    for source, book in groups[0] + groups[1]:
        for name, p in book.parameters.items():
            parameters[name] = p
            origin[name] = source
        for rule in book.rules:
            rules[rule.id] = (source, rule)
    values = {name: p.value for name, p in parameters.items()}

    for rule_id in sorted(rules):
        source, rule = rules[rule_id]
        hard = condition_problems(rule, parameters, source)
        report.problems += hard
        report.problems += magic_number_problems(rule, source)
        if not hard:
            report.problems += example_problems(rule, values, source)
        report.examples += len(rule.examples.fires) + len(rule.examples.silent)
    report.problems += unused_parameter_problems(parameters, [r for _, r in rules.values()], origin)
    report.rules = len(rules)
    report.parameters = len(parameters)
    return report
