"""The conditional layout's candidates as rows, priced on the overall TTFT target.

Candidates (a threshold, a TP pair, a split of the cluster, a chunk) of workloads sharing an
engine, laid out one per row for `overall_ttft`: each one's parts at its threshold
(`thresholds.split_at`), its prefill pool for the long part and its decode workers' columns.
`priced_rows` prices their goodput on 99% of all requests within the TTFT target; the report
(`conditional_report.report_rows`) reads the overall p99 off the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.pools import ingress_rate_per_s, prefill_pool
from disagg_decider.calc.layouts.threshold_pools import stack_rows
from disagg_decider.calc.layouts.thresholds import Candidate, amended, block_rows
from disagg_decider.calc.modes import overall_ttft, ttft_parts
from disagg_decider.calc.modes.overall_ttft import Layouts
from disagg_decider.calc.physics.kvpath import TransferPath, transfer_path
from disagg_decider.calc.queues.array_helpers import broadcast
from disagg_decider.calc.replicas import decode
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.prefill import Pool
from disagg_decider.workload import Resolved


@dataclass(frozen=True)
class Rows:
    """Candidates of workloads sharing an engine as rows (N, 1): each one's parts at its
    threshold, its prefill pool (one pair per row) and its decode workers' columns."""

    first: Resolved
    shares: np.ndarray  # (N,) requests sent to the prefill pool
    p_tp: np.ndarray
    d_tp: np.ndarray
    ys: np.ndarray  # (N,) decode replicas
    long: Lengths
    local: Lengths
    paths: TransferPath
    pool: Pool
    ingress: np.ndarray | None = None  # (N,) `ingress_per_s` as the search priced it, if it did

    @classmethod
    def of(cls, first: Resolved, rows: list[tuple[Resolved, Candidate]]) -> Rows:
        """The candidates' rows: taken from the search's rows they were priced on where they
        all come from one pass (`threshold_pools.SearchRows`), else built."""
        column = lambda values: np.array(values, dtype=float).reshape(-1, 1)  # noqa: E731
        p_tp, d_tp = column([c.prefill_tp for _, c in rows]), column([c.decode_tp for _, c in rows])
        found = block_rows([c for _, c in rows])
        ingress = None
        if found is not None:
            block, at = found
            long, local = block.long_at(at), block.local_at(at)
            paths, pool = block.paths.take(at, (-1, 1)), block.pool_at(at)
            ingress = block.ingress_at(at)
        else:
            long, local, paths, pool = _built(first, rows, p_tp, d_tp)
        return cls(
            first=first,
            shares=np.array([c.long_share for _, c in rows]),
            p_tp=p_tp,
            d_tp=d_tp,
            ys=np.array([float(c.decode_replicas) for _, c in rows]),
            long=long,
            local=local,
            paths=paths,
            pool=pool,
            ingress=ingress,
        )

    def ingress_per_s(self) -> np.ndarray:
        """(N,) all requests a decode worker's NICs admit: its share of the long requests'
        KV arrives over them. Where the rows come from the search, its bound on them: the
        same arithmetic on the same rows' inputs (element-wise), so the same bits."""
        if self.ingress is not None:
            return self.ingress
        ingress = ingress_rate_per_s(self.first, self.paths, self.long, self.p_tp, self.d_tp)
        return np.ravel(ingress) / self.shares

    def layouts(self, rows: list[tuple[Resolved, Candidate]]) -> Layouts:
        """Both parts as `overall_ttft` reads them; with the decode workers' lines and grid
        the settling built (`Candidate.workers`) where it built them on these very rows, in
        this order (the same inputs, row by row)."""
        n = len(rows)
        k = np.shape(self.pool.nodes_ms)[-1]
        ttft = np.array([r.workload.slo.ttft_ms for r, _ in rows], dtype=float)
        pool = Pool(
            mean_ms=broadcast(np.ravel(self.pool.mean_ms), (n,)),
            scv=broadcast(np.ravel(self.pool.scv), (n,)),
            nodes_ms=broadcast(np.reshape(self.pool.nodes_ms, (-1, k)), (n, k)),
            target_ms=ttft,
        )
        return Layouts(
            pool=pool,
            engine=engine_for(self.first, self.d_tp),
            lengths=self.local,
            chunk=np.array([float(c.chunk_tokens) for _, c in rows]).reshape(-1, 1),
            prefill_servers=np.array([float(c.prefill_replicas) for _, c in rows]),
            decode_servers=self.ys,
            long_share=self.shares,
            ttft_ms=ttft,
            tpot_ms=np.array([r.workload.slo.tpot_ms for r, _ in rows], dtype=float),
            _workers=_settled_workers([c for _, c in rows]),
        )


def _settled_workers(cands: list[Candidate]) -> list:
    """[the settling's decode-worker lines and grid] where it built them on exactly these
    candidates' rows in order (`conditional_report.settle_rows`), else [] (built when asked)."""
    first = cands[0].workers if cands else None
    if first is None:
        return []
    on = first[0]
    for i, c in enumerate(cands):
        if c.workers is None or c.workers[0] is not on or c.workers[1] != i:
            return []
    return [on] if len(cands) == len(on[0].lengths.prompt_p50) else []


def _built(first: Resolved, rows: list, p_tp: np.ndarray, d_tp: np.ndarray) -> tuple:
    """(long, local, paths, pool) of candidates built from their parts, one row each."""
    splits = [c.split(r) for r, c in rows]
    paths = TransferPath.stack([transfer_path(r) for r, _ in rows])
    paths = paths.take(np.arange(len(rows)), (-1, 1))
    local = stack_rows([split.local for split in splits], (-1, 1))
    long = stack_rows([split.long for split in splits], (-1, 1))
    pool = prefill_pool(
        first,
        engine_for(first, p_tp),
        long,
        paths,
        np.array([r.workload.slo.ttft_ms for r, _ in rows], dtype=float),
        p_tp,
        d_tp,
        join_ms=decode.join_step_ms(engine_for(first, d_tp), local),
    )
    return long, local, paths, pool


@dataclass(frozen=True)
class Lifted:
    """Candidates priced by `priced_rows`, with the rows they were priced on: the prefill pools
    as `Rows.of` builds them, the layouts (with the decode workers' lines and batch grid,
    where the lift built them) and each row's KV ingress bound on a decode worker, for the
    sizing (`conditional_sizing`) and the report (`conditional_report.report_rows`) of the chosen
    ones to take rather than build again."""

    candidates: list[Candidate]
    pool: Pool
    layouts: Layouts
    ingress_per_s: np.ndarray  # (N,) all requests a decode worker's NICs admit

    def index(self, chosen: list[Candidate]) -> np.ndarray | None:
        """The rows of `chosen` (these very candidates), or None where one of them was not
        priced here."""
        index = self._row_of
        found = [index.get(id(c)) for c in chosen]
        return None if None in found else np.array(found, dtype=np.int64)

    @cached_property
    def _row_of(self) -> dict[int, int]:
        """Each candidate's row by identity, built when first asked (the sizing, the report
        and the choice each ask)."""
        return {id(c): i for i, c in enumerate(self.candidates)}

    def pool_at(self, rows: np.ndarray) -> Pool:
        return ttft_parts.pool_at_rows(self.pool, len(self.candidates), rows)

    def at(self, chosen: list[Candidate]) -> tuple[Pool, Layouts] | None:
        """The pools and layouts of `chosen` (these very candidates), or None where one of
        them was not priced here.

        Rows taken give the bits `Rows.of` and `Rows.layouts` on the chosen candidates alone
        would: every field is computed element by element from the row's own candidate and
        workload (one pair per row; the pool's moments reduce over its own quantile nodes
        only), as `Layouts.take` says of the decode workers' grid.
        """
        rows = self.index(chosen)
        if rows is None:
            return None
        return self.pool_at(rows), self.layouts.take(rows)


def priced_rows(first: Resolved, rows: list[tuple[Resolved, Candidate]]) -> Lifted:
    """Settled candidates with their goodput on the overall TTFT target (`overall_ttft.lift`):
    the most requests per second at which 1% of all of them, pooled and local together, miss
    it, at least the settled (part by part) goodput; `rows` not empty."""
    parts = Rows.of(first, rows)
    layouts = parts.layouts(rows)
    ingress = parts.ingress_per_s()
    settled = np.array([c.goodput_rate_per_s for _, c in rows])
    cap = parts.ys * np.minimum(layouts.worker_capacity_per_s(), ingress)
    lifted = overall_ttft.lift(layouts, settled, cap)
    priced = [
        amended(c, goodput_rate_per_s=g)
        for (_, c), g in zip(rows, np.maximum(lifted, settled).tolist(), strict=True)
    ]
    return Lifted(priced, parts.pool, layouts, ingress)
