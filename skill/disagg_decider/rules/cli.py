"""`decide rules list|show|lint` and `decide schema`: read, check and validate the rulebook.

The rulebook is meant to be argued with, so these commands show a rule as a person would write
it down (condition, thresholds with their units and sources, reasons, examples), and lint what
a person changed before a verdict depends on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.cli_common import choices

rules_app = typer.Typer(
    help=(
        "Read and check the rulebook (rules/*.yaml): list the rules, show one with its "
        "reasons and thresholds, lint rule files. Example: decide rules show DSG002"
    ),
    no_args_is_help=True,
)

RulesOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--rules",
        help="Extra rule file layered on the shipped rulebook, as `decide --rules` does "
        "(adds rules, replaces them by id). Repeatable.",
    ),
]


def _loaded(extra: list[Path] | None):
    from disagg_decider.rules.loader import with_extra

    return with_extra(list(extra or []))


def effect_text(rule) -> str:
    """`veto -> colocate` or `+3 -> disaggregate`."""
    if rule.veto is not None:
        return f"veto -> {rule.veto.pushes}"
    if rule.advice is not None:
        return f"advice -> {rule.advice.layout} layout"
    return f"+{rule.effect.weight:g} -> {rule.effect.pushes}"


@rules_app.command("list")
def list_command(
    extra: RulesOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List every rule: id, name, category, which way it pushes and how hard, title.

    Example: decide rules list --json | jq '.[] | select(.kind == "veto") | .id'
    """
    loaded = _loaded(extra)
    rules = loaded.book.rules
    if as_json:
        rows = [
            {
                "id": r.id,
                "name": r.name,
                "category": r.category,
                "kind": r.kind,
                "pushes": r.pushes,
                "weight": r.effect.weight if r.effect else None,
                "title": r.title,
                "file": loaded.origin.get(r.id),
            }
            for r in rules
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    from disagg_decider.cli_common import out
    from disagg_decider.render.fit import Column, fitted_table

    # One line per rule at any width: ids (what `rules show` and `--rules` files name) are never
    # cut; names and titles are cut with an ellipsis (`rules show ID` prints them whole).
    columns = [
        Column("id", keep=True),
        Column("category"),
        Column("effect"),
        Column("name"),
        Column("title"),
    ]
    rows = [[r.id, r.category, effect_text(r), r.name, r.title] for r in rules]
    console = out()
    title = f"{len(rules)} rules (decide rules show ID)"
    console.print(fitted_table(title, columns, rows, console.width))


@rules_app.command("show")
def show_command(
    rule_id: Annotated[str, typer.Argument(help="Rule id (DSG002) or name (short-prompts-...).")],
    extra: RulesOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Show one rule: its condition, the parameters it uses (value, unit, meaning, source),
    why it exists, its references and its examples.

    Example: decide rules show DSG004
    """
    from disagg_decider.rules.loader import find_rule, rule_parameters
    from disagg_decider.rules.text import condition_lines

    loaded = _loaded(extra)
    rule = find_rule(loaded.book, rule_id)
    params = loaded.book.parameters
    used = rule_parameters(rule)
    if as_json:
        payload = {
            "rule": rule.model_dump(mode="json", by_alias=True, exclude_none=True),
            "file": loaded.origin.get(rule.id),
            "parameters": {name: params[name].model_dump(mode="json") for name in used},
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    values = {name: p.value for name, p in params.items()}
    units = {name: p.unit for name, p in params.items()}
    lines = [
        f"{rule.id} {rule.name}: {rule.title}",
        f"category {rule.category}; {effect_text(rule)}; file {loaded.origin.get(rule.id)}",
        "",
        "when",
        *(f"  {line}" for line in condition_lines(rule.when, values, units)),
    ]
    if used:
        lines += ["", "parameters (change with --set NAME=VALUE)"]
        for name in used:
            p = params[name]
            lines += [f"  {name} = {p.value!r} {p.unit}", f"    {p.doc}", f"    source: {p.source}"]
    lines += ["", "why", *(f"  {x}" for x in rule.rationale.strip().splitlines())]
    lines += ["", "references", *(f"  {r.title}: {r.url}" for r in rule.references)]
    lines += ["", "examples"]
    for expected in ("fires", "silent"):
        for example in getattr(rule.examples, expected):
            shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in example.items())
            lines.append(f"  {expected:<6} {shown}")
    sys.stdout.write("\n".join(lines) + "\n")


@rules_app.command("lint")
def lint_command(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Extra rule files to check with the shipped rulebook (they may replace "
            "shipped rules by id, as with `decide --rules`)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print problems as JSON.")] = False,
) -> None:
    """Check the shipped rulebook and any FILE given: schema, unknown metric and parameter
    names, types and operators, inlined numeric thresholds, unused parameters, duplicate ids,
    and every rule's examples (each must fire, or stay silent, as declared).

    Exit 0 when clean, 1 when there are problems, 2 when a file cannot be read as YAML.
    Example: decide rules lint my-rules.yaml
    """
    from disagg_decider.rules.lint import lint_documents
    from disagg_decider.rules.loader import read_rule_file, rulebook_dir

    shipped = [(str(p), read_rule_file(p)) for p in sorted(rulebook_dir().glob("*.yaml"))]
    extra = [(str(p), read_rule_file(p)) for p in files or []]
    report = lint_documents(shipped, extra)
    if as_json:
        rows = [
            {"file": p.source, "subject": p.subject, "message": p.message} for p in report.problems
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        for problem in report.problems:
            sys.stdout.write(f"{problem}\n")
        checked = (
            f"{report.rules} rules, {report.parameters} parameters, {report.examples} examples "
            f"in {len(shipped) + len(extra)} files"
        )
        if report.problems:
            sys.stderr.write(f"{len(report.problems)} problem(s) in {checked}\n")
        else:
            sys.stdout.write(f"ok: {checked}\n")
    if report.problems:
        raise typer.Exit(code=1)


SchemaKind = choices("SchemaKind", "workload", "rulebook")


def schema_command(
    kind: Annotated[SchemaKind, typer.Argument(help="workload or rulebook")],
) -> None:
    """Print the JSON Schema of a workload file or a rule file, for editors and CI.

    Example (VS Code YAML extension): decide schema workload > workload.schema.json, then add
    `# yaml-language-server: $schema=workload.schema.json` at the top of a workload file.
    """
    if kind is SchemaKind.workload:
        from disagg_decider.workload import Workload as model
    else:
        from disagg_decider.rules.schema import Rulebook as model
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    schema.update(model.model_json_schema())
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
