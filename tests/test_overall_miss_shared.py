"""The overall-p99 pricing's shared work gives the bits building it afresh gives (issue 17h).

`calc/modes/overall_ttft.py` and `calc/modes/conditional_rows.py` compute once what the lift, the
report and the overall p99 each used to build for themselves: the decode workers' lines and batch
grid taken by rows (`Layouts.take`), the report's rows taken from the lift's (`Lifted.at`),
both parts' misses read in one pass (`_both_miss`), the workers' capacity in one search with
each row's own chunk (`worker_capacity_per_s`). Each is compared here, bit for bit, with the
direct computation on real candidates (the examples' lifted rows); the golden outputs check
the whole decisions.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.modes import conditional, conditional_report, overall_ttft, ttft_parts
from disagg_decider.calc.modes.conditional_rows import Rows
from disagg_decider.calc.replicas import colocated, colocated_best
from disagg_decider.calc.replicas.decode import engine_batch_grid
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.decide import decide
from disagg_decider.workload import load_workload
from tests.conftest import ROOT

EXAMPLES = ("rag-8k-h200-rdma-dynamo", "mixed-chat-rag-llm-d", "two-gpu-colocate")


def _same(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module", params=EXAMPLES)
def priced(request):
    """An example's candidates as the lift priced them: (first, rows, Lifted)."""
    seen = []
    original = conditional.priced_rows

    def spy(first, rows):
        lifted = original(first, rows)
        seen.append((first, rows, lifted))
        return lifted

    conditional.priced_rows = spy
    try:
        decide(load_workload(ROOT / "examples" / f"{request.param}.yaml"))
    finally:
        conditional.priced_rows = original
    assert seen and len(seen[-1][1]) > 2
    return seen[-1]


def test_rows_taken_read_like_rows_built(priced):
    first, rows, lifted = priced
    pick = np.array([len(rows) - 1, 0, 0, 1])  # out of order and repeated, as the lift takes
    chosen = [rows[i] for i in pick]
    fresh = Rows.of(first, chosen)
    built = fresh.layouts(chosen)
    pool, taken = lifted.at([lifted.candidates[i] for i in pick])
    for f in ("mean_ms", "scv", "nodes_ms", "target_ms"):
        assert _same(getattr(pool, f), getattr(fresh.pool, f)), f
    goodput = np.array([lifted.candidates[i].goodput_rate_per_s for i in pick])
    rates = goodput * np.array([0.5, 1.0, 1.03, 2.0])
    a, b = taken.local(rates), built.local(rates)
    for f in ("c_wait", "theta", "nodes_ms", "a", "b", "tpot_ms"):
        assert _same(getattr(a, f), getattr(b, f)), f
    assert _same(taken.miss_at(rates, taken.ttft_ms), built.miss_at(rates, built.ttft_ms))
    assert _same(overall_ttft.within(taken, rates), overall_ttft.within(built, rates))


def test_a_candidate_not_priced_there_is_built(priced):
    _, _, lifted = priced
    other = replace(lifted.candidates[0])  # equal, but not the candidate priced
    assert lifted.at([other]) is None


def test_both_parts_read_in_one_pass_as_apart(priced):
    first, rows, _ = priced
    layouts = Rows.of(first, rows).layouts(rows)
    goodput = np.array([c.goodput_rate_per_s for _, c in rows])
    rate = goodput * 1.1
    pooled, local = layouts.pooled(rate), layouts.local(rate)
    p, q = ttft_parts.both_miss(pooled, local, layouts.ttft_ms)
    assert _same(p, pooled.miss(layouts.ttft_ms))
    assert _same(q, local.miss(layouts.ttft_ms))
    # The overall p99's shapes: rows as columns, 16 times per row.
    times = layouts.ttft_ms[:, None] * np.linspace(0.2, 1.5, 16)
    pc, lc = pooled.columns(), local.columns()
    p, q = ttft_parts.both_miss(pc, lc, times)
    assert _same(p, pc.miss(times))
    assert _same(q, lc.miss(times))
    assert ((p > 0) & (p < 1)).any()  # some times inside the tails, not all 0 or 1


def test_worker_capacity_in_one_search_equals_one_search_per_chunk(priced):
    first, rows, _ = priced
    chunks = [1024, 2048, 4096, 8192]
    rows = [(r, replace(c, chunk_tokens=chunks[i % 4])) for i, (r, c) in enumerate(rows)]
    parts = Rows.of(first, rows)
    shape3 = lambda a: np.reshape(a, (-1, 1, 1))  # noqa: E731
    engine = engine_for(first, shape3(parts.d_tp))
    lengths = Lengths(**{k: shape3(v) for k, v in vars(parts.local).items()})
    tpot = shape3([r.workload.slo.tpot_ms for r, _ in rows]).astype(float)
    chunk = np.array([float(c.chunk_tokens) for _, c in rows])
    got = overall_ttft.worker_capacity_per_s(engine, lengths, tpot, chunk, shape3(parts.ys))
    # What it did before: every row at each distinct chunk, each row keeping its own.
    expected = np.zeros(chunk.size)
    for value in sorted(set(chunk.tolist())):
        found = colocated_best.best_points(
            engine,
            lengths,
            np.full((chunk.size, 1, 1), overall_ttft.NO_TTFT_MS),
            tpot,
            np.array([value]),
            servers=shape3(parts.ys),
        )
        expected = np.where(chunk == value, np.ravel(found.rate_per_s), expected)
    assert _same(got, expected)
    assert len(set(expected.tolist())) > 1 and (expected > 0).mean() > 0.5


def test_report_from_the_lifts_rows_equals_report_built_afresh(priced):
    first, rows, lifted = priced
    chosen = [(r, c) for (r, _), c in zip(rows, lifted.candidates, strict=True)][:3]
    out = []
    for source in (lifted, None):
        p99s = DeferredP99()
        reported = conditional_report.report_rows(first, chosen, p99s, source)
        p99s.solve()
        out.append(reported())
    shared, fresh = out
    assert shared == fresh
    assert all(c.ttft_p99_ms is not None and c.ttft_p99_ms > 0 for c in shared)


def test_worker_capacity_read_off_the_workers_grid_equals_the_search(priced):
    """`Layouts.worker_capacity_per_s` reads the capacity off the workers' grid evaluated with
    the TTFT target out of reach (`workers_on`): the search's bits (`best_points`)."""
    first, rows, _ = priced
    layouts = Rows.of(first, rows).layouts(rows)
    _, grid = layouts.workers
    assert grid.headroom is not None  # a decision's few rows: the grid holds the headroom
    got = layouts.worker_capacity_per_s()
    shape3 = lambda a: np.asarray(a, dtype=float).reshape(-1, 1, 1)  # noqa: E731
    searched = overall_ttft.worker_capacity_per_s(
        replace(layouts.engine, tp=shape3(layouts.engine.tp)),
        layouts.lengths.map(shape3),
        shape3(layouts.tpot_ms),
        layouts.chunk.reshape(-1),
        shape3(layouts.decode_servers),
    )
    assert _same(got, searched)
    assert (searched > 0).any()
    # The grid's other fields are those of the grid without the headroom.
    at, _ = layouts.workers
    plain = colocated.evaluate(at, engine_batch_grid(at.engine), with_headroom=False)
    for name in ("rate_per_s", "tpot_p99_ms", "idle_ttft_ms", "idle_tpot_ms"):
        assert _same(getattr(grid, name), getattr(plain, name)), name
