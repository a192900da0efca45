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
    s_ok = pick(slack, np.maximum(last_ok, 0))
    s_bad = pick(slack, np.minimum(first_bad, n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = (s_ok / (s_ok - s_bad)).clip(0.0, 1.0)
    frac = np.where((first_bad < n) & (frac == frac), frac, 0.0)  # nan (inf - inf) -> 0
    return np.where(last_ok >= 0, last_ok + frac, -1.0)


def value_at(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Linear interpolation of `values` along the last axis at fractional `index` (>= 0)."""
    n = values.shape[-1]
    i = np.clip(index, 0.0, n - 1)
    lo = i.astype(int)
    hi = np.minimum(lo + 1, n - 1)
    v_lo = pick(values, lo)
    return v_lo + (i - lo) * (pick(values, hi) - v_lo)


def pick(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values[..., index[...]]: one element of the last axis per leading position."""
    values = np.broadcast_to(values, (*np.shape(index), values.shape[-1]))
    flat = values.reshape(-1, values.shape[-1])
    return flat[np.arange(flat.shape[0]), np.ravel(index)].reshape(np.shape(index))


def slack(limit, value):
    """Normalised headroom of `value` under `limit`: >= 0 when the limit holds.

    A limit of zero (no KV room at all) leaves no headroom.
    """
    if np.ndim(limit) == 0 and limit > 0:
        return 1.0 - value / limit
    limit = np.asarray(limit, dtype=float)
    safe = np.where(limit > 0, limit, 1.0)
    return np.where(limit > 0, 1.0 - value / safe, -np.inf)
