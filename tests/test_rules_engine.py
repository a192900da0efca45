"""The engine's decision semantics, on small hand-built rulebooks and on the shipped one.

Vetoes first (a colocate veto ends it), then weights (disaggregate must beat colocate; ties
colocate), then the orchestrator (a veto, else weights; ties to Dynamo), and the same answer
whatever order the rules are listed in.
"""

from __future__ import annotations

import random

import pytest

from disagg_decider.calc.compare import analyze
from disagg_decider.metrics import metric_values
from disagg_decider.rules import engine
from disagg_decider.rules.loader import shipped
from disagg_decider.rules.schema import Rule, Rulebook
from disagg_decider.workload import load_workload, resolve
from tests.conftest import EXAMPLES


def make_rule(rule_id: str, flag: str, pushes: str, weight: float | None = None) -> Rule:
    """A rule that fires when the bool metric `flag` is true; a veto when `weight` is None."""
    push = (
        {"veto": {"pushes": pushes}}
        if weight is None
        else {"effect": {"pushes": pushes, "weight": weight}}
    )
    return Rule.model_validate(
        {
            "id": rule_id,
            "name": rule_id.lower(),
            "title": rule_id,
            "category": "feasibility",
            "when": {"metric": flag, "op": "==", "value": True},
            **push,
            "rationale": "test",
            "references": [{"title": "t", "url": "u"}],
            "examples": {"fires": [{flag: True}], "silent": [{flag: False}]},
        }
    )


def book(*rules: Rule) -> Rulebook:
    return Rulebook(rulebook="test", rules=list(rules))


FLAGS = ("kubernetes", "network_rdma", "cncf_commitment", "model_is_moe", "wants_sla_planner")


def on(*flags: str) -> dict[str, bool]:
    return {f: f in flags for f in FLAGS}


def test_a_colocate_veto_beats_any_weight() -> None:
    b = book(
        make_rule("TST001", "kubernetes", "colocate"),
        make_rule("TST002", "network_rdma", "disaggregate", 100),
    )
    outcome = engine.decide(b, on("kubernetes", "network_rdma"), {})
    assert outcome.decision == "colocate"
    assert outcome.deciding_veto is not None and outcome.deciding_veto.id == "TST001"
    assert outcome.scores["disaggregate"] == 100 > outcome.scores["colocate"]
    # without the veto the same weights disaggregate
    assert engine.decide(b, on("network_rdma"), {}).decision == "dynamo"


def test_ties_go_to_colocation() -> None:
    b = book(
        make_rule("TST001", "kubernetes", "colocate", 2),
        make_rule("TST002", "network_rdma", "disaggregate", 2),
    )
    tie = engine.decide(b, on("kubernetes", "network_rdma"), {})
    assert tie.scores["colocate"] == tie.scores["disaggregate"] == 2
    assert tie.decision == "colocate" and tie.deciding_veto is None
    assert engine.decide(b, on(), {}).decision == "colocate"  # nothing fired: 0 vs 0
    assert engine.decide(b, on("network_rdma"), {}).decision != "colocate"


def test_an_orchestrator_veto_picks_the_orchestrator_against_weights() -> None:
    b = book(
        make_rule("TST001", "network_rdma", "disaggregate", 1),
        make_rule("TST002", "cncf_commitment", "llm-d", 10),
        make_rule("TST003", "kubernetes", "dynamo"),
    )
    assert engine.decide(b, on("network_rdma", "cncf_commitment"), {}).decision == "llm-d"
    vetoed = engine.decide(b, on("network_rdma", "cncf_commitment", "kubernetes"), {})
    assert vetoed.decision == "dynamo"
    assert vetoed.deciding_veto is not None and vetoed.deciding_veto.id == "TST003"


def test_an_orchestrator_veto_does_not_make_a_colocate_verdict_disaggregate() -> None:
    b = book(make_rule("TST001", "kubernetes", "dynamo"))
    assert engine.decide(b, on("kubernetes"), {}).decision == "colocate"


def test_orchestrator_weights_only_matter_once_disaggregation_wins() -> None:
    b = book(
        make_rule("TST001", "network_rdma", "disaggregate", 3),
        make_rule("TST002", "kubernetes", "colocate", 5),
        make_rule("TST003", "cncf_commitment", "llm-d", 50),
        make_rule("TST004", "model_is_moe", "dynamo", 1),
    )
    lost = engine.decide(b, on("network_rdma", "kubernetes", "cncf_commitment"), {})
    assert lost.decision == "colocate" and lost.scores["llm-d"] == 50
    assert engine.decide(b, on("network_rdma", "cncf_commitment"), {}).decision == "llm-d"
    assert engine.decide(b, on("network_rdma", "model_is_moe"), {}).decision == "dynamo"


def test_orchestrator_ties_go_to_dynamo() -> None:
    b = book(
        make_rule("TST001", "network_rdma", "disaggregate", 1),
        make_rule("TST002", "cncf_commitment", "llm-d", 2),
        make_rule("TST003", "model_is_moe", "dynamo", 2),
    )
    assert engine.decide(b, on("network_rdma", "cncf_commitment", "model_is_moe"), {}).decision == (
        "dynamo"
    )


def test_a_missing_or_mistyped_metric_never_holds() -> None:
    assert not engine.compare(None, "<", 3)
    assert not engine.compare("low", "<", 3)
    assert not engine.compare(True, ">", 0)
    assert engine.compare(2, "<", 3) and engine.compare("low", "in", ["low", "medium"])


def _example_metrics() -> list[tuple[str, dict]]:
    rows = []
    for path in EXAMPLES:
        resolved = resolve(load_workload(path), path.parent)
        rows.append((path.stem, metric_values(resolved, analyze(resolved))))
    return rows


@pytest.mark.parametrize(("name", "metrics"), _example_metrics())
def test_the_shipped_rulebook_is_deterministic_and_order_free(name: str, metrics: dict) -> None:
    loaded = shipped()
    params = loaded.param_values()
    first = engine.decide(loaded.book, metrics, params)
    again = engine.decide(loaded.book, metrics, params)
    assert [f.model_dump() for f in first.fired] == [f.model_dump() for f in again.fired]
    rng = random.Random(7)
    for _ in range(5):
        rules = list(loaded.book.rules)
        rng.shuffle(rules)
        shuffled = engine.decide(book(*rules), metrics, params)
        assert shuffled.decision == first.decision, name
        assert shuffled.scores == first.scores
        assert {f.id for f in shuffled.fired} == {f.id for f in first.fired}


def test_a_colocate_veto_beats_a_disaggregate_veto_whatever_their_order():
    from disagg_decider.rules.engine import decide as run
    from disagg_decider.rules.schema import Rulebook

    def book(first: str, second: str) -> Rulebook:
        rules = []
        for rid, pushes in ((first, "disaggregate"), (second, "colocate")):
            rules.append(
                {
                    "id": rid,
                    "name": f"gate-{rid.lower()}",
                    "title": f"gate {rid}",
                    "category": "feasibility",
                    "when": {"metric": "kubernetes", "op": "==", "value": True},
                    "veto": {"pushes": pushes},
                    "rationale": "test",
                    "references": [{"title": "t", "url": "https://example.org"}],
                    "examples": {
                        "fires": [{"kubernetes": True}],
                        "silent": [{"kubernetes": False}],
                    },
                }
            )
        return Rulebook.model_validate({"rulebook": "t", "rules": rules})

    for first, second in (("AAA001", "ZZZ001"), ("ZZZ001", "AAA001")):
        out = run(book(first, second), {"kubernetes": True}, {})
        assert out.decision == "colocate"
        assert out.deciding_veto is not None and out.deciding_veto.pushes == "colocate"


def test_a_compiled_leaf_compares_as_compare_does():
    """The compiled leaf (a closure over the metric and its value or parameter): over every
    operator, values of every kind a metric or parameter can hold (missing, None, bool, str,
    int, float, nan, lists) it must hold exactly where `engine.compare` does."""
    from disagg_decider.rules.schema import Leaf

    values = [None, True, False, "dynamo", 0, 3, -2, 2.5, 3.0, float("nan"), float("inf")]
    listed = [["dynamo", "llm-d"], [3, 2.5]]
    rng = random.Random(27)
    for op in (">", ">=", "<", "<=", "==", "!="):
        for threshold in values[1:]:
            for actual in [*values, "missing"]:
                metrics = {} if actual == "missing" else {"m": actual}
                want = engine.compare(metrics.get("m"), op, threshold)
                # model_construct: the schema refuses a non-finite value, the closure need not
                by_value = engine.predicate(
                    Leaf.model_construct(metric="m", op=op, param=None, value=threshold)
                )
                by_param = engine.predicate(Leaf(metric="m", op=op, param="t"))
                assert by_value(metrics, {}) is want, (op, actual, threshold)
                assert by_param(metrics, {"t": threshold}) is want, (op, actual, threshold)
    for op in ("in", "not_in"):
        for threshold in listed:
            for actual in [*rng.sample(values, 6), "llm-d", 3]:
                want = engine.compare(actual, op, threshold)
                leaf = engine.predicate(Leaf(metric="m", op=op, value=threshold))
                assert leaf({"m": actual}, {}) is want, (op, actual, threshold)
                by_param = engine.predicate(Leaf(metric="m", op=op, param="t"))
                assert by_param({"m": actual}, {"t": threshold}) is want, (op, actual)
            missing = engine.predicate(Leaf(metric="m", op=op, value=threshold))
            assert missing({}, {}) is engine.compare(None, op, threshold) is False
