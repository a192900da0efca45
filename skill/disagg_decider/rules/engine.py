"""Evaluate the rulebook against one workload's metrics and reach a decision.

Order, deterministic: vetoes first (a colocate veto ends it; an orchestrator veto picks the
orchestrator), then weighted effects: disaggregate only if its weight beats colocate's (ties
colocate), then the orchestrator by weight (ties to Dynamo, which also runs without
Kubernetes).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from disagg_decider.rules.schema import All, AnyOf, Leaf, Not, Rule, Rulebook, leaves
from disagg_decider.verdict import Comparison, FiredRule
from disagg_decider.verdict import Reference as OutReference

_ORDERING = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def compare(actual: Any, op: str, threshold: Any) -> bool:
    """One comparison; a missing metric or mismatched types never holds."""
    return _COMPARERS[op](actual, threshold)


_PLAIN_NUMBERS = frozenset({int, float})


def _ordered(order: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def check(actual: Any, threshold: Any) -> bool:
        if type(actual) in _PLAIN_NUMBERS and type(threshold) in _PLAIN_NUMBERS:
            return order(actual, threshold)  # the common case, checked first because cheap
        if actual is None or isinstance(actual, bool | str) or isinstance(threshold, bool | str):
            return False
        return order(actual, threshold)

    return check


_COMPARERS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, t: a is not None and a == t,
    "!=": lambda a, t: a is not None and a != t,
    "in": lambda a, t: a is not None and a in t,
    "not_in": lambda a, t: a is not None and a not in t,
    **{op: _ordered(order) for op, order in _ORDERING.items()},
}

Predicate = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]


def predicate(node) -> Predicate:
    """A condition tree as nested closures over (metrics, params).

    Every decision evaluates every rule, so each rule's tree is turned into closures once
    (see `_prepared`) instead of being walked node by node; `evaluate` is the walk that
    records what it compared, for the rules that fire.
    """
    if isinstance(node, Leaf):
        check, metric = _COMPARERS[node.op], node.metric
        if node.param is not None:
            param = node.param
            return lambda m, p: check(m.get(metric), p[param])
        value = node.value
        return lambda m, p: check(m.get(metric), value)
    if isinstance(node, All):
        parts = [predicate(n) for n in node.all]

        # Loops, not all()/any() over a generator: these run for every rule of every workload.
        def all_hold(m: Mapping[str, Any], p: Mapping[str, Any]) -> bool:
            for part in parts:  # noqa: SIM110
                if not part(m, p):
                    return False
            return True

        return all_hold
    if isinstance(node, AnyOf):
        parts = [predicate(n) for n in node.any]

        def any_holds(m: Mapping[str, Any], p: Mapping[str, Any]) -> bool:
            for part in parts:  # noqa: SIM110
                if part(m, p):
                    return True
            return False

        return any_holds
    if isinstance(node, Not):
        inner = predicate(node.not_)
        return lambda m, p: not inner(m, p)
    raise TypeError(f"unknown condition node {type(node).__name__}")


def evaluate(node, metrics: Mapping[str, Any], params: Mapping[str, Any], trail: list) -> bool:
    """Evaluate a condition tree, appending every leaf it looked at to `trail`.

    The trail holds plain tuples; only a rule that fires turns them into `Comparison` records,
    which keeps evaluating the silent rules cheap.
    """
    if isinstance(node, Leaf):
        threshold = params[node.param] if node.param is not None else node.value
        actual = metrics.get(node.metric)
        holds = compare(actual, node.op, threshold)
        trail.append((node, actual, threshold, holds))
        return holds
    if isinstance(node, All):
        return all([evaluate(n, metrics, params, trail) for n in node.all])
    if isinstance(node, AnyOf):
        return any([evaluate(n, metrics, params, trail) for n in node.any])
    if isinstance(node, Not):
        return not evaluate(node.not_, metrics, params, trail)
    raise TypeError(f"unknown condition node {type(node).__name__}")


def comparisons(trail: list) -> list[Comparison]:
    """An evaluation's trail as the records a verdict (or a lint message) shows."""
    return [
        Comparison(
            metric=leaf.metric,
            op=leaf.op,
            actual=actual,
            threshold=threshold,
            param=leaf.param,
            holds=holds,
        )
        for leaf, actual, threshold, holds in trail
    ]


def fires(rule: Rule, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> FiredRule | None:
    when, identity = _prepared(rule)
    return _fired(rule, identity, metrics, params) if when(metrics, params) else None


def _fired(
    rule: Rule, identity: dict[str, Any], metrics: Mapping[str, Any], params: Mapping[str, Any]
) -> FiredRule:
    trail: list = []
    evaluate(rule.when, metrics, params, trail)
    # Plain dicts: pydantic builds the nested records faster than one constructor call each.
    compared = [
        {
            "metric": leaf.metric,
            "op": leaf.op,
            "actual": actual,
            "threshold": threshold,
            "param": leaf.param,
            "holds": holds,
        }
        for leaf, actual, threshold, holds in trail
    ]
    return FiredRule(**identity, compared=compared)


# Compiled rules, keyed by object identity (rules are not hashable); an entry keeps its rule
# alive, so an id is never reused while cached. Rulebooks loaded per call (MCP, --rules) come
# and go, hence the bound.
_PREPARED: dict[int, tuple[Rule, Predicate, dict[str, Any]]] = {}
_CACHE_BOUND = 4096


def _prepared(rule: Rule) -> tuple[Predicate, dict[str, Any]]:
    """A rule's compiled condition and what it reports when it fires, built once per rule."""
    cached = _PREPARED.get(id(rule))
    if cached is None or cached[0] is not rule:
        if len(_PREPARED) > _CACHE_BOUND:
            _PREPARED.clear()
        cached = _PREPARED[id(rule)] = (rule, predicate(rule.when), _identity_of(rule))
    return cached[1], cached[2]


@dataclass(frozen=True)
class _Book:
    rules: list[tuple[Rule, Predicate, dict[str, Any]]]
    metrics: tuple[str, ...]


_BOOKS: dict[int, tuple[Rulebook, _Book]] = {}


def _prepared_book(book: Rulebook) -> _Book:
    """Every rule of a rulebook compiled, and the metrics they read: `decide` runs once per
    workload of a batch."""
    cached = _BOOKS.get(id(book))
    if cached is None or cached[0] is not book:
        if len(_BOOKS) > _CACHE_BOUND:
            _BOOKS.clear()
        rules = [(r, *_prepared(r)) for r in book.rules]
        read = tuple(sorted({leaf.metric for r in book.rules for leaf in leaves(r.when)}))
        cached = _BOOKS[id(book)] = (book, _Book(rules, read))
    return cached[1]


def metrics_read(book: Rulebook) -> tuple[str, ...]:
    """The metric names a rulebook's conditions compare: all `decide` needs computed."""
    return _prepared_book(book).metrics


def _identity_of(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "title": rule.title,
        "category": rule.category,
        "kind": rule.kind,
        "pushes": rule.pushes,
        "weight": rule.effect.weight if rule.effect else 0.0,
        "rationale": rule.rationale.strip(),
        "references": [OutReference(title=x.title, url=x.url) for x in rule.references],
    }


@dataclass(frozen=True)
class Outcome:
    decision: str  # colocate | dynamo | llm-d
    fired: list[FiredRule]
    scores: dict[str, float]
    deciding_veto: FiredRule | None


def decide(book: Rulebook, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Outcome:
    fired = [
        _fired(rule, identity, metrics, params)
        for rule, when, identity in _prepared_book(book).rules
        if when(metrics, params)
    ]
    scores = {k: 0.0 for k in ("colocate", "disaggregate", "dynamo", "llm-d")}
    for f in fired:
        if f.kind == "effect":
            scores[f.pushes] += f.weight
    vetoes = [f for f in fired if f.kind == "veto"]
    # A hard gate against splitting beats one for it: not being able to run two pools wins.
    colocate_veto = next((f for f in vetoes if f.pushes == "colocate"), None)
    if colocate_veto is not None:
        return Outcome("colocate", fired, scores, colocate_veto)
    split_veto = next((f for f in vetoes if f.pushes == "disaggregate"), None)
    if split_veto is None and scores["disaggregate"] <= scores["colocate"]:
        return Outcome("colocate", fired, scores, None)
    orchestrator_veto = next((f for f in vetoes if f.pushes in ("dynamo", "llm-d")), None)
    if orchestrator_veto is not None:
        return Outcome(orchestrator_veto.pushes, fired, scores, orchestrator_veto)
    winner = "llm-d" if scores["llm-d"] > scores["dynamo"] else "dynamo"
    return Outcome(winner, fired, scores, split_veto)
