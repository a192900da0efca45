"""Every rule's own examples, for every shipped rule file: adding a rule adds its tests.

Each example gives every metric its rule reads; under the rulebook's parameter values a `fires`
example must make the rule fire and a `silent` one must not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from disagg_decider.rules import engine
from disagg_decider.rules.loader import parse_rulebook, read_rule_file, rulebook_dir, shipped
from disagg_decider.rules.schema import leaves

RULE_FILES = sorted(rulebook_dir().glob("*.yaml"))


def _cases() -> list:
    cases = []
    for path in RULE_FILES:
        book = parse_rulebook(read_rule_file(path), str(path))
        for rule in book.rules:
            for expected in ("fires", "silent"):
                for i, example in enumerate(getattr(rule.examples, expected)):
                    case_id = f"{Path(path).stem}:{rule.id}:{expected}[{i}]"
                    cases.append(pytest.param(rule, expected, example, id=case_id))
    return cases


CASES = _cases()


def test_the_driver_sees_every_shipped_rule() -> None:
    """Guards the driver itself: a rule file it failed to find would pass silently."""
    assert len(RULE_FILES) >= 2
    covered = {case.values[0].id for case in CASES}
    assert covered == {r.id for r in shipped().book.rules}


@pytest.mark.parametrize(("rule", "expected", "example"), CASES)
def test_rule_example(rule, expected: str, example: dict) -> None:
    read = {leaf.metric for leaf in leaves(rule.when)}
    assert read <= set(example), f"example omits {sorted(read - set(example))}"
    params = shipped().param_values()
    fired = engine.fires(rule, example, params)
    if expected == "fires":
        assert fired is not None, f"{rule.id} should fire on {example}"
        assert fired.id == rule.id
        # the verdict reports the values the rule compared, straight from the example
        for comparison in fired.compared:
            assert comparison.actual == example[comparison.metric]
            if comparison.param:
                assert comparison.threshold == params[comparison.param]
    else:
        assert fired is None, f"{rule.id} should stay silent on {example}"
