"""Small array helpers that keep the verdict path off costly numpy corners.

`np.unique` consults `np.ma.is_masked`, which imports `numpy.ma` (about 15-20 ms at start-up)
for arrays that can never be masked; the grids here are plain float arrays.
"""

from __future__ import annotations

import numpy as np


def sorted_unique(values) -> np.ndarray:
    """The distinct values, ascending: what `np.unique` returns for a plain float array."""
    ordered = np.sort(np.asarray(values, dtype=float).reshape(-1))
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
