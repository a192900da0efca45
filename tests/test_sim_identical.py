"""Seeded simulations give bit-identical results to the pinned ones (`sim_digest_cases`).

The simulator's hot loops are rewritten for speed (issue 17); these digests were recorded
from the code before that work, so a faster loop that changed any request's first-token or
done time by one ulp fails here. After a deliberate change to the physics or the simulator,
regenerate with `PYTHONPATH=skill /work/venv/bin/python tests/sim_digest_cases.py --write`.
"""

from __future__ import annotations

import pytest

from tests import sim_digest_cases as cases


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_seeded_simulation_is_identical_to_the_pinned_digest(name):
    pinned = cases.pinned()
    assert name in pinned, f"no pinned digest for {name}: run tests/sim_digest_cases.py --write"
    assert cases.CASES[name]() == pinned[name]


def test_every_pinned_digest_has_a_case():
    assert set(cases.pinned()) == set(cases.CASES)


def test_the_digest_sees_one_ulp():
    import numpy as np

    a = np.array([1.0, 2.0, 3.0])
    b = a.copy()
    b[1] = np.nextafter(b[1], 3.0)
    assert cases.digest_arrays(a) != cases.digest_arrays(b)
