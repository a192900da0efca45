"""Issue 14f: the always-disaggregated split of a budget is the best whole split, exactly.

`pools.pooled_split` brackets the crossing of the prefill pool's rate (non-decreasing in its
size) and the decode pool's (non-increasing) instead of trying every size; these tests price
every whole split by brute force (`rate_where` at each size 1 .. most) and compare, bit for
bit, on generated pools and on the 800-workload mix's #420, where the four sizes next to the
relaxed ideal that the search used to try missed a better split.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

from disagg_decider.calc.layouts import search as search_module
from disagg_decider.calc.layouts import split_grid
from disagg_decider.calc.layouts.pool_rates import TABLE_SIZES, PoolRates
from disagg_decider.calc.layouts.pools import every_split_best as brute_force
from disagg_decider.calc.layouts.pools import pooled_split, rate_where
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas.prefill import Pool
from disagg_decider.decide import decide

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from workload_mix import workload_mix


def _same(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def _case(seed: int):
    """Pools, budgets and decode rates of one generated search: (S, Tp, Td) entries."""
    rng = np.random.default_rng(seed)
    s = 6
    tps = np.array([1.0, 2.0, 4.0, 8.0])
    base = rng.uniform(50.0, 400.0, (s, 4, 4))[..., None]
    pool = Pool(
        mean_ms=rng.uniform(20.0, 300.0, (s, 4, 4)),
        scv=rng.uniform(0.0, 2.0, (s, 4, 4)),
        nodes_ms=base * np.exp(rng.uniform(0.1, 0.8, (s, 4, 4))[..., None] * queueing.Z_NODES),
        target_ms=rng.uniform(300.0, 3000.0, (s, 4, 4)),
    )
    budget = rng.choice([2.0, 4.0, 8.0, 16.0, 32.0, 64.0], s)[:, None, None]
    p_tp, d_tp = tps[None, :, None], tps[None, None, :]
    # Decode replicas from far slower to far faster than a prefill replica: the crossing falls
    # anywhere from one prefill replica to the most the budget allows.
    one_rate = pool.max_rate_per_s(1.0)
    d_rate = one_rate * np.exp(rng.uniform(-3.0, 3.0, (s, 4, 4)))
    d_rate = np.where(rng.random((s, 4, 4)) < 0.1, 0.0, d_rate)
    allowed = (rng.random((s, 4, 4)) < 0.9) & (p_tp + d_tp <= budget)
    return budget, p_tp, d_tp, pool, d_rate, allowed


@pytest.mark.parametrize("seed", range(36))
def test_search_equals_brute_force_on_generated_splits(seed):
    budget, p_tp, d_tp, pool, d_rate, allowed = _case(seed)
    want, want_x = brute_force(budget, p_tp, d_tp, pool, d_rate, allowed)
    rates = PoolRates.tabulate(pool, np.floor((budget - d_tp) / p_tp), allowed & (d_rate > 0))
    for table in (None, rates):  # bisected fresh, and small splits read off the table
        p, served, x, y = pooled_split(budget, p_tp, d_tp, pool, d_rate, allowed, table)
        assert _same(served, want)
        on = want > 0
        assert _same(x[on], want_x[on])
        assert _same(y[on], np.broadcast_to(np.floor((budget - x * p_tp) / d_tp), on.shape)[on])
        assert _same(p[on], rate_where(pool, np.where(on, x, 1.0), on)[on])
        assert (p[~on] == 0).all()


def test_generated_splits_reach_past_the_table_and_both_sides_of_the_crossing():
    """The cases above are not all small or all one-sided (what they would prove otherwise)."""
    large = prefill_bound = decode_bound = 0
    for seed in range(36):
        budget, p_tp, d_tp, pool, d_rate, allowed = _case(seed)
        _, served, _, y = pooled_split(budget, p_tp, d_tp, pool, d_rate, allowed)
        on = served > 0
        most = np.broadcast_to(np.floor((budget - d_tp) / p_tp), on.shape)
        large += int((on & (most > TABLE_SIZES)).sum())
        decode_side = np.isclose(served, y * d_rate)
        decode_bound += int((on & decode_side).sum())
        prefill_bound += int((on & ~decode_side).sum())
    assert large >= 50 and prefill_bound >= 50 and decode_bound >= 50


def test_workload_420_split_is_the_best_whole_split(monkeypatch):
    """#420 of workload_mix(800, 17): the four sizes around the relaxed ideal found 19.28
    req/s on its best pair; every whole split, priced one by one, finds more."""
    w = workload_mix(421, seed=17)[420]
    calls = []

    def recording(*args):
        out = pooled_split(*args)
        calls.append((args, out))
        return out

    monkeypatch.setattr(search_module, "pooled_split", recording)
    verdict = decide(w)
    assert calls
    for (budget, p_tp, d_tp, pool, d_rate, allowed, _), (_, served, x, _) in calls:
        want, want_x = brute_force(budget, p_tp, d_tp, pool, d_rate, allowed)
        assert _same(served, want)
        assert _same(x[want > 0], want_x[want > 0])
    # The workload's own prompt (the first search): the chosen split serves the best of all
    # whole splits of every pair, and that is the verdict's always-disaggregated goodput.
    (budget, p_tp, d_tp, pool, d_rate, allowed, _), (_, served, _, _) = calls[0]
    want, _ = brute_force(budget, p_tp, d_tp, pool, d_rate, allowed)
    best = served[0].max()
    assert best >= want[0].max()
    assert best > 19.3  # what the four-size search left on the table (19.28 req/s)
    per_gpu = verdict.metrics.goodput_per_gpu_disaggregated
    assert per_gpu * w.cluster.gpus == pytest.approx(best, rel=1e-12)


def _loop_refine(x, used, total, gap=None):
    """`split_grid.refine` by its per-threshold loop alone (the vectorised settled check off)."""
    from unittest import mock

    with mock.patch.object(split_grid, "_all_settled", lambda *a: None):
        return split_grid.refine(x, used, total, gap)


def test_refine_settled_in_arrays_equals_the_loop():
    """`refine` answers a pass where every best has its whole neighbours in array operations;
    on seeded passes (consecutive and spread sizes, ties, values <= 0, -inf, nan, rows with
    nothing priced, and used masks that are not prefixes) it must give the loop's x, used
    and settled flag exactly."""
    rng = np.random.default_rng(27)
    settled_seen = unsettled_seen = 0
    for _ in range(3000):
        n, width = int(rng.integers(1, 6)), int(rng.integers(1, 7))
        if rng.random() < 0.6:
            x = np.broadcast_to(np.arange(1.0, width + 1.0), (n, width)).copy()
        else:
            x = np.sort(rng.choice(np.arange(1.0, 30.0), size=(n, width)), axis=1)
        count = rng.integers(0, width + 1, size=n)
        used = np.arange(width) < count[:, None]
        if rng.random() < 0.1:
            used = rng.random((n, width)) < 0.6
        total = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0, 2.0, 3.0], size=(n, width))
        if rng.random() < 0.1:
            total[rng.random((n, width)) < 0.2] = rng.choice([np.nan, -np.inf, np.inf])
        want = _loop_refine(x, used, total)
        got = split_grid.refine(x, used, total)
        assert got[2] == want[2]
        assert got[0].shape == want[0].shape and got[0].tobytes() == want[0].tobytes()
        assert got[1].tobytes() == want[1].tobytes()
        settled_seen += want[2]
        unsettled_seen += not want[2]
    assert settled_seen > 500 and unsettled_seen > 500
