"""Evaluate the rulebook against one workload's metrics and reach a decision.

Order, deterministic: vetoes first (a colocate veto ends it; an orchestrator veto picks the
orchestrator), then weighted effects: disaggregate only if its weight beats colocate's (ties
colocate), then the orchestrator by weight (ties to Dynamo, which also runs without
Kubernetes).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from disagg_decider.rules.schema import All, AnyOf, Leaf, Not, Rule, Rulebook
from disagg_decider.verdict import Comparison, FiredRule
from disagg_decider.verdict import Reference as OutReference

_ORDERING = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def compare(actual: Any, op: str, threshold: Any) -> bool:
    """One comparison; a missing metric or mismatched types never holds."""
    if actual is None:
        return False
    if op == "==":
        return actual == threshold
    if op == "!=":
        return actual != threshold
    if op == "in":
        return actual in threshold
    if op == "not_in":
        return actual not in threshold
    if isinstance(actual, bool) or isinstance(threshold, bool | str) or isinstance(actual, str):
        return False
    return _ORDERING[op](actual, threshold)


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
        Comparison.model_construct(
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
    trail: list = []
    if not evaluate(rule.when, metrics, params, trail):
        return None
    return FiredRule(
        id=rule.id,
        name=rule.name,
        title=rule.title,
        category=rule.category,
        kind="veto" if rule.veto else "effect",
        pushes=rule.pushes,
        weight=rule.effect.weight if rule.effect else 0.0,
        compared=comparisons(trail),
        rationale=rule.rationale.strip(),
        references=[OutReference(title=x.title, url=x.url) for x in rule.references],
    )


@dataclass(frozen=True)
class Outcome:
    decision: str  # colocate | dynamo | llm-d
    fired: list[FiredRule]
    scores: dict[str, float]
    deciding_veto: FiredRule | None


def decide(book: Rulebook, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Outcome:
    fired = [f for rule in book.rules if (f := fires(rule, metrics, params)) is not None]
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
