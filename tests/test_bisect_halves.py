"""Issue 27 (sixth round): `batch_edge.bisect_halves` asks a bisection's test of the midpoints
of several halvings in one call and walks them as the loop of one midpoint per call would:
the same midpoints, answers and bits, at any number of steps per call (a short split's rate,
`ingress_queue.short_split_load`, two steps a call; `tests/test_transfer_within.py` checks
that against the loop written out)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_decider.calc.queues.batch_edge import bisect_halves, subtree_mids


def _halved_one_step_a_call(holds, lo, hi, steps):
    """The reference: one midpoint per entry per call."""
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        ok = holds(mid[:, None])[:, 0]
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return lo, hi


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 12),
    steps=st.integers(0, 20),
    levels=st.integers(1, 4),
)
def test_several_steps_a_call_halve_as_one_step_a_call(seed, rows, steps, levels) -> None:
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-5.0, 5.0, rows)
    hi = lo + rng.uniform(0.0, 100.0, rows)
    limit = rng.uniform(-10.0, 110.0, rows)  # holds below each entry's own limit
    calls = []

    def holds(mids: np.ndarray) -> np.ndarray:
        calls.append(mids.shape)
        return np.sin(mids) * 1e-3 + mids <= limit[:, None]

    want = _halved_one_step_a_call(holds, lo.copy(), hi.copy(), steps)
    calls.clear()
    got = bisect_halves(holds, lo, hi, steps, levels)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in want]
    assert len(calls) == -(-steps // levels)  # ceil: the last call may take fewer steps
    assert all(shape[1] <= 2**levels - 1 for shape in calls)


def test_the_midpoints_are_the_halvings_breadth_first() -> None:
    mids = subtree_mids(np.array([0.0]), np.array([8.0]), 2)
    np.testing.assert_array_equal(mids, [[4.0, 2.0, 6.0]])
    # A bracket of grid indices halves by floor division (`bisect_edge`'s).
    np.testing.assert_array_equal(subtree_mids(np.array([-1]), np.array([8]), 2), [[3, 1, 5]])
