"""Verdicts mean what the recorded golden outputs say: decisions, layouts and text identical,
every number within `meaning.REL_TOL` (1e-9) relative.

Compared by meaning, not bytes (`tests/meaning.py` says why): the last bit of numpy's exp/log
differs between CPUs, so a byte comparison passes on the machine that recorded the fixture
and fails on a user's clone. `test_outputs_hold_with_exp_and_log_moved_by_four_ulp` checks
that portability here, on any machine, by moving every exp and log result by 4 ulp.

The fixture and how to refresh it after a deliberate change of outputs are described in
`tests/golden_outputs.py`:

    PYTHONPATH=skill python tests/golden_outputs.py --update
"""

from __future__ import annotations

import copy
import json

import pytest

from tests import golden_outputs as golden
from tests import meaning
from tests.conftest import EXAMPLES

REFRESH = "deliberate change? refresh: PYTHONPATH=skill python tests/golden_outputs.py --update"
ULPS = 4


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


def test_outputs_mean_what_the_recorded_ones_do(recorded, current):
    lines = golden.differences(recorded, current)
    assert not lines, "\n".join([*lines, REFRESH])


def test_one_by_one_verdicts_equal_the_batched_ones(recorded):
    """`decide` alone (one CLI call, one MCP call) gives what the batch recorded."""
    mix = golden.workload_mix(golden.MIX_WORKLOADS, seed=golden.MIX_SEED)
    for i in range(0, golden.MIX_WORKLOADS, 41):  # spread over every example's variations
        found = meaning.differences(
            recorded["mix"][i]["verdict"], golden.verdict_data(golden.decide(mix[i]))
        )
        assert not found, (i, [str(d) for d in found[:5]], REFRESH)


def test_the_fixture_stays_small():
    assert golden.FIXTURE.stat().st_size < 1_000_000


# --- the comparison itself fails where it should, and names what moved ---------------------


def _first_split(recorded: dict) -> int:
    return next(
        i for i, row in enumerate(recorded["mix"]) if row["verdict"]["decision"] != "colocate"
    )


def test_a_changed_decision_fails_and_names_the_workload_and_field(recorded):
    i = _first_split(recorded)
    edited = copy.deepcopy(recorded)
    was = edited["mix"][i]["verdict"]["decision"]
    edited["mix"][i]["verdict"]["decision"] = "colocate"
    lines = golden.differences(recorded, edited)
    name = recorded["mix"][i]["workload"]["name"]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"mix[{i}] {name}: decision:"), lines
    assert repr(was) in lines[0] and "'colocate'" in lines[0]


def test_a_changed_layout_fails_and_names_it(recorded):
    edited = copy.deepcopy(recorded)
    sizing = edited["examples"]["rag-8k-h200-rdma-dynamo.yaml"]["verdict"]["sizing"]
    key = next(k for k, v in sizing.items() if isinstance(v, int) and not isinstance(v, bool))
    sizing[key] += 1
    lines = golden.differences(recorded, edited)
    assert lines == [
        f"examples/rag-8k-h200-rdma-dynamo.yaml: sizing.{key}: recorded {sizing[key] - 1}, "
        f"computed {sizing[key]} (relative difference {1 / sizing[key]:.3g})"
    ]


def test_a_number_moved_beyond_the_tolerance_fails_and_one_within_it_does_not(recorded):
    i = _first_split(recorded)
    path = ("metrics", "gain")
    value = recorded["mix"][i]["verdict"][path[0]][path[1]]
    assert isinstance(value, float) and value != 0
    for factor, fails in ((1 + 100 * meaning.REL_TOL, True), (1 + meaning.REL_TOL / 100, False)):
        edited = copy.deepcopy(recorded)
        edited["mix"][i]["verdict"][path[0]][path[1]] = value * factor
        lines = golden.differences(recorded, edited)
        assert bool(lines) is fails, lines
        if fails:
            assert "metrics.gain" in lines[0] and "relative difference" in lines[0]


def test_changed_text_fails_however_small_the_change(recorded):
    edited = copy.deepcopy(recorded)
    verdict = edited["examples"]["chat-short-colocate.yaml"]["verdict"]
    verdict["summary"] = verdict["summary"] + " "
    assert golden.differences(recorded, edited)


# --- portability: the last bits of exp and log do not matter --------------------------------


@pytest.fixture()
def exp_and_log_moved(monkeypatch):
    meaning.move_exp_and_log(monkeypatch, ULPS)


def test_outputs_hold_with_exp_and_log_moved_by_four_ulp(recorded, current, exp_and_log_moved):
    """What another CPU's numpy does to the last bits, done here: the verdicts must hold.

    The same run shows the bytes moved against the unmoved run, so a byte comparison fails it.
    """
    moved = golden.compute()
    lines = golden.differences(recorded, moved)
    assert not lines, "\n".join(lines)
    changed_bytes = sum(
        json.dumps(m["verdict"], sort_keys=True) != json.dumps(c["verdict"], sort_keys=True)
        for m, c in zip(moved["mix"], current["mix"], strict=True)
    )
    assert changed_bytes > golden.MIX_WORKLOADS // 4, changed_bytes
