"""`calc.queues.array_helpers.sorted_unique` returns what `np.unique` returned on the calculator's
grids (it replaced np.unique so that a verdict never imports numpy.ma; issue 17)."""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider.calc.crossover import CROSSOVER_POINTS, _log_grid
from disagg_decider.calc.queues.array_helpers import first_best, sorted_unique
from disagg_decider.calc.replicas.decode import batch_grid


@pytest.mark.parametrize("top", [1, 2, 3, 7, 16, 64, 100, 257, 1024, 4096, 131072])
@pytest.mark.parametrize("points", [2, 16, 64, CROSSOVER_POINTS])
def test_equals_np_unique_on_rounded_log_grids(top, points):
    for low in (1, 64):
        values = np.round(np.geomspace(low, max(top, low), points))
        expected = np.unique(values)
        got = sorted_unique(values)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_equals_np_unique_on_unsorted_repeats_and_empty():
    rng = np.random.default_rng(5)
    values = rng.integers(0, 9, 200).astype(float)
    assert np.array_equal(sorted_unique(values), np.unique(values))
    assert sorted_unique([]).size == 0


def test_the_calculators_cached_grids_are_ascending_and_distinct():
    for grid in (_log_grid(131072), batch_grid(1024), batch_grid(3)):
        assert np.all(np.diff(grid) > 0) and not grid.flags.writeable


def test_first_best_takes_the_first_of_near_ties_and_the_true_best_otherwise():
    """A tie in exact arithmetic shows as a difference in the last bits, whose sign depends on
    the CPU; the choice must not."""
    x = 3.7
    rates = np.array([[x, x * (1 + 4e-16), 1.0], [1.0, 2.0, 2.0 * (1 - 1e-6)], [0.0, 0.0, 0.0]])
    assert first_best(rates, axis=-1).tolist() == [0, 1, 0]
    assert rates.argmax(axis=-1).tolist() == [1, 1, 0]  # plain argmax follows the last bit
