"""Issue 27: the colocated search skips work it can bound, and answers as if it had done it.

- `colocated._below_batch_one` evaluates the low-load line (a p99 TTFT bisection) only on
  failing lines whose bound (their rate at B = 1, their idle TPOT, whether a sequence fits)
  lets them carry the workload's rate: on every call a decision makes, on the examples and
  on a seeded batch, the pruned answer must equal the exhaustive one (`one=None`) bit for bit,
  and the bound must actually leave lines out.

No timing here: the call counts are `benchmarks/decide_calls.py`'s.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from disagg_decider.calc.replicas import colocated
from disagg_decider.decide import decide_many
from disagg_decider.workload import load_workload
from tests.conftest import EXAMPLES, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from workload_mix import workload_mix

MIX_WORKLOADS = 96
MIX_SEED = 27


@pytest.fixture(scope="module")
def workloads() -> list:
    return [load_workload(p) for p in EXAMPLES] + workload_mix(MIX_WORKLOADS, seed=MIX_SEED)


def test_low_load_bound_gives_the_exhaustive_answer(workloads, monkeypatch) -> None:
    exhaustive = colocated._below_batch_one
    seen = {"calls": 0, "failing": 0, "rescued": 0}

    def both(at, rate, batch, wanted, one):
        pruned = exhaustive(at, rate, batch, wanted, one)
        full = exhaustive(at, rate, batch, wanted, None)
        for got, want in zip(pruned, full, strict=True):
            np.testing.assert_array_equal(got, want)
        seen["calls"] += 1
        failing = np.ravel(rate) <= 0.0
        seen["failing"] += int(np.count_nonzero(failing))
        seen["rescued"] += int(np.count_nonzero(failing & (np.ravel(full[0]) > 0.0)))
        return pruned

    monkeypatch.setattr(colocated, "_below_batch_one", both)
    decide_many(workloads)
    assert seen["calls"] >= len(EXAMPLES)
    # Many lines fail on the grid, and the batch rescues some below B = 1: the bound is
    # checked on both kinds.
    assert seen["failing"] > 1_000
    assert seen["rescued"] > 0
