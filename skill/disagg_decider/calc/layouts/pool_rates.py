"""A prefill pool's rate at every whole size, bisected once for a search and read back after.

The disaggregated search prices each (row, prefill layout, decode layout) entry's prefill pool
at a chain of sizes (`pools.pooled_split`: one replica, the ideal size, the sizes bracketing
the best split), and the verdict prices the chosen pair's pool again (one replica,
`Pool.sizing`, the chosen size). Each of those is a load bisection of its own, and on a small
cluster every one of them lands on a size the cluster allows, 1 .. most. Where an entry
allows at most `TABLE_SIZES` prefill replicas, this bisects every allowed size of it in one
call up front (one replica of the others); the later questions are then read off the table.

Why the answers stay exact: `queueing.max_rate_per_ms` prices every entry on its own (the
same operations on the entry's own inputs, whatever else is in the call), so a tabulated rate
has the bits a fresh bisection of that entry at that size gives. Only entries and sizes the
table holds are read from it; anything else is bisected as before (`pools.rate_where`). The
verdict takes the chosen pair's pool itself from here too (`at`): the search built it at the
workload's own prompt element by element, so it holds the bits a pool built again would.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.layouts.pools import rate_where
from disagg_decider.calc.replicas import prefill

TABLE_SIZES = 8  # entries allowing up to this many prefill replicas are tabulated whole
# ... or up to this many where the whole table stays within `WIDE_TABLE_POINTS` (entry, size)
# points: one decision's search (rag-8k: 557 points on 16 GPUs), where the split's later
# bisections (one call each, ~300 Python-level calls) cost more than the table's extra points;
# a batch's blocks (2,000-11,000 points) keep the narrow table.
WIDE_TABLE_SIZES = 16
WIDE_TABLE_POINTS = 1_000
BISECT_ABOVE = 64  # `sizing` bisects the count where a pool may need more replicas than this


@dataclass(frozen=True)
class PoolRates:
    """Rates of a pool's entries (any shape) at sizes 1, 2, ... where tabulated.

    `rates[k]` is the rate at k + 1 replicas; `sizes` how many leading sizes each entry holds
    (0: none, every question about it is bisected).
    """

    pool: prefill.Pool
    rates: np.ndarray  # (X, *shape)
    sizes: np.ndarray  # (*shape,)

    @classmethod
    def tabulate(cls, pool: prefill.Pool, most: np.ndarray, wanted: np.ndarray) -> PoolRates:
        """Every size 1 .. `most` of the `wanted` entries that allow at most `TABLE_SIZES`, and
        one replica of the others (the first rate both the split and the verdict ask for)."""
        most = np.maximum(most, 0.0)
        sizes = _table_sizes(most, wanted, WIDE_TABLE_SIZES)
        if sizes.sum() > WIDE_TABLE_POINTS:
            sizes = _table_sizes(most, wanted, TABLE_SIZES)
        top = int(np.max(sizes, initial=0.0))
        grid = np.arange(1.0, top + 1.0).reshape(-1, *(1,) * sizes.ndim)
        rates = rate_where(pool, grid, grid <= sizes) if top else np.zeros((0, *sizes.shape))
        return cls(pool=pool, rates=rates, sizes=sizes)

    def at(self, index: tuple) -> PoolRates:
        """The entries at `index` (numpy indexing of the entry axes), their pool with them."""
        shape = self.sizes.shape
        k = np.shape(self.pool.nodes_ms)[-1]
        pool = prefill.Pool(
            *(np.broadcast_to(a, shape)[index] for a in (self.pool.mean_ms, self.pool.scv)),
            nodes_ms=np.broadcast_to(self.pool.nodes_ms, (*shape, k))[index],
            target_ms=np.broadcast_to(self.pool.target_ms, shape)[index],
        )
        return PoolRates(
            pool=pool, rates=self.rates[(slice(None), *index)], sizes=self.sizes[index]
        )

    def holds(self, servers: np.ndarray) -> np.ndarray:
        """Where a whole size the table holds is asked for (broadcasts like `rate_where`)."""
        return (servers >= 1.0) & (servers <= self.sizes) & (servers == np.floor(servers))

    def __call__(self, servers, mask: np.ndarray) -> np.ndarray:
        """`pools.rate_where(pool, servers, mask)`, tabulated entries read off the table."""
        mask = np.asarray(mask)
        servers = np.broadcast_to(np.asarray(servers, dtype=float), mask.shape)
        hit = mask & self.holds(servers)
        if not hit.any():
            return rate_where(self.pool, servers, mask)
        out = rate_where(self.pool, servers, mask & ~hit)
        out[hit] = self._read(servers, hit)
        return out

    def _read(self, servers: np.ndarray, hit: np.ndarray) -> np.ndarray:
        """The tabulated rates at `servers` where `hit` (flat, in `hit`'s order): each hit's
        size and entry picked out of the table directly (`np.take_along_axis` over every
        entry builds its index arrays in a dozen Python-level steps)."""
        lead = servers.ndim - self.sizes.ndim  # 0, or 1 for a leading axis of sizes per entry
        at = hit.nonzero()
        table, entries = self.rates, hit.shape[lead:]
        if table.shape[1:] != entries:
            table = np.broadcast_to(table, (table.shape[0], *entries))
        return table[(servers[at].astype(np.int64) - 1, *at[lead:])]

    def sizing(self, rate_per_s, most: np.ndarray, one: np.ndarray) -> tuple[np.ndarray, PoolRates]:
        """`pool.sizing(rate_per_s, most, one).servers`, bisecting only the sizes it must; and
        these rates with the sizes it bisected added (entries one per row, sizes last).

        `Pool.sizing` bisects sizes 1 .. top for every entry (top from one replica's rate, the
        largest over the entries) and takes the first that carries the rate within `most`. An
        entry whose first such size is in the table needs nothing more; every other entry has
        the sizes the table does not hold bisected (one call), so the first size found is the
        same one.
        """
        rate = np.asarray(rate_per_s, dtype=float)
        carries = one > 0  # divided only there (no np.errstate: it costs more than this)
        bound = np.where(carries, np.ceil(rate / np.where(carries, one, 1.0) - 1e-9), most)
        top = int(max(np.max(np.minimum(bound, most)), 1))
        if top > BISECT_ABOVE:
            most_ = np.asarray(most, dtype=float)
            return self._bisected(rate, most_, np.minimum(float(top), most_)), self
        sizes = np.arange(1.0, top + 1.0)
        width = max(top, self.rates.shape[0])
        table = np.moveaxis(self.rates, 0, -1)
        table = np.pad(table, [(0, 0)] * (table.ndim - 1) + [(0, width - table.shape[-1])])
        held = sizes <= self.sizes[..., None]
        settled = (held & self._carries(table[..., :top], rate, sizes, most)).any(axis=-1)
        rest = ~held & ~settled[..., None]
        rates = table[..., :top]
        if rest.any():
            pool = prefill.Pool(
                *(np.asarray(a)[..., None] for a in (self.pool.mean_ms, self.pool.scv)),
                nodes_ms=np.asarray(self.pool.nodes_ms)[..., None, :],
                target_ms=np.asarray(self.pool.target_ms)[..., None],
            )
            rates = np.where(rest, rate_where(pool, sizes, rest), rates)
            table[..., :top] = rates
        ok = (held | rest) & self._carries(rates, rate, sizes, most)
        servers = np.where(ok.any(axis=-1), ok.argmax(axis=-1) + 1.0, np.asarray(most) + 1.0)
        known = np.where(settled, self.sizes, np.maximum(self.sizes, top))
        return servers, PoolRates(pool=self.pool, rates=np.moveaxis(table, -1, 0), sizes=known)

    def _bisected(self, rate: np.ndarray, most: np.ndarray, top: np.ndarray) -> np.ndarray:
        """`sizing`'s count by bisection on it, for pools that may need more than
        `BISECT_ABOVE` replicas (a large cluster): a pool's rate does not fall as it grows, so
        the first size that carries the rate is found in log2(top) passes of one size per
        entry, not by pricing every size up to the cluster's. The rates priced are not kept."""
        lo = np.zeros(np.shape(top))  # carries nothing (no replica)
        hi = np.maximum(top, 1.0) + 1.0  # past the last size tried: as if it carried
        while (open_ := hi - lo > 1.0).any():
            mid = np.floor((lo + hi) / 2.0)
            ask = open_ & (mid <= top)
            carries = self._carries(
                self(np.where(ask, mid, 1.0), ask)[..., None], rate, mid[..., None], most
            )[..., 0]
            carries = np.where(ask, carries, True)
            lo, hi = np.where(open_ & ~carries, mid, lo), np.where(open_ & carries, mid, hi)
        return np.where(hi <= top, hi, most + 1.0)

    @staticmethod
    def _carries(rates: np.ndarray, rate: np.ndarray, sizes: np.ndarray, most) -> np.ndarray:
        """`Pool.sizing`'s test: the size carries the rate and the cluster allows it."""
        return (rates >= rate[..., None] * (1 - 1e-9)) & (sizes <= np.asarray(most)[..., None])


def _table_sizes(most: np.ndarray, wanted: np.ndarray, table: int) -> np.ndarray:
    """Sizes tabulated per entry: all of them up to `table`, else one replica; 0 unwanted."""
    return np.where(wanted, np.where(most <= table, most, np.minimum(most, 1.0)), 0.0)
