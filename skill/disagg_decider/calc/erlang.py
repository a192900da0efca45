"""Erlang C: the probability that an arrival waits in an M/M/c queue (physics.md 2.6).

Split from `queueing`, which re-exports `erlang_c` and `erlang_c_exact`: the load bisection
(`load_bisection`) reads the same cached table directly.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from disagg_decider.calc.arrays import clip


def erlang_c_exact(servers, offered):
    """Probability an arrival waits in an M/M/c queue with `servers` and offered load a < c.

    Erlang B from 1 / B(c, a) = sum_j c (c - 1) ... (c - j + 1) / a^j, the terms summed in
    log space along a new axis (terms past j = c are zero), then C = c B / (c - a (1 - B)).
    Broadcasts; 1 where a >= c.
    """
    c, a = np.broadcast_arrays(
        np.asarray(servers, dtype=float), np.maximum(np.asarray(offered, dtype=float), 1e-300)
    )
    top = int(np.max(c)) if c.size else 0
    steps = np.arange(top, dtype=float)
    factor = c[..., None] - steps  # c - i for i = 0 .. top - 1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        logs = np.where(factor > 0, np.log(np.maximum(factor, 1e-300)), -np.inf)
        logs = logs - np.log(a)[..., None]
        inverse_b = 1.0 + np.exp(np.cumsum(logs, axis=-1)).sum(axis=-1)
        b = 1.0 / inverse_b
        out = c * b / (c - a * (1.0 - b))
    return np.where(a < c, np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0), 1.0)


RHO_STEPS = 4096  # the table's load grid: C(c, c rho) at rho = i / 4096


@cache
def erlang_row(servers: int) -> np.ndarray:
    row = erlang_c_exact(servers, servers * np.linspace(0.0, 1.0, RHO_STEPS + 1))
    row.setflags(write=False)
    return row


@cache
def erlang_table(top: int) -> np.ndarray:
    """Rows c = 0 .. top of C(c, c rho) on the load grid (row 0 unused)."""
    table = np.vstack([np.ones(RHO_STEPS + 1)] + [erlang_row(c) for c in range(1, top + 1)])
    table.setflags(write=False)
    return table.reshape(-1)


@cache
def erlang_steps(top: int) -> np.ndarray:
    """table[i + 1] - table[i] of `erlang_table(top)`: the same subtraction, done once for
    `_LoadTest`, which interpolates on the table 17 times per bisected entry."""
    table = erlang_table(top)
    steps = np.append(table[1:] - table[:-1], 0.0)
    steps.setflags(write=False)
    return steps


def erlang_c(servers, offered):
    """`erlang_c_exact`, read off a cached table by load (linear between 4,096 steps).

    The calculator evaluates Erlang C inside bisections over millions of candidates; a table
    per pool size, built once, turns each evaluation into one gather. Off by less than 1e-4.
    """
    # No explicit broadcast: every operation below broadcasts c against a element-wise, and
    # the largest pool size is the same whether or not c is repeated along a's axes (an empty
    # broadcast has none: either input is empty).
    c, a = np.asarray(servers, dtype=float), np.asarray(offered, dtype=float)
    top = int(np.max(c)) if c.size and a.size else 0
    table = erlang_table(max(top, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        x = clip(a / c, 0.0, 1.0) * RHO_STEPS
    lo = np.minimum(x.astype(np.int64), RHO_STEPS - 1)
    frac = x - lo
    base = c.astype(np.int64) * (RHO_STEPS + 1) + lo
    at_lo = table.take(base)
    out = at_lo + frac * (table.take(base + 1) - at_lo)
    return np.where(a < c, out, 1.0)
