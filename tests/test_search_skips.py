"""Issue 27 (fifth round): the search's colocated side does not search rows that serve
nothing (a p99 request past the model's context) unless they are a member's own prompt, whose
verdict reads their chunk and batch: the gains (all a crossover reads) and the own rows'
layouts equal the search of every row."""

from __future__ import annotations

import dataclasses

import numpy as np

from disagg_decider.calc.crossover import crossover_grid
from disagg_decider.calc.layouts import search as search_module
from disagg_decider.calc.layouts.search import members_of, search
from disagg_decider.calc.replicas import colocated_best
from disagg_decider.workload import load_workload, resolve
from tests.conftest import ROOT


def test_unserved_rows_are_not_searched_and_nothing_read_moves(monkeypatch) -> None:
    r = resolve(load_workload(ROOT / "examples" / "chat-short-colocate.yaml"))
    members = members_of([r])
    grid = crossover_grid(r)
    prompts = np.concatenate([[r.workload.traffic.prompt_tokens.p50], grid])
    rows = members.rows([prompts])
    searched = []
    best_points = colocated_best.best_points

    def counted(*args):
        searched.append(int(np.sum(args[6])))
        return best_points(*args)

    monkeypatch.setattr(search_module.colocated_best, "best_points", counted)
    pruned = search(r, rows, members.layouts)
    every = search(r, dataclasses.replace(rows, own=None), members.layouts)
    served = search_module.within_context(r.model.max_context_tokens, rows.lengths)
    assert not served.all() and served[0]  # the grid's longest prompts serve nothing
    assert searched[0] < searched[1]
    np.testing.assert_array_equal(pruned.gain, every.gain)
    np.testing.assert_array_equal(pruned.colo_within, every.colo_within)
    for field in ("colo_rate", "colo_chunk_index", "colo_batch"):
        np.testing.assert_array_equal(getattr(pruned, field)[0], getattr(every, field)[0])
