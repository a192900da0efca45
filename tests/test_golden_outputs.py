"""Verdicts are byte-identical to the recorded golden outputs (issue 17: speed work changes none).

The fixture and how to refresh it after a deliberate change of outputs are described in
`tests/golden_outputs.py`:

    PYTHONPATH=skill python tests/golden_outputs.py --update
"""

from __future__ import annotations

import pytest

from tests import golden_outputs as golden
from tests.conftest import EXAMPLES

REFRESH = "deliberate change? refresh: PYTHONPATH=skill python tests/golden_outputs.py --update"


@pytest.fixture(scope="module")
def recorded() -> dict:
    return golden.load()


@pytest.fixture(scope="module")
def current() -> dict:
    return golden.compute()


def test_every_example_and_the_seeded_batches_are_recorded(recorded):
    assert sorted(recorded["examples"]) == [p.name for p in EXAMPLES]
    assert len(recorded["mix"]) == golden.MIX_WORKLOADS
    assert len(recorded["hetero"]) == golden.HETERO_WORKLOADS


def test_outputs_are_identical_to_the_recorded_ones(recorded, current):
    lines = golden.differences(recorded, current)
    assert not lines, "\n".join([*lines, REFRESH])


def test_one_by_one_verdicts_equal_the_batched_ones(recorded):
    """`decide` alone (one CLI call, one MCP call) gives what the batch recorded, byte for byte."""
    mix = golden.workload_mix(golden.MIX_WORKLOADS, seed=golden.MIX_SEED)
    picks = range(0, golden.MIX_WORKLOADS, 41)  # spread over every example's variations
    for i in picks:
        v = golden.decide(mix[i])
        assert golden.digest(golden.verdict_json(v)) == recorded["mix"][i]["verdict"], (i, REFRESH)


def test_the_fixture_stays_small():
    assert golden.FIXTURE.stat().st_size < 1_000_000
