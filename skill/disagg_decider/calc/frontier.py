"""Where a constraint stops holding along a grid of batch sizes.

Capacity is the largest batch that still meets every target. The calculator evaluates a
coarse geometric grid of batches at once; instead of rounding down to the last grid point
(which would under-state capacity by up to a grid step), it interpolates the normalised slack
of the binding constraint to where it crosses zero. Slack must fall as the batch grows, so the
feasible batches form a prefix of the grid.
"""

from __future__ import annotations

import numpy as np


def boundary_index(slack: np.ndarray) -> np.ndarray:
    """Fractional index along the last axis where slack crosses zero; -1 when none is >= 0."""
    ok = slack >= 0
    n = slack.shape[-1]
    first_bad = np.where(ok.all(axis=-1), n, np.argmin(ok, axis=-1))
    last_ok = first_bad - 1
    s_ok = np.take_along_axis(slack, np.maximum(last_ok, 0)[..., None], -1)[..., 0]
    s_bad = np.take_along_axis(slack, np.minimum(first_bad, n - 1)[..., None], -1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(first_bad < n, s_ok / (s_ok - s_bad), 0.0)
    frac = np.nan_to_num(np.clip(frac, 0.0, 1.0), nan=0.0)
    return np.where(last_ok >= 0, last_ok + frac, -1.0)


def value_at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Linear interpolation of `values` along the last axis at fractional `index` (>= 0)."""
    n = values.shape[-1]
    i = np.clip(index, 0.0, n - 1)
    lo = np.floor(i).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = i - lo
    v_lo = np.take_along_axis(values, lo[..., None], -1)[..., 0]
    v_hi = np.take_along_axis(values, hi[..., None], -1)[..., 0]
    return v_lo + w * (v_hi - v_lo)


def slack(limit, value):
    """Normalised headroom of `value` under `limit`: >= 0 when the limit holds."""
    limit = np.asarray(limit, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(limit > 0, (limit - value) / np.where(limit > 0, limit, 1.0), -np.inf)
