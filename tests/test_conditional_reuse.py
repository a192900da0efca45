"""Issue 27: the conditional layout reuses what its search already computed, with the same bits.

Each reuse is switched off in turn (the path that computes the value again, as before) and
the conditional results of the examples and of a seeded batch must be equal, every float
exactly (`ConditionalResult` equality):

- the search's rows (`threshold_pools.SearchRows`: the parts' lengths, KV paths, prefill pools
  and ingress bounds) read by the settling and the pricing (`thresholds.block_rows`);
- the decode workers' lines and grid the settling built, read by the lift
  (`conditional_rows._settled_workers`);
- the lift's rows read by the sizing and the report (`conditional_rows.Lifted.index`);
- the sizing's decode-worker terms at the workload's rate, read by the report
  (`conditional_sizing.Priced.at_picked`);
- a first grid that prices every split, which `split_grid.refine` would settle on at once
  (`split_grid.prices_every_size`);
- the lift's decode-worker lines and grid taken on by the sizing, where a smaller split keeps
  the candidate's decode workers (`conditional_sizing._with_servers`, `Layouts.has_workers`);
- the decode workers' load curve kept with their grid (`colocated_load.load_curve`), read by
  every round of the settling's and the lift's searches on it.

`tp_pairs` asks the engine's rule and KV room for every degree at once: the same answers as
asking degree by degree, pair by pair. `tests/test_golden_outputs.py` checks whole verdicts.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from disagg_decider.calc import compare
from disagg_decider.calc.layouts import split_grid
from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.search import pairs_allowed
from disagg_decider.calc.modes import (
    conditional,
    conditional_rows,
    conditional_sizing,
    overall_ttft,
)
from disagg_decider.calc.replicas import colocated_load
from disagg_decider.workload import load_workload, resolve
from tests.conftest import EXAMPLES, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from workload_mix import workload_mix

REUSES = {
    "search rows": [(conditional, "block_rows"), (conditional_rows, "block_rows")],
    "settled workers": [(conditional_rows, "_settled_workers")],
    "lifted rows": [(conditional_rows.Lifted, "index")],
    "sized terms": [(conditional_sizing.Priced, "at_picked")],
    "whole first grid": [(split_grid, "prices_every_size")],
    "workers' capacity off their grid": [(overall_ttft, "_capacity_off_grid")],
    "load curve kept with its grid": [(colocated_load, "load_curve")],
    "sizing's workers taken from the lift": [(overall_ttft.Layouts, "has_workers")],
}
NONE = {  # what each returns when its reuse is off
    "block_rows": lambda cands: None,
    "_settled_workers": lambda cands: [],
    "index": lambda self, chosen: None,
    "at_picked": lambda self: None,
    "prices_every_size": lambda budget, p_tp, d_tp: False,
    "_capacity_off_grid": lambda grid: None,
    "has_workers": lambda self: False,
    # worked out again at every call (`colocated_load._load_curve`), nothing kept
    "load_curve": lambda grid, n, size: colocated_load._load_curve(grid, (n, size)),
}


def _resolved() -> list:
    workloads = [load_workload(p) for p in EXAMPLES] + workload_mix(24, seed=11)
    return [resolve(w, EXAMPLES[0].parent) for w in workloads]


@pytest.fixture(scope="module")
def resolved() -> list:
    return _resolved()


@pytest.fixture(scope="module")
def reused(resolved) -> list:
    return [a.conditional for a in compare.analyze_many(resolved)]


@pytest.mark.parametrize("reuse", list(REUSES))
def test_each_reuse_gives_what_computing_again_gives(reuse, resolved, reused, monkeypatch):
    calls = {"n": 0}
    for owner, name in REUSES[reuse]:
        off = NONE[name]

        def counted(*args, off=off):
            calls["n"] += 1
            return off(*args)

        monkeypatch.setattr(owner, name, counted)
    again = [a.conditional for a in compare.analyze_many(resolved)]
    assert calls["n"] > 0  # the reuse is on the decisions' path
    assert sum(c is not None and c.layout == "conditional" for c in reused) >= 5
    assert again == reused  # every field, every float exactly


def test_a_workload_decided_alone_gets_what_it_gets_in_the_batch(resolved, reused):
    """A workload decided alone reuses only its own rows: the same result as in the batch."""
    alone = [compare.analyze_many([r])[0].conditional for r in resolved[:12]]
    assert alone == reused[:12]


def test_tp_pairs_rule_and_memory_asked_at_once_equal_asking_one_by_one(resolved):
    """`tp_pairs` asks `pairs_allowed` for every (prefill, decode) degree at once and the
    engine's KV room for every degree at once: the same answers as one at a time."""
    from disagg_decider.calc.layouts.layout_choices import TP_CANDIDATES

    degrees = [int(t) for t in TP_CANDIDATES]
    for r in resolved:
        w = r.workload
        room = engine_for(r, np.array(degrees, dtype=float)).kv_capacity_bytes()
        assert np.ravel(room > 0).tolist() == [engine_for(r, float(t)).fits() for t in degrees]
        allowed = pairs_allowed(w.engine, np.array(degrees), np.array(degrees), w.cluster.gpus)
        for i, p in enumerate(degrees):
            for j, d in enumerate(degrees):
                one = pairs_allowed(w.engine, np.array([p]), np.array([d]), w.cluster.gpus)
                assert bool(allowed[i, j]) == bool(np.ravel(one)[0])


def test_a_kept_load_curve_gives_every_mode_what_a_fresh_one_gives(resolved, monkeypatch):
    """The colocated mode's load search (`rate_within_targets`) reads the kept curve too: the
    whole analyses equal with the curve worked out again at every call."""
    kept = compare.analyze_many(resolved[:12])
    calls = {"n": 0}

    def fresh(grid, n, size):
        calls["n"] += 1
        return NONE["load_curve"](grid, n, size)

    monkeypatch.setattr(colocated_load, "load_curve", fresh)
    assert compare.analyze_many(resolved[:12]) == kept
    assert calls["n"] > 12


def test_a_grid_built_from_another_starts_with_nothing_kept():
    from dataclasses import replace

    from disagg_decider.calc.replicas.colocated import ColocatedGrid, grid_rows

    rates = np.array([[1.0, 2.0, 3.0]])
    g = ColocatedGrid(rates, None, rates, None, rates[:, 0], rates[:, 0])
    colocated_load.load_curve(g, 1, 3)
    assert g._memo
    assert not grid_rows(g, lambda v: v)._memo
    assert not replace(g, rate_per_s=rates[:, ::-1])._memo
    with pytest.raises(TypeError):  # the memo is no field a caller may pass on
        ColocatedGrid(**vars(g))
