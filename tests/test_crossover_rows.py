"""A batch's crossovers (`calc/compare._crossovers`) search only the grid rows they can
depend on, and read what the whole grid gives.

A block of more than `ONE_PASS_WORKLOADS` searches each member's own prompt first, then only
the side of the crossover grid its crossover is read from, and of that side only the rows
whose p99 request fits the model's context (the search serves nothing beyond it). A workload
decided alone searches its own prompt and the whole grid in one pass: the reference here.
The tests lower `ONE_PASS_WORKLOADS` to 1, so every block of the seeded mixes takes the
two-search path.
"""

from __future__ import annotations

import sys

import numpy as np

from disagg_decider.calc import compare
from disagg_decider.workload import resolve
from tests.conftest import ROOT


def _mix(n: int, seed: int) -> list:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from workload_mix import workload_mix

    return workload_mix(n, seed=seed)


def test_batched_crossovers_equal_the_whole_grid_of_each_workload_alone(monkeypatch):
    monkeypatch.setattr(compare, "ONE_PASS_WORKLOADS", 1)
    resolved = [resolve(w) for w in _mix(64, seed=5)]
    skipped = []
    fits = compare.within_context

    def counted(*args):
        served = fits(*args)
        skipped.append(int((~served).sum()))
        return served

    monkeypatch.setattr(compare, "within_context", counted)
    batched = [a.crossover_prompt_tokens for a in compare.analyze_many(resolved)]
    assert sum(skipped) > 0  # some rows beyond the context were left out
    alone = [compare.analyze(r).crossover_prompt_tokens for r in resolved]
    assert batched == alone
    assert any(c is not None for c in alone) and None in alone


def test_each_side_row_the_batch_reads_is_what_a_search_of_it_alone_gives(monkeypatch):
    """Row by row: the curve each member's crossover is read from (its own prompt, then its
    side of the grid) holds, at every side row, the gain a search of that row alone gives;
    nan where the row was left out, so left out only where nothing is served."""
    monkeypatch.setattr(compare, "ONE_PASS_WORKLOADS", 1)
    resolved = [resolve(w) for w in _mix(48, seed=9)]
    curves = []  # (workload, prompts, gains) in each block's member order
    crossovers, read = compare._crossovers, compare.crossover_with_own

    def searched(members, *args):
        block = iter(members.resolved)

        def kept(prompts, gains):
            curves.append((next(block), prompts, np.asarray(gains, dtype=float)))
            return read(prompts, gains)

        compare.crossover_with_own = kept
        try:
            return crossovers(members, *args)
        finally:
            compare.crossover_with_own = read

    monkeypatch.setattr(compare, "_crossovers", searched)
    compare.analyze_many(resolved)
    assert len(curves) > len(resolved) // 2  # the members of blocks of more than four
    left_out = 0
    for r, prompts, gains in curves:
        alone = compare.gain_curve(r, prompts[1:])
        np.testing.assert_array_equal(gains[1:], alone)
        members = compare.members_of([r])
        rows = members.rows([prompts[1:]])
        beyond = ~compare.within_context(
            r.model.max_context_tokens, rows.lengths, rows.class_context
        )
        left_out += int(beyond.sum())
    assert left_out > 0


def test_rows_beyond_the_context_gain_nothing_in_the_search():
    """What the pruning relies on: a row whose p99 request outruns the context is priced at
    gain nan (neither mode serves), so leaving it out reads the same curve."""
    r = resolve(_mix(8, seed=5)[0])
    grid = np.geomspace(64, 4 * r.model.max_context_tokens, 9).round()
    members = compare.members_of([r])
    rows = members.rows([grid])
    beyond = ~compare.within_context(r.model.max_context_tokens, rows.lengths, rows.class_context)
    assert beyond.any() and (~beyond).any()
    gain = compare.gain_curve(r, grid)
    assert np.isnan(gain[beyond]).all()
