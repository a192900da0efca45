"""The entries a mode is priced at, and the records built from them.

`mode_records` prices each mode at each workload's own rate over *entries*: a workload's own
row of the search with one of its layouts. A block prices every member's best layouts and,
in the same call, the layouts to deploy at the rate where they differ (`rate_layout`), so each
numpy pipeline and bisection runs once for both; every operation is element by element, so
an entry gets the bits it would get priced alone. `Priced` holds what a call gives, and
builds records only for the entries a verdict presents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from disagg_decider.calc.layouts.search import Members
from disagg_decider.calc.replicas.lengths import Lengths
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
        return Own(
            members=self.members,
            row=self.row[index],
            who=self.who[index],
            rate=self.rate[index],
            usd_per_gpu_hour=self.usd_per_gpu_hour[index],
            lengths=self.lengths.map(lambda a: np.take(a, index, axis=0)),
            alternative=np.concatenate([self.alternative, np.ones(len(entries), dtype=bool)]),
        )


@dataclass(frozen=True)
class Priced:
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
        listed = {**self._listed, **fields}
        out = []
        for i, e in enumerate(entries):
            values = {n: (v[i] if n in fields else v[e]) for n, v in listed.items()}
            values = {n: None if v != v else v for n, v in values.items()}
            out.append(self.model(**values, **self.costs[e]))
        return out


def presented_records(
    priced: Priced, best: list, pick: np.ndarray, keep: Sequence[str] = ()
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
