"""Routing thresholds: the length mix split at T uncached tokens, and the best split of the
cluster for every (threshold, TP pair) of many workloads at once.

`calc/modes/conditional.py` prices the layout this feeds (see its docstring). Here the search:
each workload tries 16 thresholds and a handful of TP pairs, and every (threshold, pair) needs
the prefill pool's rate at each pool size (a load bisection) and the decode workers' capacity at
each pool size (a batch search). Rows are independent in both, so the thresholds, pairs and
workloads of a block (`compare.analyze_many`, one engine) go through one bisection and one batch
search: a decision pays numpy's fixed cost per call a few times instead of per pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from disagg_decider.calc.layouts import split_grid
from disagg_decider.calc.layouts.threshold_pools import (
    SearchRows,
    ThresholdPools,
    ThresholdSearch,
    Workers,
    decode_workers,
    prefill_pools,
)
from disagg_decider.calc.layouts.threshold_split import (  # noqa: F401  (public here too)
    THRESHOLD_POINTS,
    Parts,
    SplitTable,
    batch_weighted,
    mixture_lengths,
    split_at,
    split_table,
    thresholds,
)
from disagg_decider.classes import components
from disagg_decider.workload import Resolved


@dataclass(frozen=True)
class Candidate:
    """One conditional layout on the cluster: threshold, TP pair, chunk and whole pools."""

    threshold_tokens: float
    long_share: float  # requests sent to the prefill pool
    goodput_rate_per_s: float  # within both targets for 99% of all requests, whole cluster
    prefill_tp: int
    decode_tp: int
    prefill_replicas: int
    decode_replicas: int
    chunk_tokens: int
    ttft_p99_ms: float | None  # over all requests (`overall_ttft`), at the workload's rate
    tpot_p99_ms: float | None
    pool_rate_per_s: float = 0.0  # total requests the prefill pool admits (its share of them)
    per_replica_rate_per_s: float = 0.0  # a decode worker's capacity read off the grid
    settled: bool = False  # goodput checked against the reported p99s (`settle`)
    pooled_ttft_p99_ms: float | None = None  # the pooled long prompts' own p99 TTFT (report)
    local_ttft_p99_ms: float | None = None  # the locally prefilled prompts' own p99 TTFT
    # Where the search priced it: (its pass's `SearchRows`, its row there).
    row: tuple | None = field(default=None, compare=False, repr=False)
    # Where it was settled: (the decode workers' lines and batch grid built there, its row).
    workers: tuple | None = field(default=None, compare=False, repr=False)

    def split(self, r: Resolved) -> Parts:
        """The mix of r's workload (the candidate's own) split at the candidate's threshold
        (a candidate the search found reads its rows there instead, `row`)."""
        return split_at(components(r.workload), self.threshold_tokens)


def candidates(r: Resolved, pairs: list[tuple[int, int]]) -> list[Candidate]:
    """Every (threshold, TP pair) with its best whole split of the cluster.

    Goodputs here are read off the colocated capacity grid (an upper bound); `settle` checks
    the ones the choice depends on against the reported p99s.
    """
    return candidates_many([r], [pairs])[0]


def candidates_many(
    resolved: Sequence[Resolved], pairs: Sequence[list[tuple[int, int]]]
) -> list[list[Candidate]]:
    """`candidates` of each workload (sharing one engine: `group_key`), in order."""
    searches = ThresholdSearch.many(resolved, pairs)
    live = [s for s in searches if s is not None]
    if not live:
        return [[] for _ in searches]
    first = live[0].r
    # Each (workload, pair)'s prefill sizes, per threshold: every split of a small cluster,
    # brackets narrowed pass by pass on a large one (`split_grid`).
    grids = {
        (k, pair): split_grid.first_grid(s.budget, *pair, s.n)
        for k, s in enumerate(live)
        for pair in s.pairs
    }
    pools, totals = {}, {}  # each (workload, pair) once its bests are settled
    # Pairs whose first grid holds every split are settled after one pass (`split_grid`).
    every = {key for key in grids if split_grid.prices_every_size(live[key[0]].budget, *key[1])}
    while grids:
        priced = prefill_pools(first, live, grids)  # keyed (index in live, pair)
        workers = decode_workers(first, live, priced)  # keyed (index in live, decode TP)
        grids = {}
        for key, pool in priced.items():
            total = _totals(pool, workers[key[0], key[1][1]])
            if key in every:
                pools[key], totals[key] = pool, total
                continue
            gap = pool.total_per_s - pool.y * total[1]  # P - D
            x, used, settled = split_grid.refine(pool.x, pool.used, total[0], gap)
            if settled:
                pools[key], totals[key] = pool, total
            else:
                grids[key] = (x, used)
        every = set()
    found: list[list[Candidate]] = []
    for k, s in enumerate(live):
        found.append([])
        for pair in s.pairs:
            if (k, pair) in pools:
                found[-1].extend(_best_splits(s, pools[k, pair], totals[k, pair], pair))
    each = iter(found)
    return [[] if s is None else next(each) for s in searches]


def amended(c: Candidate, **changes) -> Candidate:
    """`dataclasses.replace(c, **changes)` for a candidate, in a few calls rather than a few
    per field: the search amends thousands of them a batch (settled goodputs, lifted ones,
    sized pools). Every field of a candidate is an `__init__` argument (no `__post_init__`),
    so its fields with the changes make the candidate `replace` builds."""
    if not changes.keys() <= _FIELDS:  # as `replace` refuses a name that is no field
        raise TypeError(f"not fields of a Candidate: {sorted(set(changes) - _FIELDS)}")
    return built({**c.__dict__, **changes})


def built(fields: dict) -> Candidate:
    """`Candidate(**fields)` for `fields` naming every field: the candidate with those values.

    A frozen dataclass's `__init__` sets each field through `object.__setattr__`, one call a
    field (some 2 us a candidate); the search builds and amends hundreds a decision. Setting
    the same values in one update of the instance's dict gives the object `__init__` gives
    (no `__post_init__`, no slots; `tests/test_conditional_structure.py` checks it)."""
    out = _new(Candidate)
    held = out.__dict__
    held |= fields  # (the operator: no call, where `update` is one)
    return out


_new = object.__new__
_FIELDS = frozenset(Candidate.__dataclass_fields__)


def block_rows(cands: Sequence[Candidate]) -> tuple[SearchRows, np.ndarray] | None:
    """The one block of search rows all `cands` were found on and their rows in it, or None
    where one has none or they come from several (then the caller builds them)."""
    rows = [c.row for c in cands]
    if not rows or None in rows:
        return None
    block = rows[0][0]
    for other, _ in rows:
        if other is not block:
            return None
    return block, np.array([i for _, i in rows], dtype=np.int64)


def _totals(pools: ThresholdPools, workers: Workers) -> tuple:
    """(goodput, per-replica decode capacity, chunk index) of every split priced, (n, X) each;
    goodput -1 at padding."""
    # Decode workers with local prefill: per-replica capacity with y replicas behind the router.
    per_replica, chunk_i = workers.at(pools.y)
    per_replica = np.minimum(per_replica, pools.ingress_per_s[:, None])
    total = np.minimum(pools.total_per_s, pools.y * per_replica)
    return np.where(pools.used, total, -1.0), per_replica, chunk_i


def _best_splits(
    s: ThresholdSearch, pools: ThresholdPools, totals: tuple, pair: tuple[int, int]
) -> list:
    """The best split of the cluster for each threshold, one TP pair."""
    total, per_replica, chunk_i = totals
    at = (s.rows, total.argmax(axis=1))  # each threshold's first best split
    best = total[at]
    if not (best > 0).any():
        return []
    # Each kind of column stacked and read out in one go (the same values, fewer calls): the
    # whole replicas and tokens as ints, the rates as floats.
    whole = np.array((pools.x[at], pools.y[at], s.chunks[chunk_i[at]])).astype(np.int64)
    x, y, chunk = whole.tolist()
    goodput, pool_rate, replica_rate = np.array(
        (best, pools.total_per_s[at], per_replica[at])
    ).tolist()
    threshold, share = s.columns
    columns = zip(threshold, share, goodput, x, y, chunk, pool_rate, replica_rate, strict=True)
    return [
        built(
            {  # every field, in the order declared
                "threshold_tokens": threshold,
                "long_share": share,
                "goodput_rate_per_s": goodput,
                "prefill_tp": pair[0],
                "decode_tp": pair[1],
                "prefill_replicas": x,
                "decode_replicas": y,
                "chunk_tokens": chunk,
                "ttft_p99_ms": None,
                "tpot_p99_ms": None,
                "pool_rate_per_s": pool_rate,
                "per_replica_rate_per_s": replica_rate,
                "settled": False,
                "pooled_ttft_p99_ms": None,
                "local_ttft_p99_ms": None,
                "row": (pools.block, pools.start + t),
                "workers": None,
            }
        )
        for t, (threshold, share, goodput, x, y, chunk, pool_rate, replica_rate) in enumerate(
            columns
        )
        if not goodput <= 0  # (a NaN kept, as before)
    ]
