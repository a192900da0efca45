"""Load, merge and check rulebooks: the shipped one, extra files, parameter overrides.

Every metric and parameter a rule names is checked at load time, so a typo fails before any
workload is evaluated, with the file, the rule id and the nearest valid name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from disagg_decider.errors import UserError, excerpt, nearest
from disagg_decider.rules import lint
from disagg_decider.rules.schema import Leaf, Parameter, Rule, Rulebook, leaves
from disagg_decider.yamlio import load_yaml_file


def rulebook_dir() -> Path:
    """The shipped rulebook: package data in a wheel, the repository's rules/ in a checkout."""
    packaged = Path(__file__).resolve().parents[1] / "rulebook"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "rules"


@dataclass
class LoadedRulebook:
    book: Rulebook
    origin: dict[str, str] = field(default_factory=dict)  # rule id or parameter -> file

    def param_values(self) -> dict[str, Any]:
        return {name: p.value for name, p in self.book.parameters.items()}


def read_rule_file(path: Path) -> Any:
    """A rule file's YAML data; a YAML error also names the rule it sits in."""
    try:
        return load_yaml_file(path)
    except UserError as exc:
        line = getattr(exc, "line", None)
        rule_id = rule_id_at_line(path.read_text(encoding="utf-8"), line) if line else None
        if rule_id is None:
            raise
        source, _, rest = str(exc).partition(": ")
        raise UserError(f"{source}: rule {rule_id}: {rest}") from None


def rule_id_at_line(text: str, line: int) -> str | None:
    """The id of the rule whose YAML block holds `line` (1-based), found by indentation: the
    file could not be parsed, so this reads it as text."""
    lines = text.splitlines()
    top = next((i for i, t in enumerate(lines) if re.match(r"rules\s*:", t)), None)
    if top is None or line - 1 <= top:
        return None
    items = [i for i in range(top + 1, len(lines)) if re.match(r"\s*- ", lines[i])]
    if not items:
        return None
    indent = min(len(lines[i]) - len(lines[i].lstrip()) for i in items)
    starts = [i for i in items if len(lines[i]) - len(lines[i].lstrip()) == indent]
    begin = max((i for i in starts if i <= line - 1), default=None)
    if begin is None:
        return None
    end = min((i for i in starts if i > begin), default=len(lines))
    for text_line in lines[begin:end]:
        found = re.match(r"\s*(?:- )?\s*id\s*:\s*[\"']?([A-Za-z0-9_-]+)", text_line)
        if found:
            return found.group(1)
    return None


def parse_rulebook(data: Any, source: str) -> Rulebook:
    book, problems = lint.schema_problems(data, source)
    if problems:
        raise UserError(_problem_text(f"{source}: invalid rulebook", problems))
    assert book is not None
    return book


def _problem_text(title: str, problems: list[lint.Problem]) -> str:
    """A title naming the file, then one problem a line (the file is repeated only when a
    problem is about another one)."""
    lines = [title]
    for p in problems:
        shown = f"{p.subject}: {p.message}" if title.startswith(p.source) else str(p)
        lines.append(f"  {shown}")
    return "\n".join(lines)


def check_names(rule: Rule, parameters: dict[str, Parameter], source: str) -> None:
    """Every metric and parameter a rule names must exist, with thresholds of the right type."""
    problems = lint.condition_problems(rule, parameters, source)
    if len(problems) == 1:
        raise UserError(str(problems[0]))
    if problems:
        raise UserError(_problem_text(f"{source}: rule {rule.id} is invalid", problems))


def rule_leaves(rule: Rule) -> list[Leaf]:
    return leaves(rule.when)


def rule_parameters(rule: Rule) -> list[str]:
    """The parameters a rule compares against, in the order its condition names them, once."""
    return list(dict.fromkeys(leaf.param for leaf in leaves(rule.when) if leaf.param is not None))


def find_rule(book: Rulebook, key: str) -> Rule:
    """A rule by id (any case) or by name; otherwise a user error with the nearest id or name.

    `decide rules show` and the MCP tool explain_rule both look rules up here.
    """
    wanted = key.strip()
    for rule in book.rules:
        if wanted.upper() == rule.id or wanted.lower() == rule.name:
            return rule
    hint = nearest(wanted.upper(), [r.id for r in book.rules])
    if not hint.startswith("did you mean"):
        by_name = nearest(wanted.lower(), [r.name for r in book.rules])
        hint = by_name if by_name.startswith("did you mean") else hint
    raise UserError(f"unknown rule {excerpt(key)}; {hint}")


def merge(base: LoadedRulebook, extra: Rulebook, source: str) -> LoadedRulebook:
    """Add rules and parameters from `extra`; a rule with an existing id replaces it."""
    params = dict(base.book.parameters)
    origin = dict(base.origin)
    for name, p in extra.parameters.items():
        params[name] = p
        origin[f"param:{name}"] = source
    rules = {r.id: r for r in base.book.rules}
    for r in extra.rules:
        rules[r.id] = r
        origin[r.id] = source
    book = Rulebook(rulebook=base.book.rulebook, version=base.book.version, parameters=params)
    book.rules = sorted(rules.values(), key=lambda r: r.id)
    return LoadedRulebook(book, origin)


def load_files(
    paths: list[Path],
    seed: LoadedRulebook | None = None,
    read: Callable[[Path], Any] = read_rule_file,
) -> LoadedRulebook:
    """Load rule files in order. Without `seed` they form a rulebook of their own; with one
    they are layered on it, replacing its rules by id. An id or parameter defined twice among
    `paths` themselves is an error either way. `read` gives a file's YAML data."""
    loaded = seed or LoadedRulebook(Rulebook(rulebook="disaggregation"))
    books = []
    for path in paths:
        book = parse_rulebook(read(path), str(path))
        books.append((str(path), book))
        loaded = merge(loaded, book, str(path))
    duplicates = lint.duplicate_problems(books)
    if duplicates:
        raise UserError(_problem_text("rule ids and parameters must be unique", duplicates))
    for rule in loaded.book.rules:
        check_names(rule, loaded.book.parameters, loaded.origin.get(rule.id, "rulebook"))
    return loaded


@cache
def shipped() -> LoadedRulebook:
    """The shipped rulebook, its files' data read from the JSON snapshot when current
    (`shipped_data.py`: the same data, parsed faster), and checked like any rule file."""
    from disagg_decider.shipped_data import load_shipped

    def read(path: Path) -> Any:
        return load_shipped(path, read_rule_file)

    return load_files(sorted(rulebook_dir().glob("*.yaml")), read=read)


def with_extra(paths: list[Path]) -> LoadedRulebook:
    """The shipped rulebook plus user files (which may replace rules by id)."""
    if not paths:
        return shipped()
    return load_files(paths, seed=shipped())


def coerce_override(name: str, raw: Any, param: Parameter, source: str) -> Any:
    """Convert `--set name=value` text (or a YAML value) to the parameter's type."""
    current = param.value
    try:
        if isinstance(current, bool):
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("true", "yes", "1"):
                return True
            if text in ("false", "no", "0"):
                return False
            raise ValueError
        if isinstance(current, int | float):
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError
            if not param.allows(value):
                low, high = param.bounds()
                raise UserError(
                    f"{source}: {excerpt(name)}={excerpt(raw)}: outside its range "
                    f"[{low:g}, {high:g}] {param.unit}"
                )
            return int(value) if isinstance(current, int) and value.is_integer() else value
        return str(raw)
    except ValueError:
        kind = type(current).__name__
        raise UserError(
            f"{source}: {excerpt(name)}={excerpt(raw)}: expected a {kind} like {current!r}"
        ) from None


def apply_overrides(
    loaded: LoadedRulebook, values: dict[str, Any], overrides: dict[str, Any], source: str
) -> tuple[dict[str, Any], list[str]]:
    """New parameter values with `overrides` applied, and a note per override."""
    values = dict(values)
    notes = []
    for name, raw in overrides.items():
        if name not in loaded.book.parameters:
            raise UserError(
                f"{source}: unknown rule parameter {excerpt(name)}; "
                f"{nearest(name, list(loaded.book.parameters))}"
            )
        new = coerce_override(name, raw, loaded.book.parameters[name], source)
        notes.append(f"{name}: {excerpt(values[name])} -> {excerpt(new)} ({source})")
        values[name] = new
    return values, notes
