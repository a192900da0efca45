"""The entries a mode is priced at, and the records built from them.

`mode_records` prices each mode at each workload's own rate over *entries*: a workload's own
row of the search with one of its layouts. A block prices every member's best layouts and,
in the same call, the layouts to deploy at the rate where they differ (`rate_layout`), so each
numpy pipeline and bisection runs once for both; every operation is element by element, so
an entry gets the bits it would get priced alone. `PricedMode` holds what a call gives, and
builds records only for the entries a verdict presents. `FirstRound` and `Asked` do the same
for a colocated replica's sizing questions: asked ahead where they are known, read back, and
asked again only of the entries whose answer is not known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from disagg_decider.calc.layouts.search import Members
from disagg_decider.calc.replicas import colocated_load
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.workload import Resolved


@dataclass(frozen=True)
class Own:
    """Entries priced at their workload's own rate: each is a row of the search (`row`) and
    the member it belongs to (`who`). `of` gives one entry per member, in order; `again` adds
    entries for some members (another of their layouts, priced in the same call: every
    operation below is element by element, so an entry gets the bits it gets alone)."""

    members: Members
    row: np.ndarray  # (N,) each entry's row of the search
    who: np.ndarray  # (N,) each entry's member
    rate: np.ndarray  # requests per second
    usd_per_gpu_hour: np.ndarray
    lengths: Lengths  # fields (N, 1)
    # Entries priced only to be presented where they fit the cluster (`rate_layout`): short
    # of GPUs, such an entry is never read, so its short-split load is not priced.
    alternative: np.ndarray  # (N,) bool

    @property
    def first(self) -> Resolved:
        return self.members.first

    @cached_property
    def budget(self) -> np.ndarray:
        return self.members.budget[self.who]

    @cached_property
    def ttft_slo_ms(self) -> np.ndarray:
        return self.members.ttft_ms[self.who]

    @cached_property
    def tpot_slo_ms(self) -> np.ndarray:
        return self.members.tpot_ms[self.who]

    @classmethod
    def of(cls, members: Members, rows: np.ndarray) -> Own:
        everyone = np.arange(len(members.resolved))
        workloads = [r.workload for r in members.resolved]
        return cls(
            members=members,
            row=rows,
            who=everyone,
            rate=np.array([w.traffic.requests_per_second for w in workloads]),
            usd_per_gpu_hour=np.array([w.cost.usd_per_gpu_hour for w in workloads]),
            lengths=members.lengths(members.prompt_p50, everyone, (-1, 1)),
            alternative=np.zeros(len(everyone), dtype=bool),
        )

    def again(self, entries: np.ndarray) -> Own:
        """These entries followed by `entries` of them again, marked `alternative`."""
        if not len(entries):
            return self
        index = np.concatenate([np.arange(len(self.row)), entries])
        return self.take(index, np.concatenate([self.alternative, np.ones(len(entries), bool)]))

    def take(self, index: np.ndarray, alternative: np.ndarray) -> Own:
        """The entries at `index`, marked `alternative` as given (one flag per entry)."""
        return Own(
            members=self.members,
            row=self.row[index],
            who=self.who[index],
            rate=self.rate[index],
            usd_per_gpu_hour=self.usd_per_gpu_hour[index],
            lengths=self.lengths.at(index),  # rows (N, 1) of each field
            alternative=alternative,
        )


@dataclass(frozen=True)
class PricedMode:
    """A mode priced at each entry of an `Own`: its records' columns (NaN stands for None;
    the p99 TTFT left out), their costs, and the p99 TTFT column, a function read once the
    block's `DeferredP99` is solved. `records` builds the records of some entries only."""

    model: type
    columns: dict[str, np.ndarray]
    costs: list[dict]
    ttft: Callable[[], np.ndarray]
    # The split's per-request figures (`per_request`), one entry per `Own` entry.
    figures: dict[str, np.ndarray] | None = None

    @cached_property
    def _listed(self) -> dict[str, list]:
        return {
            n: c.tolist() if type(c) is np.ndarray else np.asarray(c).tolist()
            for n, c in self.columns.items()
        }

    def records(self, entries: Sequence[int], **fields) -> list:
        """The records of `entries`; `fields` (name -> one value per entry) replace columns."""
        listed, out = self._listed, []
        for i, e in enumerate(entries):
            values = {n: None if (x := v[e]) != x else x for n, v in listed.items()}
            for n, v in fields.items():
                values[n] = None if (x := v[i]) != x else x
            out.append(self.model(**values, **self.costs[e]))
        return out


def presented_records(
    priced: PricedMode, best: list, pick: np.ndarray, keep: Sequence[str] = ()
) -> list:
    """Each member's record as the verdict presents it, its p99 TTFT filled in (`priced.ttft`,
    read once solved): its best layout's (`best`, entries 0..W-1, built before) or, where
    `pick` names another entry (`rate_layout.presented`), that one's with the best one's
    `keep` fields. A best record is filled in where it stands: the block built it, and the
    conditional search that read it before never reads p99s."""
    ttft = [None if v != v else v for v in np.ravel(priced.ttft()).tolist()]
    out = []
    for k, (b, e) in enumerate(zip(best, pick.tolist(), strict=True)):
        if e == k:
            b.ttft_p99_ms = ttft[k]
            out.append(b)
        else:
            kept = {name: [getattr(b, name)] for name in keep}
            out.extend(priced.records([e], ttft_p99_ms=[ttft[e]], **kept))
    return out


# --- a colocated replica's questions (`mode_records.colocated_results`) --------------------


def replicas_needed(rate, per_replica):
    """Whole replicas that carry `rate`; 1 when a replica carries nothing (no size fits).
    Divided only where a replica carries something (a `np.errstate` costs more than this)."""
    carries = per_replica > 0
    need = np.ceil(rate / np.where(carries, per_replica, 1.0) - 1e-9)
    return np.where(carries, np.maximum(need, 1.0), 1.0)


@dataclass(frozen=True)
class FirstRound:
    """`colocated_results`' first question, what one replica carries with the whole cluster
    behind the router (rows 0..N-1: `cap` replicas, at most the search's `rate_hi`), asked
    with its likely second: the same with the replicas the rate needs by `rate_hi` (rows N..,
    the entries `extra` where that is fewer). Where the first answer is `rate_hi` itself
    (the search's rate meets the reported targets), the second is asked exactly as the sizing
    loop asks it, so one call answers both; rows are priced on their own and share the
    entries' layouts (so the batch grid), and an answer read back has the bits it gets alone.
    """

    extra: np.ndarray  # (E,) entries asked twice
    servers: np.ndarray  # (N + E,) replicas behind the router, per row
    rate_hi: np.ndarray  # (N + E,)
    cap: np.ndarray  # (N,)

    @classmethod
    def of(cls, rate, budget, tp, cap, rate_hi) -> FirstRound:
        likely = np.where((rate_hi > 0) & (budget // tp >= 1), replicas_needed(rate, rate_hi), cap)
        likely = np.minimum(likely, cap)
        extra = np.flatnonzero(likely != cap)
        servers = np.concatenate([cap, likely[extra]])
        return cls(extra, servers, np.concatenate([rate_hi, rate_hi[extra]]), cap)

    def source(self, servers: np.ndarray, rate_hi: np.ndarray) -> np.ndarray:
        """The row that asked each entry's (servers, rate_hi), -1 where none did."""
        n = len(self.cap)
        same = rate_hi == self.rate_hi[:n]
        source = np.where(same & (servers == self.cap), np.arange(n), -1)
        later = n + np.arange(len(self.extra))
        asked = same[self.extra] & (servers[self.extra] == self.servers[later])
        source[self.extra[asked]] = later[asked]
        return source


def anchors(layouts: dict[str, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Entries that make a call over some entries price them as one over all of them does:
    one with the most DP ranks (the batch grid reaches dp times the cap) and one that runs
    EP, if any (the passes price expert all-to-alls then)."""
    dp, ep = layouts["dp"][t], layouts["ep"][t]
    return np.unique([int(np.argmax(dp)), *np.flatnonzero(ep > 1)[:1].tolist()])


class Asked:
    """`colocated_results`' questions (what a replica carries with so many replicas behind the
    router) and where each entry's latest answer was priced: its call's lines and batch grid
    (the latencies are read off them) and its row there. A question the first round asked
    is read back; the others are asked in one call over the entries that need them and the
    `anchors` (so the batch grid is the one a call over every entry has)."""

    def __init__(self, within_at: Callable, first: FirstRound, anchors: Callable) -> None:
        self.within_at, self.first, self.anchors = within_at, first, anchors
        n = len(first.cap)
        self.calls: list[tuple[Any, np.ndarray]] = []  # (lines and grid, entry of each row)
        self.call, self.row = np.zeros(n, dtype=int), np.arange(n)

    def first_round(self) -> np.ndarray:
        """What one replica carries with the whole cluster behind the router, per entry."""
        first, n = self.first, len(self.first.cap)
        rows = np.concatenate([np.arange(n), first.extra])
        self.answers, on = self.within_at(rows, first.servers, first.rate_hi)
        self.calls.append((on, rows))
        return self.answers[:n]

    def __call__(self, servers: np.ndarray, rate_hi: np.ndarray) -> np.ndarray:
        source = self.first.source(servers, rate_hi)
        found = source >= 0
        carried = self.answers[np.where(found, source, 0)]
        self.call, self.row = np.where(found, 0, self.call), np.where(found, source, self.row)
        missing = (~found).reshape(-1).nonzero()[0]  # `np.flatnonzero`, fewer calls
        if len(missing):
            rows = np.union1d(missing, self.anchors())
            answers, on = self.within_at(rows, servers[rows], rate_hi[rows])
            self.calls.append((on, rows))
            at = np.searchsorted(rows, missing)
            carried[missing] = answers[at]
            self.call[missing], self.row[missing] = len(self.calls) - 1, at
        return carried

    def latencies(self, at: tuple, load: np.ndarray, p99s: DeferredP99):
        """Each entry's p99 TPOT at `load`, and the function that gives its p99 TTFT once
        `p99s` is solved: priced on the rows of each call that holds an entry's answer."""
        tpot, parts = np.empty(len(load)), []
        for k, (on, rows) in enumerate(self.calls):
            mine = (self.call == k).reshape(-1).nonzero()[0]
            if len(mine):
                terms, ttft_of, tpot_rows = colocated_load.latency_terms(*at, load[rows], on=on)
                tpot[mine] = tpot_rows[self.row[mine]]
                parts.append((mine, self.row[mine], ttft_of, p99s.add(*terms)))

        def ttft() -> np.ndarray:
            out = np.empty(len(load))
            for mine, row, ttft_of, pending in parts:
                out[mine] = ttft_of(pending.value)[row]
            return out

        return tpot, ttft
