"""Issue 27 (fifth round): the colocated headroom sums the TTFT miss over the quantile nodes
only where it may be the binding ratio (`colocated._ttft_ratio`), and answers as if it had
summed it everywhere.

On every evaluation a decision makes (the examples and a seeded batch), the headroom with the
bound must equal the exhaustive one (`BOUND_MIN_POINTS` above every evaluation) bit for bit,
and the bound must actually leave entries out. `queueing.sum_exceed_where` must give each
entry's `sum_exceed_probability` bits, and 0 at the others.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from disagg_decider.calc.queues import queueing
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


def test_bounded_ttft_ratio_gives_the_exhaustive_headroom(workloads, monkeypatch) -> None:
    bounded = colocated._ttft_ratio
    seen = {"calls": 0, "bounded": 0, "points": 0, "skipped": 0}

    def both(at, q, tail, others):
        got = bounded(at, q, tail, others)
        monkeypatch.setattr(colocated, "BOUND_MIN_POINTS", 10**12)
        want = bounded(at, q, tail, others)
        monkeypatch.setattr(colocated, "BOUND_MIN_POINTS", limit)
        np.testing.assert_array_equal(1.0 - np.maximum(got, others), 1.0 - np.maximum(want, others))
        seen["calls"] += 1
        if np.size(others) >= limit:
            seen["bounded"] += 1
            seen["points"] += np.size(got)
            seen["skipped"] += int(np.count_nonzero(np.isneginf(got) & ~np.isneginf(want)))
        return got

    limit = colocated.BOUND_MIN_POINTS
    monkeypatch.setattr(colocated, "_ttft_ratio", both)
    decide_many(workloads)
    assert seen["calls"] >= len(EXAMPLES)
    assert seen["bounded"] > 10
    # Most points of a batch's bisection fail (or pass) on another ratio by more than the
    # TTFT's can reach: the bound must leave a good share of them out.
    assert seen["skipped"] > seen["points"] // 4, seen


def test_a_loose_bound_would_be_caught(workloads, monkeypatch) -> None:
    """The check above can fail: a bound that is not one (the tail's sum taken as at most a
    tenth) changes some headroom."""
    monkeypatch.setattr(queueing, "TAIL_WAIT_MAX", 0.1)
    with pytest.raises(AssertionError, match="not equal"):
        test_bounded_ttft_ratio_gives_the_exhaustive_headroom(workloads[:12], monkeypatch)


def test_sum_exceed_where_gives_each_entrys_bits() -> None:
    rng = np.random.default_rng(5)
    shape = (7, 9)
    nodes = np.sort(rng.uniform(10.0, 900.0, (*shape, queueing.Z_NODES.size)), axis=-1)
    c_wait = rng.uniform(0.0, 1.0, shape)
    theta = rng.uniform(0.0, 0.05, (7, 1))
    target = rng.uniform(100.0, 1000.0, (7, 1))
    over = queueing.exceed_probability(nodes, target)
    where = rng.uniform(size=shape) < 0.4
    got = queueing.sum_exceed_where(c_wait, theta, nodes, target, over, where)
    want = queueing.sum_exceed_probability(c_wait, theta, nodes, target)
    np.testing.assert_array_equal(got[where], want[where])
    assert (got[~where] == 0.0).all()
