"""One pass of the threshold search priced: each workload's thresholds (`ThresholdSearch`), the
prefill pool of every (workload, TP pair, threshold) at each size in one bisection
(`prefill_pools`), and the decode workers' capacity at every size some split needs in one
batch search (`decode_workers`), with the rows they were priced on (`SearchRows`).

`thresholds.py` turns these into each threshold's best split of the cluster (`Candidate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from disagg_decider.calc.layouts import split_grid
from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.pools import ingress_rate_per_s, prefill_pool, rate_where
from disagg_decider.calc.layouts.threshold_split import (
    SplitTable,
    split_tables,
    thresholds,
)
from disagg_decider.calc.physics.kvpath import TransferPath, transfer_path
from disagg_decider.calc.replicas import colocated_best, decode, prefill
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.classes import components
from disagg_decider.workload import Resolved

MIN_SHARE = 1e-3  # a part holding fewer requests than this is not a pool of its own


def stack_rows(many: list[Lengths], shape) -> Lengths:
    """Scalar lengths, one per row, as rows of the calculator's axes.

    One array of every field of every row, then a contiguous copy per field: the same values
    (nothing is computed), several times faster than reading each field of each row apart.
    """
    names = list(vars(many[0]))
    table = np.array([list(vars(x).values()) for x in many], dtype=float).reshape(len(many), -1)
    return Lengths(
        **{k: np.ascontiguousarray(table[:, i]).reshape(shape) for i, k in enumerate(names)}
    )


def concat_rows(many: list[Lengths], shape) -> Lengths:
    """Lengths of several row blocks, one after the other, reshaped (one block: its own
    fields reshaped, the same values uncopied)."""
    if len(many) == 1:
        return Lengths(**{k: v.reshape(shape) for k, v in vars(many[0]).items()})
    fields = [vars(x) for x in many]  # each block's fields read by name, not by getattr
    return Lengths(
        **{k: np.concatenate([f[k] for f in fields]).reshape(shape) for k in vars(many[0])}
    )


@dataclass(frozen=True)
class ThresholdSearch:
    """One workload's thresholds (the parts at each, as rows) and the TP pairs it tries."""

    r: Resolved
    table: SplitTable  # the mix split at each threshold searched, (n,) rows
    pairs: list[tuple[int, int]]
    path: TransferPath  # the KV's path from the prefill pool to a decode worker
    n: int  # thresholds searched

    @classmethod
    def of(cls, r: Resolved, pairs: list[tuple[int, int]]) -> ThresholdSearch | None:
        return cls.many([r], [pairs])[0]

    @classmethod
    def many(
        cls, resolved: Sequence[Resolved], pairs: Sequence[list[tuple[int, int]]]
    ) -> list[ThresholdSearch | None]:
        """`of` each workload (None where it tries no pair or no threshold splits its mix),
        the mixes of all of them split in one pass (`split_tables`: each its own bits)."""
        mixes = [components(r.workload) for r, p in zip(resolved, pairs, strict=True) if p]
        tables = iter(split_tables([(tuple(m), thresholds(m)) for m in mixes]) if mixes else [])
        out: list[ThresholdSearch | None] = []
        for r, p in zip(resolved, pairs, strict=True):
            out.append(cls._kept(r, next(tables), list(p)) if p else None)
        return out

    @classmethod
    def _kept(cls, r: Resolved, table: SplitTable, pairs: list) -> ThresholdSearch | None:
        # A share below MIN_SHARE either way is colocated or always-disaggregated.
        keep = (table.long_share >= MIN_SHARE) & (table.long_share <= 1.0 - MIN_SHARE)
        if not keep.any():
            return None
        if not keep.all():  # (all kept: the table as it is, the same values uncopied)
            table = table.rows(keep)
        return cls(r, table, pairs, transfer_path(r), len(table.thresholds))

    @property
    def shares(self) -> np.ndarray:
        return self.table.long_share

    @property
    def longs(self) -> Lengths:
        return self.table.long

    @property
    def locals_(self) -> Lengths:
        return self.table.local

    @property
    def budget(self) -> float:
        return float(self.r.workload.cluster.gpus)

    @cached_property
    def rows(self) -> np.ndarray:
        """0 .. n - 1, for every pair's search to index its thresholds by."""
        return np.arange(self.n)

    @cached_property
    def chunks(self) -> np.ndarray:
        """The chunk sizes the decode workers choose from (the batch search's list)."""
        return np.asarray(self.r.workload.efficiency.chunk_tokens, dtype=float)

    @cached_property
    def columns(self) -> tuple[list[float], list[float]]:
        """The thresholds and the shares sent to the pool, as floats: the same for every pair."""
        return self.table.thresholds.tolist(), self.table.long_share.tolist()


@dataclass(frozen=True)
class Workers:
    """Decode workers with local prefill at one TP: per-replica capacity and chunk index per
    (threshold, pool size), pool sizes ascending."""

    sizes: np.ndarray  # (Y,) replicas behind the router
    rate_per_s: np.ndarray  # (n, Y)
    chunk_index: np.ndarray  # (n, Y)

    def at(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Capacity and chunk index at pool sizes y, (n, X) like y (the sizes searched)."""
        k = np.minimum(self.sizes.searchsorted(y), self.sizes.size - 1)
        rows = np.arange(k.shape[0])[:, None]  # `np.take_along_axis(..., k, axis=1)`
        return self.rate_per_s[rows, k], self.chunk_index[rows, k]


def decode_workers(
    first: Resolved, live: list[ThresholdSearch], pools: dict[tuple[int, tuple], ThresholdPools]
) -> dict[tuple[int, int], Workers]:
    """Per-replica capacity of decode workers at every (workload, decode TP, pool size) any
    pair uses, in one batch search. It does not depend on the prefill pool's TP, so each size
    is searched once for every pair sharing the decode TP.

    Only (threshold, size) rows some split can take are searched: a split whose prefill pool
    admits nothing (`pools`) serves min(0, y x capacity) = 0 whatever the workers' capacity, so
    it is never a threshold's best split (`_best_splits` keeps positive goodputs only) and its
    capacity is never read into a candidate. Rows no split needs read capacity 0, which gives
    the same 0 there.
    """
    keys, sizes, needs = [], [], []
    for k, s in enumerate(live):
        by_tp: dict[int, set[float]] = {}
        for pair in s.pairs:
            if (k, pair) in pools:
                pool = pools[k, pair]
                by_tp.setdefault(pair[1], set()).update(pool.y[pool.used].tolist())
        for d_tp, ys in by_tp.items():
            if ys:
                keys.append((k, d_tp))
                sizes.append(np.array(sorted(ys)))
                needs.append(_rows_needed(k, s, d_tp, sizes[-1], pools))
    if not keys:
        return {}
    w = first.workload
    # Every needed row in (workload, decode TP, threshold, size) order: its threshold's row in
    # all workloads' local parts stacked, its size, and its key's columns.
    starts = np.cumsum([0] + [s.n for s in live])
    at, servers, counts, per_key = [], [], [], []
    for (k, d_tp), ys, need in zip(keys, sizes, needs, strict=True):
        t, y = need.nonzero()  # row-major: the order `need.ravel()` selects
        at.append(t + starts[k])
        servers.append(ys[y])
        counts.append(t.size)
        slo = live[k].r.workload.slo
        per_key.append((float(d_tp), float(slo.ttft_ms), float(slo.tpot_ms)))
    at = np.concatenate(at)
    rate, chunk_index = np.zeros(0), np.zeros(0, dtype=np.int64)
    if at.size:
        # (3, rows), each row contiguous: the decode TP, the TTFT and TPOT targets
        each = np.array(per_key).T.repeat(counts, axis=1)
        tp, ttft, tpot = (each[i].reshape(-1, 1, 1) for i in range(3))
        locals_ = concat_rows([s.locals_ for s in live], (-1,))
        found = colocated_best.best_points(
            engine_for(first, tp),
            locals_.at(at, (-1, 1, 1)),
            ttft,
            tpot,
            np.asarray(w.efficiency.chunk_tokens, dtype=float),
            servers=np.concatenate(servers).reshape(-1, 1, 1),
        )
        rate, chunk_index = np.ravel(found.rate_per_s), np.ravel(found.chunk_index)
    out, start = {}, 0
    for (k, d_tp), ys, need in zip(keys, sizes, needs, strict=True):
        stop = start + int(need.sum())
        rates, chunks = np.zeros(need.shape), np.zeros(need.shape, dtype=chunk_index.dtype)
        rates[need], chunks[need] = rate[start:stop], chunk_index[start:stop]
        out[k, d_tp] = Workers(sizes=ys, rate_per_s=rates, chunk_index=chunks)
        start = stop
    return out


def _rows_needed(
    k: int,
    s: ThresholdSearch,
    d_tp: int,
    ys: np.ndarray,
    pools: dict[tuple[int, tuple], ThresholdPools],
) -> np.ndarray:
    """(threshold, decode pool size) rows of one workload and decode TP that some pair's split
    can serve on: its prefill pool admits something there. (n, Y)."""
    need = np.zeros((s.n, ys.size), dtype=bool)
    for pair in s.pairs:
        if pair[1] == d_tp and (k, pair) in pools:
            pool = pools[k, pair]
            # Sizes may repeat along a pair's splits: ufunc.at ORs every one in.
            at = ys.searchsorted(pool.y)
            serves = (pool.total_per_s > 0) & pool.used
            rows = serves.nonzero()[0]  # the threshold of each serving split
            np.logical_or.at(need, (rows, at[serves]), True)
    return need


@dataclass(frozen=True)
class SearchRows:
    """The rows one pass of the search priced, (R,) one per (workload, pair, threshold): the
    parts' lengths (R, 1), the KV path, the prefill pool and the KV ingress bound on a decode
    worker. A candidate keeps its row (`Candidate.row`), so the pricing of the chosen ones
    (`conditional_rows.Rows`) takes them rather than build them again: every value is
    computed element by element from the row's own inputs, so a row taken gives the bits
    the same computation on that row alone would."""

    long: Lengths
    local: Lengths
    paths: TransferPath
    pool: prefill.Pool  # fields (R,), nodes (R, K)
    ingress_per_s: np.ndarray  # (R,) all requests a decode worker's NICs admit

    def local_at(self, rows: np.ndarray) -> Lengths:
        return self.local.at(rows)

    def long_at(self, rows: np.ndarray) -> Lengths:
        return self.long.at(rows)

    def ingress_at(self, rows: np.ndarray) -> np.ndarray | None:
        """The KV ingress bound of `rows` (`conditional_rows.Rows.ingress_per_s` reads it)."""
        return self.ingress_per_s[rows]

    def pool_at(self, rows: np.ndarray) -> prefill.Pool:
        return self.pool.rows(rows)


@dataclass(frozen=True)
class ThresholdPools:
    """A (workload, TP pair)'s prefill pool at each threshold and size, and the KV ingress
    bound on a decode worker; its rows of the pass's `SearchRows` start at `start`."""

    x: np.ndarray  # (n, X) prefill replicas, per threshold (`split_grid`)
    y: np.ndarray  # (n, X) the decode replicas left
    used: np.ndarray  # (n, X) which sizes are real (the rest pad the rows, never read)
    total_per_s: np.ndarray  # (n, X) all requests the pool admits (its share of them)
    ingress_per_s: np.ndarray  # (n,) all requests a decode worker's NICs admit
    block: SearchRows
    start: int


def prefill_pools(
    first: Resolved, live: list[ThresholdSearch], sizes: dict[tuple[int, tuple], tuple]
) -> dict[tuple[int, tuple], ThresholdPools]:
    """Every (workload, pair, threshold)'s prefill pool at its sizes (`sizes`: (x, used), both
    (n, X)), in one bisection."""
    keys, grids = [], []
    for key, (x, used) in sizes.items():
        if x.size:
            keys.append(key)
            grids.append((x, used))
    if not keys:
        return {}
    widest = max(x.shape[1] for x, _ in grids)
    rows = sum(live[k].n for k, _ in keys)
    # Sizes past a pair's grid pad its rows (one replica, not used: never read or bisected).
    x_rows, used = np.ones((rows, widest)), np.zeros((rows, widest), dtype=bool)
    longs, locals_, p_col, d_col, ttft, owner, shares = [], [], [], [], [], [], []
    start = 0
    for (k, (p_tp, d_tp)), (x, real) in zip(keys, grids, strict=True):
        s = live[k]
        longs.append(s.longs)
        locals_.append(s.locals_)
        p_col.append(float(p_tp))
        d_col.append(float(d_tp))
        ttft.append(float(s.r.workload.slo.ttft_ms))
        owner.append(k)
        x_rows[start : start + s.n, : x.shape[1]] = x
        used[start : start + s.n, : x.shape[1]] = real
        shares.append(s.shares)
        start += s.n
    each = np.array([live[k].n for k, _ in keys])  # rows per (workload, pair)
    p = np.array(p_col).repeat(each).reshape(-1, 1)
    d = np.array(d_col).repeat(each).reshape(-1, 1)
    long_rows, local_rows = concat_rows(longs, (-1, 1)), concat_rows(locals_, (-1, 1))
    path = TransferPath.stack([s.path for s in live]).take(np.array(owner).repeat(each), (-1, 1))
    join = decode.join_step_ms(engine_for(first, d), local_rows)
    ttft_ms = np.array(ttft).repeat(each)
    pool = prefill_pool(first, engine_for(first, p), long_rows, path, ttft_ms, p, d, join_ms=join)
    wide = prefill.Pool(
        np.asarray(pool.mean_ms)[:, None],
        np.asarray(pool.scv)[:, None],
        np.asarray(pool.nodes_ms)[:, None, :],
        np.asarray(pool.target_ms)[:, None],
    )
    share = np.concatenate(shares)
    total = rate_where(wide, x_rows, used) / share[:, None]
    # Each decode worker receives its share of the long requests' KV over its NICs.
    ingress = np.ravel(ingress_rate_per_s(first, path, long_rows, p, d)) / share
    block = SearchRows(long_rows, local_rows, path, pool, ingress)
    out, start = {}, 0
    for (k, pair), (x, real) in zip(keys, grids, strict=True):
        stop = start + live[k].n
        y = split_grid.decode_left(live[k].budget, x, *pair)
        rates = total[start:stop, : x.shape[1]]
        out[k, pair] = ThresholdPools(x, y, real, rates, ingress[start:stop], block, start)
        start = stop
    return out
