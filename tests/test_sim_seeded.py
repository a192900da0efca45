"""Seeded simulations mean what the pinned ones do (`sim_signature_cases`).

Compared by meaning (`tests/meaning.py`): counts and text exact, every time within 1e-9
relative, so the last bits of numpy's exp/log on another CPU pass and a changed event order,
step time or event-loop arithmetic fails. After a deliberate change to the physics or the
simulator, regenerate with `PYTHONPATH=skill python tests/sim_signature_cases.py --write`.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests import meaning
from tests import sim_signature_cases as cases

REFRESH = "deliberate change? PYTHONPATH=skill python tests/sim_signature_cases.py --write"


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_seeded_simulation_means_what_the_pinned_one_does(name):
    pinned = cases.pinned()
    assert name in pinned, f"nothing pinned for {name}: {REFRESH}"
    found = meaning.differences(pinned[name], cases.CASES[name]())
    assert not found, "\n".join([*(str(d) for d in found[:10]), REFRESH])


def test_every_pinned_signature_has_a_case():
    assert set(cases.pinned()) == set(cases.CASES)


def _times(n: int = 4000) -> np.ndarray:
    return np.random.default_rng(1).exponential(500.0, n)


def test_the_signature_sees_one_request_moved_by_a_millisecond():
    a = _times()
    for i in (0, 1, 1234, len(a) - 1):
        b = a.copy()
        b[i] += 1.0
        assert meaning.differences(cases.signature(a), cases.signature(b)), i


def test_the_signature_sees_two_requests_swapped():
    """Sum and quantiles do not see a swap; the index-weighted sum does, picked or not."""
    a = _times()
    picked = set(np.linspace(0, len(a) - 1, cases.PICKS).astype(int).tolist())
    i, j = (k for k in (11, 3001) if k not in picked)
    b = a.copy()
    b[[i, j]] = b[[j, i]]
    assert meaning.differences(cases.signature(a), cases.signature(b))


def test_the_signature_ignores_the_last_bits():
    a = _times()
    b = np.nextafter(np.nextafter(a, np.inf), np.inf)
    assert not meaning.differences(cases.signature(a), cases.signature(b))
