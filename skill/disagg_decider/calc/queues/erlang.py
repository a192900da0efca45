"""Erlang C: the probability that an arrival waits in an M/M/c queue (physics.md 2.6).

Split from `queueing`, which re-exports `erlang_c` and `erlang_c_exact`: the load bisection
(`load_bisection`) reads the same cached table directly.

Pools of up to `TABLE_ROWS` replicas read a cached table (rows 1 .. c, built in O(c^2) time and
O(c) memory per row: cheap at the sizes a verdict on a few nodes prices). Larger pools, which a
cluster of hundreds or thousands of GPUs gives, are computed where asked (`interpolated`), at a
cost independent of c, so a decision's cost does not grow with the cluster.
"""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np

from disagg_decider.calc.queues.array_helpers import clip


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
TABLE_ROWS = 64  # pools up to this size read the table; larger ones `interpolated`


@cache
def erlang_row(servers: int) -> np.ndarray:
    row = erlang_c_exact(servers, servers * np.linspace(0.0, 1.0, RHO_STEPS + 1))
    row.setflags(write=False)
    return row


# One table, grown to the largest pool asked for so far: `erlang_table(top)` is a view of its
# first rows, and `erlang_steps(top)` of its steps. A table per size held up to 64 tables of up
# to 2 MB each (and as many step tables), which a long batch of varied clusters filled one by
# one: a worker's memory crept with the batch (issue 27). The rows are the same `erlang_row`s.
_grown: dict[str, np.ndarray] = {}


def _grow(top: int) -> None:
    width = RHO_STEPS + 1
    held = _grown.get("table")
    if held is not None and held.size >= (top + 1) * width:
        return
    table = np.vstack([np.ones(width)] + [erlang_row(c) for c in range(1, top + 1)]).reshape(-1)
    table.setflags(write=False)
    steps = np.append(table[1:] - table[:-1], 0.0)
    steps.setflags(write=False)
    _grown.update(table=table, steps=steps)


def erlang_table(top: int) -> np.ndarray:
    """Rows c = 0 .. top of C(c, c rho) on the load grid (row 0 unused), flat."""
    _grow(top)
    return _grown["table"][: (top + 1) * (RHO_STEPS + 1)]


def erlang_steps(top: int) -> np.ndarray:
    """table[i + 1] - table[i] of `erlang_table(top)`: the same subtraction, done once for
    `_LoadTest`, which interpolates on the table 17 times per bisected entry. (The last entry
    of each row, which no interpolation reads, may hold the step into the next row.)"""
    _grow(top)
    return _grown["steps"][: (top + 1) * (RHO_STEPS + 1)]


def erlang_c(servers, offered):
    """`erlang_c_exact`, read off a cached table by load (linear between 4,096 steps).

    The calculator evaluates Erlang C inside bisections over millions of candidates; a table
    per pool size, built once, turns each evaluation into one gather. Off by less than 1e-4.
    """
    # No explicit broadcast: every operation below broadcasts c against a element-wise, and
    # the largest pool size is the same whether or not c is repeated along a's axes (an empty
    # broadcast has none: either input is empty).
    c, a = np.asarray(servers, dtype=float), np.asarray(offered, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        load = a / c
    return erlang_c_at(c, a, load)


def erlang_c_at(c: np.ndarray, a: np.ndarray, load: np.ndarray) -> np.ndarray:
    """`erlang_c` of float arrays `c` and `a` with their load a / c given: `queueing.wait_tail`
    divides them anyway, so its Erlang C neither divides again nor enters an `np.errstate`."""
    top = int(c.max()) if c.size and a.size else 0
    table = erlang_table(table_top(c) if top > TABLE_ROWS else max(top, 1))
    if top > TABLE_ROWS:
        large = c > TABLE_ROWS
        row = np.where(large, 0, c.astype(np.int64))
    else:
        row = c.astype(np.int64)
    out, x = _on_rows(table, row * (RHO_STEPS + 1), load)
    if top > TABLE_ROWS:
        out = np.array(np.broadcast_to(out, np.broadcast_shapes(out.shape, large.shape)))
        where = np.broadcast_to(large, out.shape)
        out[where] = interpolated(
            np.broadcast_to(c, out.shape)[where], np.broadcast_to(x, out.shape)[where]
        )
    return np.where(a < c, out, 1.0)


class ErlangRows:
    """`erlang_c_at` for fixed pools `c` at many loads: the table and each pool's row in it
    found once (a search reads the same lines' pools at every batch it tries). The same
    operations on the same values as `erlang_c_at`, which pools beyond the table still take."""

    def __init__(self, c: np.ndarray) -> None:
        self.c = c
        top = int(c.max()) if c.size else 0
        self.whole = top <= TABLE_ROWS  # every pool reads the table
        self.table = erlang_table(max(top, 1)) if self.whole else None
        self.row_base = c.astype(np.int64) * (RHO_STEPS + 1)

    def at(self, a: np.ndarray, load: np.ndarray) -> np.ndarray:
        if self.table is None or not a.size:
            return erlang_c_at(self.c, a, load)
        out, _ = _on_rows(self.table, self.row_base, load)
        return np.where(a < self.c, out, 1.0)


def _on_rows(table: np.ndarray, row_base: np.ndarray, load) -> tuple[np.ndarray, np.ndarray]:
    """C read off the flat `table` at `load`, linear between its grid steps, each entry on the
    row starting at `row_base` (row x (RHO_STEPS + 1)); with the load's grid position."""
    x = clip(load, 0.0, 1.0) * RHO_STEPS
    lo = np.minimum(x.astype(np.int64), RHO_STEPS - 1)
    frac = x - lo
    base = row_base + lo
    at_lo = table.take(base)
    return at_lo + frac * (table.take(base + 1) - at_lo), x


# Gauss-Legendre on [-1, 1] with this many nodes: C to within 1e-11 of `erlang_c_exact` for
# c = 65 .. 100,000 at every load of the grid (tests/test_erlang_large.py).
_NODES = 24
_HALF_WIDTH = 12.0  # the integral's range: +-12 standard deviations of its Gaussian shape


@cache
def _legendre() -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights, imported only when a large pool is priced (numpy.polynomial costs
    a few ms to import, which a verdict on a small cluster never pays)."""
    from numpy.polynomial.legendre import leggauss

    return leggauss(_NODES)


def erlang_c_integral(servers: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """C(c, c rho) for flat arrays, in a fixed number of operations whatever c is.

    1 / B(c, a) = sum_j c! / ((c - j)! a^j) = integral_0^inf exp(-t) (1 + t / a)^c dt (expand
    the power and integrate term by term). With a = c rho, t = c - a + sqrt(c) s, the
    integrand is exp(c (1 - rho + ln rho)) times exp(c ln(1 + s / sqrt(c)) - sqrt(c) s), a
    bell of unit width in s around 0, cut at s = -sqrt(c) (1 - rho) (t = 0); Gauss-Legendre
    over the +-12 widths that matter integrates it. Then C = B / (1 - rho + rho B). 1 where
    rho >= 1.
    """
    c = np.asarray(servers, dtype=float)
    rho = np.minimum(np.asarray(rho, dtype=float), 1.0)
    with np.errstate(divide="ignore"):
        log_scale = c * (1.0 - rho + np.log(rho))  # <= 0
    out = np.zeros(c.shape)
    # Where exp(log_scale) underflows (a light load on a large pool), B and C are 0: the
    # integral (>= 1) is not needed.
    some = log_scale > _UNDERFLOW
    out[some] = _erlang_c_bell(c[some], rho[some], log_scale[some])
    return np.where(rho < 1.0, out, 1.0)


_UNDERFLOW = -746.0  # exp of anything below is 0.0 in float64


def _erlang_c_bell(c: np.ndarray, rho: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
    """`erlang_c_integral` where the scale exp(c (1 - rho + ln rho)) is not 0."""
    nodes, weights = _legendre()
    root = np.sqrt(c)
    lo = np.maximum(-root * (1.0 - rho), -_HALF_WIDTH)
    half = (_HALF_WIDTH - lo) / 2.0
    s = (lo + _HALF_WIDTH)[:, None] / 2.0 + half[:, None] * nodes
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        bell = np.exp(c[:, None] * np.log1p(s / root[:, None]) - root[:, None] * s)
        inverse = root * half * (bell @ weights)  # 1 / B without exp(c (1 - rho + ln rho))
        b = np.exp(log_scale) / inverse
        out = b / (1.0 - rho + rho * b)
    return np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0)


def interpolated(servers: np.ndarray, x: np.ndarray) -> np.ndarray:
    """What a table row of `servers` would give at grid position `x` (load x RHO_STEPS, in
    [0, RHO_STEPS]): C at the two grid loads around x, linear between them. Flat arrays.

    The same reading as the table's, so a pool's answer does not jump where it crosses
    `TABLE_ROWS`; each value costs two `erlang_c_integral`s instead of a table row of c x
    4,097 terms.
    """
    rows = np.asarray(servers, dtype=float).ravel().astype(np.int64)  # the row a table reads
    x = np.asarray(x, dtype=float).ravel()
    lo = np.minimum(x.astype(np.int64), RHO_STEPS - 1)
    # A search asks about few pool sizes at many loads, often the same grid load: each
    # (size, grid load) is computed once.
    points, inverse = np.unique(rows * (RHO_STEPS + 1) + lo, return_inverse=True)
    c, at = np.divmod(points, RHO_STEPS + 1)
    c = c.astype(float)
    both = erlang_c_integral(np.concatenate((c, c)), np.concatenate((at, at + 1)) / RHO_STEPS)
    at_lo, at_hi = both[: points.size][inverse], both[points.size :][inverse]
    return at_lo + (x - lo) * (at_hi - at_lo)


@lru_cache(maxsize=1 << 16)
def grid_pair(servers: int, lo: int) -> tuple[float, float]:
    """C of a pool of `servers` at grid loads lo and lo + 1, for one entry at a time (the load
    bisection's few-entry path asks about the same few points again and again)."""
    both = erlang_c_integral(np.full(2, float(servers)), np.array([lo, lo + 1]) / RHO_STEPS)
    return float(both[0]), float(both[1])


def table_top(servers: np.ndarray) -> int:
    """The table rows a call needs: its largest pool of at most `TABLE_ROWS` (at least 1)."""
    c = np.asarray(servers, dtype=float)
    small = c[c <= TABLE_ROWS]
    return max(int(np.max(small)), 1) if small.size else 1
