"""Node-major tails give the row forms' bits (issue 27, seventh round).

A batch's colocated search lays its lines' quantile nodes out node-major, and a load bisection
on many entries holds its gaps so (`calc/queues/node_planes.py`): every reading there must be
the row form's, bit for bit, and the searches that use them must decide as the row forms do.

- `array_helpers.node_major_sum` adds a node-major array in the order numpy adds a row
  (checked on values whose sum depends on the order: a sequential sum differs on them);
- `node_planes.exceed_probability`, `sum_exceed_probability`, `sum_exceed_where` equal
  `queueing`'s on the same nodes laid out as rows;
- `normal_quantiles.weighted_exp_sum` of a node-major exponent is its rows';
- `load_bisection.max_rate_per_ms` from `NODE_MAJOR_ENTRIES` up equals it below;
- `colocated_best.best_points` on node-major lines equals it on row lines, on every call a
  seeded batch makes.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from disagg_decider.calc.queues import load_bisection, node_planes, normal_quantiles, queueing
from disagg_decider.calc.queues.array_helpers import node_major_sum, planes_of
from disagg_decider.calc.replicas import colocated_best
from disagg_decider.decide import decide_many
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from workload_mix import workload_mix


def _bits(a) -> bytes:
    return np.ascontiguousarray(a, dtype=float).tobytes()


def _planes(rows: np.ndarray) -> np.ndarray:
    """`rows` (nodes on the last axis) laid out node-major: the same values, read as rows."""
    return np.moveaxis(np.ascontiguousarray(np.moveaxis(rows, -1, 0)), 0, -1)


def _nodes(rng, shape):
    base = rng.uniform(5.0, 500.0, shape)[..., None]
    nodes = base * np.exp(rng.uniform(0.0, 1.2, shape)[..., None] * normal_quantiles.Z_NODES)
    flat = rng.random(shape) < 0.2  # rows with runs of equal nodes (a capped service time)
    nodes[flat] = np.minimum(nodes[flat], np.median(nodes[flat], axis=-1, keepdims=True))
    return nodes


def test_node_major_sum_adds_as_numpy_adds_a_row():
    rng = np.random.default_rng(0)
    sequential_differs = 0
    for k in (3, 8, 9, 16, 17, 24, 25, 40, 128, 129):
        for shape in ((), (1,), (300,), (6, 5)):
            # Signed values over many magnitudes: any other order of the additions rounds
            # differently on some rows.
            rows = rng.standard_normal((*shape, k)) * np.exp(rng.uniform(-30, 30, (*shape, k)))
            rows[rng.random(rows.shape) < 0.05] = -0.0
            want = np.add.reduce(rows, axis=-1)
            got = node_major_sum(np.ascontiguousarray(np.moveaxis(rows, -1, 0)))
            assert np.shape(got) == np.shape(want) and _bits(got) == _bits(want), (k, shape)
            if k == 25 and shape == (300,):
                sequential = rows[:, 0].copy()
                for j in range(1, k):
                    sequential += rows[:, j]
                sequential_differs = int(np.count_nonzero(sequential != want))
    assert sequential_differs > 0  # the check above tells the orders apart
    specials = np.array([[np.inf, 1.0] * 12 + [np.nan], [-np.inf] * 25, [-0.0] * 25])
    want = np.add.reduce(specials, axis=-1)
    assert _bits(node_major_sum(np.ascontiguousarray(specials.T))) == _bits(want)


def test_plane_exceed_is_the_rows():
    rng = np.random.default_rng(1)
    for shape in ((400,), (30, 7), (1,), (5, 1)):
        nodes = _nodes(rng, shape)
        span = nodes[..., -1] - nodes[..., 0]
        targets = nodes[..., 0] + span * rng.uniform(-0.2, 1.2, shape)
        targets.reshape(-1)[::7] = nodes.reshape(-1, 25)[::7, 3]  # on a node exactly
        targets.reshape(-1)[1::11] = [np.nan, np.inf, -np.inf][len(shape) % 3]
        want = queueing.exceed_probability(nodes, targets)
        planes = np.ascontiguousarray(np.moveaxis(nodes, -1, 0))
        assert _bits(node_planes.exceed_probability(planes, targets)) == _bits(want)
    # One target per row of a wider grid (broadcast along the planes' trailing axes).
    nodes = _nodes(rng, (20, 6))
    target = nodes[:, :1, 12] * 1.3
    planes = np.ascontiguousarray(np.moveaxis(nodes, -1, 0))
    want = queueing.exceed_probability(nodes, target)
    assert _bits(node_planes.exceed_probability(planes, target)) == _bits(want)


def test_plane_tail_sums_are_the_rows():
    rng = np.random.default_rng(2)
    shape = (40, 9)
    nodes = _nodes(rng, shape)
    planes = np.ascontiguousarray(np.moveaxis(nodes, -1, 0))
    c_wait = rng.uniform(0.0, 1.0, shape)
    for theta in (rng.uniform(0.0, 0.05, shape), rng.uniform(0.0, 0.05, (40, 1)), 0.01):
        target = nodes[..., 10] * rng.uniform(0.5, 3.0, shape)
        over = queueing.exceed_probability(nodes, target)
        want = queueing.sum_exceed_probability(c_wait, theta, nodes, target, over)
        got = node_planes.sum_exceed_probability(c_wait, theta, planes, target, over)
        assert _bits(got) == _bits(want)
        where = rng.uniform(size=shape) < 0.4
        got = node_planes.sum_exceed_where(c_wait, theta, planes, target, over, where)
        assert _bits(got[where]) == _bits(want[where]) and (got[~where] == 0.0).all()
        none = node_planes.sum_exceed_where(c_wait, theta, planes, target, over, where & False)
        assert (none == 0.0).all()


def test_weighted_exp_sum_of_a_node_major_exponent_is_the_rows():
    rng = np.random.default_rng(3)
    exponent = -rng.uniform(0.0, 30.0, (500, 25))
    want = normal_quantiles.weighted_exp_sum(exponent.copy())
    laid = _planes(exponent)
    assert not laid.flags.c_contiguous
    assert _bits(normal_quantiles.weighted_exp_sum(laid)) == _bits(want)
    # What numpy would make of the node-major layout on its own: another order, other bits.
    unguarded = np.add.reduce(np.exp(laid) * normal_quantiles.Z_WEIGHTS, axis=-1)
    assert _bits(unguarded) != _bits(want)


def test_planes_of_reads_only_a_node_major_layout():
    rows = np.zeros((10, 25))
    assert planes_of(rows) is None
    assert planes_of(rows[::2]) is None  # strided rows: neither layout
    planes = planes_of(_planes(rows))
    assert planes is not None and planes.shape == (25, 10)


def test_load_bisection_node_major_is_the_rows(monkeypatch):
    rng = np.random.default_rng(4)
    n = 700
    servers = rng.integers(1, 9, n).astype(float)
    mean_ms = rng.uniform(5.0, 200.0, n)
    scv = rng.uniform(0.0, 3.0, n)
    nodes = _nodes(rng, (n,))
    target = nodes[:, 0] + (nodes[:, -1] - nodes[:, 0]) * rng.uniform(-0.1, 3.0, n)
    made = []
    real = load_bisection._LoadTest.__init__

    def counted(self, *args):
        real(self, *args)
        made.append(self.node_major)

    monkeypatch.setattr(load_bisection._LoadTest, "__init__", counted)
    monkeypatch.setattr(load_bisection, "NODE_MAJOR_ENTRIES", 10**9)
    want = queueing.max_rate_per_ms(servers, mean_ms, scv, nodes, target)
    monkeypatch.setattr(load_bisection, "NODE_MAJOR_ENTRIES", 1)
    got = queueing.max_rate_per_ms(servers, mean_ms, scv, nodes, target)
    assert made == [False, True]
    assert (want == 0).any() and (want > 0).any()
    assert _bits(got) == _bits(want)
    # A few entries of a node-major test go to the plain-float path: the same answers.
    part = queueing.max_rate_per_ms(servers[:3], mean_ms[:3], scv[:3], nodes[:3], target[:3])
    assert _bits(part) == _bits(want[:3])


@pytest.fixture(scope="module")
def mix() -> list:
    return workload_mix(48, seed=29)


def test_best_points_on_node_major_lines_is_the_rows(mix, monkeypatch):
    real = colocated_best.best_points
    seen = {"calls": 0, "node_major": 0}

    def both(*args, **kwargs):
        got = real(*args, **kwargs)
        monkeypatch.setattr(colocated_best, "NODE_MAJOR_LINES", 10**12)
        want = real(*args, **kwargs)
        monkeypatch.setattr(colocated_best, "NODE_MAJOR_LINES", limit)
        for a, b in zip(vars(got).values(), vars(want).values(), strict=True):
            assert _bits(a) == _bits(b)
        seen["calls"] += 1
        return got

    def laid_out(*args):
        nodes = lay_out(*args)
        seen["node_major"] += planes_of(nodes) is not None
        return nodes

    limit = colocated_best.NODE_MAJOR_LINES
    lay_out = colocated_best._node_major_lines
    monkeypatch.setattr(colocated_best, "best_points", both)
    monkeypatch.setattr(colocated_best, "_node_major_lines", laid_out)
    decide_many(mix)
    assert seen["calls"] > 4 and seen["node_major"] > 2, seen


def test_tail_wait_bound_bounds_the_tail_sum():
    rng = np.random.default_rng(6)
    shape = (3000,)
    nodes = np.sort(_nodes(rng, shape), axis=-1)
    planes = np.ascontiguousarray(np.moveaxis(nodes, -1, 0))
    target = nodes[:, 0] + (nodes[:, -1] - nodes[:, 0]) * rng.uniform(-0.2, 1.3, shape)
    theta = np.where(rng.random(shape) < 0.1, 0.0, rng.uniform(0.0, 0.2, shape))
    found = node_planes.bracket(planes, target)
    assert np.array_equal(found.count, (nodes <= target[:, None]).sum(axis=-1))
    # The tail sum alone: C = 1, P(S' > T) = 0.
    tail = queueing.sum_exceed_probability(1.0, theta, nodes, target, 0.0)
    bound = node_planes.tail_wait_bound(theta, target, found, shape)
    assert (tail <= bound * queueing.TAIL_WAIT_MAX).all()
    assert (bound < 0.5).mean() > 0.3  # it says much more than 1 on many rows
    assert (bound[found.count == 0] == 1.0).all() and (bound[theta == 0.0] == 1.0).all()


def test_over_bound_bounds_the_exceedance():
    rng = np.random.default_rng(7)
    shape = (20000,)
    nodes = np.sort(_nodes(rng, shape), axis=-1)
    # Targets everywhere between and beyond the nodes, on nodes exactly, and just below them.
    target = nodes[:, 0] + (nodes[:, -1] - nodes[:, 0]) * rng.uniform(-0.2, 1.3, shape)
    on = nodes[np.arange(shape[0]), rng.integers(0, 25, shape)]
    target[::3] = on[::3]
    target[1::3] = np.nextafter(on[1::3], -np.inf)
    planes = np.ascontiguousarray(np.moveaxis(nodes, -1, 0))
    over = queueing.exceed_probability(nodes, target)
    bound = node_planes.over_bound(node_planes.bracket(planes, target), shape)
    assert (over <= bound).all()
    assert (bound - over).max() < 0.2  # a node's step of the normal's tail, no more
    assert (bound[target < nodes[:, 0]] == 1.0).all() and (bound[target >= nodes[:, -1]] == 0).all()


def _ratios_against_exhaustive(mix, monkeypatch) -> dict:
    """Every node-major `_ttft_ratio` of a batch against the exhaustive one (the nodes
    summed at every point): the same headroom; counts of points and of points left out."""
    from disagg_decider.calc.replicas import colocated

    bounded = colocated._ttft_ratio
    limit = colocated.BOUND_MIN_POINTS
    seen = {"calls": 0, "points": 0, "skipped": 0}

    def both(at, q, tail, others):
        got = bounded(at, q, tail, others)
        if planes_of(q.nodes) is None:
            return got
        monkeypatch.setattr(colocated, "BOUND_MIN_POINTS", 10**12)
        want = bounded(at, q, tail, others)
        monkeypatch.setattr(colocated, "BOUND_MIN_POINTS", limit)
        np.testing.assert_array_equal(1.0 - np.maximum(got, others), 1.0 - np.maximum(want, others))
        seen["calls"] += 1
        seen["points"] += np.size(got)
        seen["skipped"] += int(np.count_nonzero(np.isneginf(got) & ~np.isneginf(want)))
        return got

    monkeypatch.setattr(colocated, "_ttft_ratio", both)
    decide_many(mix)
    return seen


def test_node_major_bound_gives_the_exhaustive_headroom(mix, monkeypatch):
    seen = _ratios_against_exhaustive(mix, monkeypatch)
    assert seen["calls"] > 4, seen
    # The bound by the nodes at or below the target leaves most points out (the tail's sum
    # taken as at most 1 left ~60% of a batch's points out; this ~90%).
    assert seen["skipped"] > 0.75 * seen["points"], seen


@pytest.mark.parametrize("wrong", ["over", "tail"])
def test_a_wrong_node_major_bound_would_be_caught(mix, monkeypatch, wrong):
    """The check above can fail: a bound that is not one (P(S' > T) taken as 0, or the
    wait's tail sum as a tenth of what it may be) changes some headroom."""
    if wrong == "over":
        monkeypatch.setattr(node_planes, "_OVER_AT_MOST", np.zeros(26))
    else:
        real = node_planes.tail_wait_bound
        monkeypatch.setattr(node_planes, "tail_wait_bound", lambda *a: real(*a) / 10.0)
    with pytest.raises(AssertionError, match="not equal"):
        _ratios_against_exhaustive(mix, monkeypatch)


@pytest.mark.parametrize("largest", [8, 64, 200])
def test_pooled_wait_is_wait_tail(largest):
    """`queueing.PooledWait` (the Erlang rows and the variability's terms kept for a
    search's lines) gives `wait_tail`'s bits at every load, saturated ones included; pools
    beyond the table go to `erlang_c_at` as before."""
    rng = np.random.default_rng(largest)
    n = 500
    servers = rng.integers(1, largest + 1, n).astype(float)
    scv = rng.uniform(0.0, 3.0, n)
    pooled = queueing.PooledWait(servers, scv)
    assert pooled.erlang.whole == (largest <= 64)
    for _ in range(3):
        mean = rng.uniform(5.0, 200.0, n)
        rate = rng.uniform(0.0, 1.2, n) * servers / mean
        rate[::17] = 0.0
        want = queueing.wait_tail(rate, servers, mean, scv)
        got = pooled.tail(rate, mean)
        assert [_bits(a) for a in got] == [_bits(a) for a in want]
    # One pool size for every line, and no line at all.
    one = queueing.PooledWait(4.0, 0.5)
    want = queueing.wait_tail(rate, 4.0, mean, 0.5)
    assert [_bits(a) for a in one.tail(rate, mean)] == [_bits(a) for a in want]
    empty = queueing.PooledWait(np.zeros(0), np.zeros(0))
    assert [a.shape for a in empty.tail(np.zeros(0), np.zeros(0))] == [(0,), (0,)]
