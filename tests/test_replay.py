"""The replayed load bisection (`calc/queues/bisection_replay.py`) returns the plain bisection's
bits.

`replay` tests only loads the bisection could visit (`bisection_grid`) and settles each of the
bisection's steps from exact tests, so on a test monotone in the load it must land on the same
float. Checked on generated monotone miss curves (idle offsets, kinks, flat stretches, zeros
and saturation) and on generated pools through `load_bisection._FewEntries`, against the
16-step loop itself; and that it needs fewer rounds than the loop has steps.
"""

import math
import statistics

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from disagg_decider.calc.queues import load_bisection, queueing
from disagg_decider.calc.queues.bisection_replay import ESTIMATED_ROUNDS, bisection_grid, replay
from disagg_decider.calc.queues.normal_quantiles import P99_TAIL

TOP = load_bisection.RHO_MAX
STEPS = load_bisection.BISECTIONS


def _bisect(probability, top: float = TOP) -> float:
    """The plain loop `_FewEntries.bisect` runs, on one entry."""
    lo, hi = 0.0, top
    for _ in range(STEPS):
        mid = (lo + hi) / 2.0
        if probability(mid) > P99_TAIL:
            hi = mid
        else:
            lo = mid
    return lo


def test_grid_holds_every_bracket_end_of_the_bisection():
    grid = bisection_grid(TOP, STEPS)
    assert grid.size == 2**STEPS + 1 and grid[0] == 0.0 and grid[-1] == TOP
    assert (np.diff(grid) > 0).all()
    values = set(grid.tolist())
    rng = np.random.default_rng(5)
    for _ in range(200):
        lo, hi = 0.0, TOP
        for bad in rng.random(STEPS) < 0.5:
            mid = (lo + hi) / 2.0
            assert mid in values
            lo, hi = (lo, mid) if bad else (mid, hi)
        k = grid.tolist().index(lo)
        assert grid[k + 1] == hi  # the leaf's bracket is two neighbours of the grid


def _curve(p0: float, root: float, steep: float, kink: float, flat: float):
    """A miss probability increasing in the load: p0 idle, crossing 1% near `root`, with a
    kink (a slope change) and a flat stretch; 0 stays 0 below a tenth of the root when p0 is 0."""

    def probability(x: float) -> float:
        if x >= 1.0:
            return math.inf
        y = steep * (x - root) + (steep * kink * (x - root) if x > root * 0.9 else 0.0)
        if abs(x - root * 0.5) < flat:
            y = steep * (root * 0.5 - flat - root)  # flat stretch below the root
        value = p0 + (P99_TAIL - p0) * math.exp(min(y, 50.0))
        return 0.0 if p0 == 0.0 and x < root * 0.1 else value

    return probability


curves = st.tuples(
    st.sampled_from([0.0, 1e-7, 0.003, 0.0064, 0.0099]),
    st.floats(1e-4, TOP * 1.2),  # past the top: the bisection ends at the grid's last leaf
    st.floats(0.5, 2000.0),
    st.floats(-0.9, 20.0),
    st.floats(0.0, 0.05),
)


@given(st.lists(curves, min_size=1, max_size=4))
def test_replay_lands_where_the_bisection_does(params):
    each = [_curve(*p) for p in params]
    grid = bisection_grid(TOP, STEPS).tolist()
    m = len(each)

    def probability(loads: list[float]) -> list[float]:
        assert len(loads) == 2 * m and all(x in grid_set for x in loads)  # grid points only
        return [each[i % m](x) for i, x in enumerate(loads)]

    grid_set = set(grid)
    p_low = [f(0.0) for f in each]
    p_top = [f(TOP) for f in each]
    got = replay(probability, grid, p_low, p_top, P99_TAIL)
    assert got == [_bisect(f) for f in each]


def _few_pools(seed: int, n: int):
    rng = np.random.default_rng(seed)
    servers = rng.integers(1, 33, n).astype(float)
    mean_ms = rng.uniform(5.0, 800.0, n)
    scv = rng.uniform(0.0, 3.0, n)
    base = rng.uniform(5.0, 500.0, n)[:, None]
    nodes = base * np.exp(rng.uniform(0.0, 1.2, n)[:, None] * queueing.Z_NODES)
    target = nodes[:, 0] + (nodes[:, -1] - nodes[:, 0]) * rng.uniform(-0.1, 3.0, n)
    return servers, mean_ms, scv, nodes, target


def test_few_entries_replayed_is_bisected_on_generated_pools():
    servers, mean_ms, scv, nodes, target = _few_pools(11, 600)
    over = queueing.exceed_probability(nodes, target)
    test = load_bisection._LoadTest(servers, mean_ms, scv, nodes, target, over, (600,))
    rounds, compared = [], 0
    with np.errstate(divide="ignore", invalid="ignore"):
        p_top = test.probability(np.full(600, TOP))
        todo = (p_top > P99_TAIL) & ~(over > P99_TAIL)  # what `max_rate_per_ms` bisects
        for size in (1, 2, 5):
            rows = np.flatnonzero(todo)
            for start in range(0, len(rows) - size, size):
                mask = np.zeros(600, dtype=bool)
                mask[rows[start : start + size]] = True
                few = load_bisection._FewEntries.of(test.subset(mask))
                twice = few.twice()
                calls = [0]

                def counted(loads, twice=twice, calls=calls):
                    calls[0] += 1
                    return twice.probabilities(loads)

                grid = bisection_grid(TOP, STEPS).tolist()
                got = replay(counted, grid, few.over, p_top[mask].tolist(), P99_TAIL)
                assert got == few.bisect(TOP).tolist()
                if size == 1:
                    rounds.append(calls[0])
                compared += size
    assert compared > 300
    # Fewer rounds than the loop's 16 tests, typically; never unbounded.
    assert statistics.median(rounds) <= 8
    assert max(rounds) <= ESTIMATED_ROUNDS + STEPS
