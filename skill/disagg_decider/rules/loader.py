"""Load, merge and check rulebooks: the shipped one, extra files, parameter overrides.

Every metric and parameter a rule names is checked at load time, so a typo fails before any
workload is evaluated, with the file, the rule id and the nearest valid name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from disagg_decider.errors import UserError, nearest
from disagg_decider.metrics import BY_NAME
from disagg_decider.rules.schema import All, AnyOf, Leaf, Not, Parameter, Rule, Rulebook
from disagg_decider.yamlio import load_yaml_file


def rulebook_dir() -> Path:
    """The shipped rulebook: package data in a wheel, the repository's rules/ in a checkout."""
    packaged = resources.files("disagg_decider").joinpath("rulebook")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "rules"


@dataclass
class LoadedRulebook:
    book: Rulebook
    origin: dict[str, str] = field(default_factory=dict)  # rule id or parameter -> file

    def param_values(self) -> dict[str, Any]:
        return {name: p.value for name, p in self.book.parameters.items()}


def parse_rulebook(data: Any, source: str) -> Rulebook:
    if not isinstance(data, dict):
        raise UserError(f"{source}: a rulebook is a mapping with 'rulebook', 'parameters', 'rules'")
    try:
        return Rulebook.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_errors(exc, data, source)) from None


def _format_errors(exc: ValidationError, data: dict, source: str) -> str:
    lines = [f"{source}: invalid rulebook"]
    rules = data.get("rules") if isinstance(data.get("rules"), list) else []
    for err in exc.errors():
        loc = list(err["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int) and loc[1] < len(rules):
            raw = rules[loc[1]]
            rid = raw.get("id", f"#{loc[1] + 1}") if isinstance(raw, dict) else f"#{loc[1] + 1}"
            where = f"rule {rid}: "
            loc = loc[2:]
        path = ".".join(str(p) for p in loc if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        lines.append(f"  {where}{path}: {msg}")
    return "\n".join(lines)


def _leaves(node) -> list[Leaf]:
    if isinstance(node, Leaf):
        return [node]
    if isinstance(node, All):
        return [x for n in node.all for x in _leaves(n)]
    if isinstance(node, AnyOf):
        return [x for n in node.any for x in _leaves(n)]
    if isinstance(node, Not):
        return _leaves(node.not_)
    return []


def check_names(rule: Rule, parameters: dict[str, Parameter], source: str) -> None:
    """Every metric and parameter a rule names must exist."""
    for leaf in _leaves(rule.when):
        if leaf.metric not in BY_NAME:
            raise UserError(
                f"{source}: rule {rule.id}: unknown metric '{leaf.metric}'; "
                f"{nearest(leaf.metric, list(BY_NAME))}"
            )
        if leaf.param is not None and leaf.param not in parameters:
            raise UserError(
                f"{source}: rule {rule.id}: unknown parameter '{leaf.param}'; "
                f"{nearest(leaf.param, list(parameters)) if parameters else 'none are defined'}"
            )


def rule_leaves(rule: Rule) -> list[Leaf]:
    return _leaves(rule.when)


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


def load_files(paths: list[Path], seed: LoadedRulebook | None = None) -> LoadedRulebook:
    loaded = seed or LoadedRulebook(Rulebook(rulebook="disaggregation"))
    books = []
    for path in paths:
        book = parse_rulebook(load_yaml_file(path), str(path))
        books.append((book, str(path)))
        loaded = merge(loaded, book, str(path))
        for name in book.parameters:
            if sum(name in b.parameters for b, _ in books) > 1 and seed is None:
                raise UserError(f"{path}: parameter '{name}' is defined in more than one file")
    ids = [r.id for b, _ in books for r in b.rules]
    if seed is None and len(ids) != len(set(ids)):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise UserError(f"duplicate rule ids in the rulebook: {', '.join(dup)}")
    for rule in loaded.book.rules:
        check_names(rule, loaded.book.parameters, loaded.origin.get(rule.id, "rulebook"))
    return loaded


@cache
def shipped() -> LoadedRulebook:
    return load_files(sorted(rulebook_dir().glob("*.yaml")))


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
            return int(value) if isinstance(current, int) and value.is_integer() else value
        return str(raw)
    except ValueError:
        kind = type(current).__name__
        raise UserError(f"{source}: {name}={raw!r}: expected a {kind} like {current!r}") from None


def apply_overrides(
    loaded: LoadedRulebook, values: dict[str, Any], overrides: dict[str, Any], source: str
) -> tuple[dict[str, Any], list[str]]:
    """New parameter values with `overrides` applied, and a note per override."""
    values = dict(values)
    notes = []
    for name, raw in overrides.items():
        if name not in loaded.book.parameters:
            raise UserError(
                f"{source}: unknown rule parameter '{name}'; "
                f"{nearest(name, list(loaded.book.parameters))}"
            )
        new = coerce_override(name, raw, loaded.book.parameters[name], source)
        notes.append(f"{name}: {values[name]!r} -> {new!r} ({source})")
        values[name] = new
    return values, notes
