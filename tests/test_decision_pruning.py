"""Issue 17f: a decision prices fewer candidates and runs fewer bisections, with the same bits.

Each shortcut is checked against the plain computation it replaces, bit for bit (never
approximately): the tabulated prefill rates (`calc/layouts/pool_rates.py`), the report-only p99s
solved together (`calc/replicas/reported_ttft.py`), colocated lines left out of a search
(`colocated_best.best_points(searched=)`), decode-worker rows no split can use
(`threshold_pools.decode_workers`) and the conditional candidates settled in rounds
(`conditional._best_of_many`). `tests/test_golden_outputs.py` checks whole verdicts.
"""

from pathlib import Path

import numpy as np
import pytest

from disagg_decider.calc.layouts import threshold_pools
from disagg_decider.calc.layouts.layout_choices import engine_for, group_key
from disagg_decider.calc.layouts.pool_rates import TABLE_SIZES, WIDE_TABLE_SIZES, PoolRates
from disagg_decider.calc.layouts.pools import rate_where
from disagg_decider.calc.modes import conditional, conditional_report
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas import colocated_best
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.prefill import Pool
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.workload import load_workload, resolve

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _pool(rng: np.random.Generator, n: int) -> Pool:
    base = rng.uniform(50.0, 400.0, n)[:, None]
    return Pool(
        mean_ms=rng.uniform(20.0, 300.0, n),
        scv=rng.uniform(0.0, 2.0, n),
        nodes_ms=base * np.exp(rng.uniform(0.1, 0.8, n)[:, None] * queueing.Z_NODES),
        target_ms=rng.uniform(300.0, 3000.0, n),
    )


def _same(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


@pytest.mark.parametrize(("n", "width"), [(40, WIDE_TABLE_SIZES), (400, TABLE_SIZES)])
def test_tabulated_rates_equal_fresh_bisections(n, width):
    """A few entries (one decision) get the wide table, many (a batch's block) the narrow."""
    rng = np.random.default_rng(17)
    pool = _pool(rng, n)
    most = rng.integers(0, 2 * WIDE_TABLE_SIZES, n).astype(float)  # small and large splits
    wanted = rng.random(n) < 0.8
    table = PoolRates.tabulate(pool, most, wanted)
    assert (table.sizes[wanted & (most > width)] == 1).all()  # one replica of the big
    assert (table.sizes[wanted & (most <= width)] == most[wanted & (most <= width)]).all()
    assert (table.sizes[~wanted] == 0).all()
    # Whole sizes in and out of the table, fractional ones, a leading axis of sizes per entry.
    for servers in (
        np.ones(n),
        np.maximum(most, 1.0),
        rng.integers(1, 3 * TABLE_SIZES, n).astype(float),
        rng.uniform(1.0, 9.0, n),
        np.stack([np.ones(n), np.full(n, 2.0), np.maximum(most - 1, 1.0)]),
    ):
        mask = np.broadcast_to(rng.random(n) < 0.9, servers.shape)
        got = table(servers, mask)
        assert _same(got, rate_where(pool, servers, mask))
    assert table.holds(np.ones(n))[wanted & (most >= 1)].all()  # one replica of the wanted


def test_sizing_from_the_table_equals_pool_sizing():
    rng = np.random.default_rng(3)
    n = 60
    pool = _pool(rng, n)
    most_cluster = rng.integers(1, 2 * TABLE_SIZES, n).astype(float)
    table = PoolRates.tabulate(pool, most_cluster, np.ones(n, dtype=bool))
    one = table(np.ones(n), np.ones(n, dtype=bool))
    # Rates some pools carry on one replica, some need the cluster, some need more than it.
    rate = one * rng.choice([0.5, 3.0, 12.0, 80.0], n)
    most = np.maximum(most_cluster, 64.0)
    servers, known = table.sizing(rate, most, one)
    expected = pool.sizing(rate, most, one)
    assert _same(servers, expected.servers)
    assert (servers <= most_cluster).any() and (servers > most_cluster).any()
    everyone = np.ones(n, dtype=bool)
    for x in (servers, np.minimum(servers, most_cluster), np.ones(n)):
        assert _same(known(x, everyone), pool.max_rate_per_s(x))


def test_deferred_p99s_equal_each_bisection_alone():
    rng = np.random.default_rng(11)
    k = queueing.Z_NODES.size
    jobs = []
    for shape in ((5,), (3, 1), (1,), (4, 2)):
        nodes = rng.uniform(10.0, 100.0, (*shape, 1)) * np.exp(0.4 * queueing.Z_NODES)
        jobs.append(
            (
                rng.uniform(0.001, 0.05, shape),
                rng.integers(1, 8, shape).astype(float),
                rng.uniform(5.0, 80.0, shape),
                rng.uniform(0.1, 1.5, shape),
                nodes,
            )
        )
    jobs.append((0.01, np.array([2.0, 3.0]), 40.0, 0.5, np.linspace(20.0, 90.0, k)))  # broadcasts
    deferred = DeferredP99()
    pending = [deferred.add(*job) for job in jobs]
    with pytest.raises(RuntimeError):
        _ = pending[0].value
    deferred.solve()
    for job, p in zip(jobs, pending, strict=True):
        assert _same(p.value, queueing.p99_of_sum_ms(*job))
    pool = _pool(rng, 6)
    one = deferred.add_pool(pool, np.full(6, 2.0), rng.uniform(1.0, 20.0, 6))
    deferred.solve()
    assert np.isfinite(one.value).any()


def _first_example() -> tuple:
    r = resolve(load_workload(EXAMPLES / "rag-8k-h200-rdma-dynamo.yaml"))
    w = r.workload
    prompts = np.array([500.0, 2000.0, 8000.0, 32000.0]).reshape(-1, 1, 1, 1)
    lengths = Lengths.build(prompts, 0.8, w.traffic.prefix_cache_hit_rate, 300.0, 0.6)
    tp = np.array([1.0, 2.0, 4.0, 8.0]).reshape(1, -1, 1, 1)
    return r, lengths, engine_for(r, tp)


@pytest.mark.parametrize("whole_grid_points", [colocated_best.WHOLE_GRID_POINTS, 0])
def test_best_points_leaves_lines_out_with_the_same_answers(monkeypatch, whole_grid_points):
    monkeypatch.setattr(colocated_best, "WHOLE_GRID_POINTS", whole_grid_points)  # both searches
    r, lengths, engine = _first_example()
    w = r.workload
    ttft, tpot = np.full((4, 1, 1, 1), float(w.slo.ttft_ms)), np.full((4, 1, 1, 1), 60.0)
    servers = np.full((4, 4, 1, 1), 2.0)
    chunks = w.efficiency.chunk_tokens
    every = colocated_best.best_points(engine, lengths, ttft, tpot, chunks, servers)
    searched = np.random.default_rng(2).random((4, 4)) < 0.6
    some = colocated_best.best_points(engine, lengths, ttft, tpot, chunks, servers, searched)
    assert (every.rate_per_s[searched] > 0).any()
    for name in ("rate_per_s", "batch", "chunk_index"):
        got, full = getattr(some, name), getattr(every, name)
        assert _same(got[searched], full[searched])
        assert (got[~searched] == 0).all()


def _block(seed: int = 29, index: int = 0) -> list:
    """Workloads of a seeded mix that share one engine (`group_key`), as a block does:
    the mix's `index`-th group (in this one a walk goes two candidates deep, and a later
    candidate beats a group's first)."""
    import sys

    sys.path.insert(0, str(EXAMPLES.parent / "benchmarks"))
    from workload_mix import workload_mix

    groups: dict[tuple, list] = {}
    for w in workload_mix(30, seed=seed):
        r = resolve(w)
        groups.setdefault(group_key(r), []).append(r)
    return list(groups.values())[index][:4]


def _candidates(resolved: list) -> list[list]:
    """The conditional candidates as the decision searches them: from the TP pairs of the
    modes' best layouts on the cluster (before the pools are sized down for the
    rate, `calc/layouts/rate_layout.py`, which the search never sees)."""
    from unittest import mock

    from disagg_decider.calc.compare import analyze
    from disagg_decider.calc.layouts import rate_layout

    pairs = []
    for r in resolved:
        with (
            mock.patch.object(rate_layout, "fewest_gpus_layout", lambda *args: None),
            mock.patch.object(rate_layout, "fewest_gpus_pair", lambda *args: None),
        ):
            a = analyze(r)
        pairs.append(conditional.tp_pairs(r, a.colocated, a.disaggregated))
    return conditional.candidates_many(resolved, pairs)


def test_decode_workers_left_out_change_no_candidate(monkeypatch):
    resolved = _block()
    pruned = _candidates(resolved)
    everything = lambda k, s, d_tp, ys, pools: np.ones((s.n, ys.size), dtype=bool)  # noqa: E731
    monkeypatch.setattr(threshold_pools, "_rows_needed", everything)
    full = _candidates(resolved)
    assert sum(map(len, full)) > 0
    assert pruned == full  # every field of every candidate, exactly


def test_settling_in_rounds_walks_each_group_as_one_at_a_time():
    # On the fitted default physics no group of the seeded mixes (seeds 1-45) has a later
    # candidate beating its first, so the walk would stop at once and check little: this
    # block's groups (one walks three deep) are walked in reverse order of their bounds, where
    # each settled best sits below the next bound and later candidates win.
    resolved = _block(index=2)
    searched = []
    for r, found in zip(resolved, _candidates(resolved), strict=True):
        groups = {t: g[::-1] for t, g in conditional._by_threshold(found).items()}
        firsts = [conditional_report.settle(r, g[0]) for g in groups.values()]
        searched.append((r, groups, firsts))

    walked = []

    def one_at_a_time(r, groups, firsts):  # the walk as it was: one settle call per candidate
        out = {}
        for (t, group), best in zip(groups.items(), firsts, strict=True):
            for k, c in enumerate(group[1:], start=1):
                if best.goodput_rate_per_s >= c.goodput_rate_per_s:
                    break
                walked.append(k)
                settled = conditional_report.settle(r, c)
                if settled.goodput_rate_per_s > best.goodput_rate_per_s:
                    best = settled
            if best.goodput_rate_per_s > 0:
                out[t] = best
        return out

    rounds = conditional._best_of_many(resolved[0], searched)
    assert rounds == [one_at_a_time(*s) for s in searched]
    # The block needs two rounds somewhere and a walk that changes a best, or this checks little.
    assert max(walked) >= 2
    assert rounds != [{t: c for t, c in zip(g, f, strict=True)} for _, g, f in searched]
