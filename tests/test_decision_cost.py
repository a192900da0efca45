"""What issue 27 cut from a decision's cost must not change what it answers or hold memory.

- The interactivity band's TPOT targets ride in the decision's own search
  (`compare.analyze_banded`) instead of a search of their own (`interactivity._served_per_gpu`
  on variants of the workload at each target): each target's goodput per GPU must be the same
  float either way, one workload alone (own prompt and crossover grid in one search) and in a
  batch (blocks of many workloads).
- Erlang C's table is one table grown to the largest pool asked for, read through views,
  rather than a table per pool size cached for the life of the process (a batch worker's
  memory crept as new sizes appeared).

No timing here: the CPU figures are in `benchmarks/decide_cpu.py` and the README.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from disagg_decider import interactivity
from disagg_decider.calc import compare
from disagg_decider.calc.queues import erlang
from disagg_decider.decide import decide_many
from disagg_decider.workload import load_workload, resolve
from tests.conftest import EXAMPLES, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from workload_mix import workload_mix


def _searched_apart(resolved: list) -> list[list[tuple[float, float]]]:
    """Each workload's band points as `band_curves` searched them before: a search of their
    own over the workload with each target set."""
    targets = interactivity.band_tpot_ms()
    variants = [interactivity.at_tpot(r, t) for r in resolved for t in targets]
    flat = interactivity._served_per_gpu(variants)
    return [flat[i * len(targets) : (i + 1) * len(targets)] for i in range(len(resolved))]


def _resolved(workloads: list) -> list:
    return [resolve(w, EXAMPLES[0].parent) for w in workloads]


def _plain(resolved: list) -> list:
    """Those the decision's search prices the band for: one GPU type, the p99 basis."""
    return [
        r
        for r in resolved
        if not r.workload.cluster.heterogeneous and r.workload.slo.basis == "p99-under-load"
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_band_from_the_decisions_search_equals_its_own_search_one_workload(path) -> None:
    resolved = _resolved([load_workload(path)])
    _, searched = compare.analyze_banded(resolved, interactivity.band_tpot_ms())
    if not _plain(resolved):
        assert searched == [None]  # priced by band_curves, as before
        return
    assert searched == _searched_apart(resolved)


def test_band_from_the_decisions_search_equals_its_own_search_in_a_batch() -> None:
    """A seeded mix decided as one batch: blocks of many workloads, several engines."""
    resolved = _plain(_resolved(workload_mix(96, seed=27)))
    assert len(resolved) > 40
    _, searched = compare.analyze_banded(resolved, interactivity.band_tpot_ms())
    assert searched == _searched_apart(resolved)


def test_verdict_bands_equal_those_of_the_separate_search() -> None:
    """The verdict's band (edges, inside, reach) is what the separate search gave."""
    workloads = [load_workload(p) for p in EXAMPLES] + workload_mix(24, seed=5)
    verdicts = decide_many(workloads, base_dir=EXAMPLES[0].parent)
    resolved = _resolved(workloads)
    analyses = compare.analyze_many(resolved)
    analyses = [interactivity.on_basis(r, a) for r, a in zip(resolved, analyses, strict=True)]
    curves = interactivity.band_curves(resolved, analyses)  # every point searched apart
    for v, curve in zip(verdicts, curves, strict=True):
        margin = float(v.thresholds.get("min_gain", interactivity.DEFAULT_MARGIN))
        assert v.interactivity_band == curve.band(margin)


def test_erlang_table_views_equal_the_tables_built_per_size() -> None:
    width = erlang.RHO_STEPS + 1
    for top in (64, 1, 7, 33, 2):  # largest first: the others are views of its rows
        table = erlang.erlang_table(top)
        built = np.vstack([np.ones(width)] + [erlang.erlang_row(c) for c in range(1, top + 1)])
        assert np.array_equal(table, built.reshape(-1))
        steps = erlang.erlang_steps(top).reshape(-1, width)
        assert np.array_equal(steps[:, :-1], np.diff(built, axis=1))  # what interpolation reads


# A fresh process asks for every table size a batch of varied clusters can (1 .. 64 replicas)
# and reports how much memory the tables hold afterwards: a table per size held ~140 MB.
_EVERY_SIZE = """
import json, tracemalloc
from disagg_decider.calc.queues import erlang
tracemalloc.start()
for top in range(1, erlang.TABLE_ROWS + 1):
    erlang.erlang_table(top), erlang.erlang_steps(top)
print(json.dumps({"held_bytes": tracemalloc.get_traced_memory()[0]}))
"""


def test_erlang_tables_stay_bounded_over_every_pool_size() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _EVERY_SIZE],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT / "skill"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    held = json.loads(proc.stdout.strip().splitlines()[-1])["held_bytes"]
    one_table = (erlang.TABLE_ROWS + 1) * (erlang.RHO_STEPS + 1) * 8
    # The rows themselves, one full table and its steps: three tables' worth.
    assert held < 4 * one_table, f"{held / 2**20:.0f} MiB held"
