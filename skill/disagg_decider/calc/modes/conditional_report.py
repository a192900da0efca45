"""A conditional layout's candidates checked and reported: `settle` bisects the decode workers'
load down where their reported p99 would overshoot (the walk's measure, each part on its own
p99), `report` prices the chosen candidate's p99 TTFT over all requests and its TPOT at the
workload's rate.

`conditional.py` walks the thresholds and chooses; this module prices the candidates it walks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.threshold_pools import stack_rows
from disagg_decider.calc.layouts.thresholds import Candidate, amended, block_rows
from disagg_decider.calc.modes import overall_ttft
from disagg_decider.calc.modes.conditional_rows import Lifted, Rows
from disagg_decider.calc.modes.conditional_sizing import Priced
from disagg_decider.calc.replicas import colocated_load
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.workload import Resolved


def settle(r: Resolved, c: Candidate) -> Candidate:
    """The candidate with its goodput checked against each part's own reported p99s (the
    walk's measure; `conditional_rows.priced_rows` prices the chosen ones on all requests).

    The colocated search reads capacity off a grid; the decode workers' load is bisected down
    where the reported p99 would overshoot, so a layout that says it meets the SLO does.
    """
    return settle_rows(r, [(r, c)])[0]


def settle_many(r: Resolved, cands: list[Candidate]) -> list[Candidate]:
    """`settle` for many candidates in one vectorised bisection (one row each)."""
    return settle_rows(r, [(r, c) for c in cands]) if cands else []


def settle_rows(first: Resolved, rows: list[tuple[Resolved, Candidate]]) -> list[Candidate]:
    """`settle_many`'s bisection on candidates of workloads sharing `first`'s engine."""
    found = block_rows([c for _, c in rows])
    if found is None:
        local = stack_rows([c.split(r).local for r, c in rows], (-1, 1))
    else:  # the rows the search priced them on
        local = found[0].local_at(found[1])
    column = lambda values: np.array(values, dtype=float).reshape(-1, 1)  # noqa: E731
    ys = np.array([float(c.decode_replicas) for _, c in rows])
    # The decode workers' lines and batch grid: kept with the candidates, for their pricing
    # (`conditional_rows.priced_rows` asks the same rows' workers at other rates).
    columns = (
        engine_for(first, column([c.decode_tp for _, c in rows])),
        local,
        column([r.workload.slo.ttft_ms for r, _ in rows]),
        column([r.workload.slo.tpot_ms for r, _ in rows]),
        column([c.chunk_tokens for _, c in rows]),
        ys.reshape(-1, 1),
    )
    on = overall_ttft.workers_on(*columns)
    rate = np.array([c.per_replica_rate_per_s for _, c in rows])
    within = colocated_load.rate_within_targets(*columns, rate, on=on)
    pool = np.array([c.pool_rate_per_s for _, c in rows])
    goodput = np.maximum(np.minimum(pool, ys * np.asarray(within).reshape(-1)), 0.0)
    return [
        amended(c, goodput_rate_per_s=g, settled=True, workers=(on, i))
        for i, ((_, c), g) in enumerate(zip(rows, goodput.tolist(), strict=True))
    ]


def report(r: Resolved, c: Candidate) -> Candidate:
    """The chosen candidate with its p99 TTFT over all requests (`overall_ttft`) and its TPOT
    at the workload's rate, capped at its goodput: `report_rows` on one row."""
    p99s = DeferredP99()
    reported = report_rows(r, [(r, c)], p99s)
    p99s.solve()
    return reported()[0]


def report_rows(
    first: Resolved,
    rows: list[tuple[Resolved, Candidate]],
    p99s: DeferredP99,
    lifted: Lifted | None = None,
    at: np.ndarray | None = None,
    priced: Priced | None = None,
) -> Callable[[], list[Candidate]]:
    """`report` for chosen candidates of workloads sharing `first`'s engine, one row each:
    one prefill-pool time bisection and one decode-worker evaluation for all of them, both
    added to `p99s`; the returned function gives the candidates once `p99s` is solved.
    `lifted`, where the candidates come from it, gives their rows (the prefill pools, the
    decode workers' lines and batch grid) as priced there: the same bits, not built again.
    `at`, the rows of `lifted` the candidates were priced at before they were sized for the
    rate (`conditional_sizing`, which changes their replica counts only): the pools and the
    layouts' fields are taken from there, the decode workers' lines and grid (which depend
    on the replicas) built anew, or their terms at the rate taken from `priced`, the sizing's
    evaluation of every split it tried at the workload's rate, where each candidate took one
    of those splits."""
    taken = None if lifted is None else lifted.at([c for _, c in rows])
    if taken is not None:
        pool, layouts = taken
    elif lifted is not None and at is not None:
        pool = lifted.pool_at(at)
        layouts = replace(
            lifted.layouts.fields_at(at),
            prefill_servers=np.array([float(c.prefill_replicas) for _, c in rows]),
            decode_servers=np.array([float(c.decode_replicas) for _, c in rows]),
        )
    else:
        parts = Rows.of(first, rows)
        pool, layouts = parts.pool, parts.layouts(rows)
    shares = layouts.long_share
    rate = np.array(
        [min(float(r.workload.traffic.requests_per_second), c.goodput_rate_per_s) for r, c in rows]
    )
    servers = np.array([float(c.prefill_replicas) for _, c in rows])
    long_p99 = p99s.add_pool(pool, servers, rate * shares)
    # The decode workers at the rate, once for their own p99s and the overall one.
    sized = None if priced is None else priced.at_picked()
    rps = np.array([float(r.workload.traffic.requests_per_second) for r, _ in rows])
    at_rate = None
    if sized is not None and np.array_equal(rate, rps):  # the rate the sizing priced
        terms, local, at_rate = sized
    else:
        terms = layouts.worker_terms(rate)
        local = layouts.local_of(rate, terms)
    short_terms, short_ttft_of, tpot99 = terms
    short_p99 = p99s.add(*short_terms)

    def reported() -> list[Candidate]:
        long_ttft, short_ttft = np.ravel(long_p99.value), short_ttft_of(short_p99.value)
        ttft = overall_ttft.overall_p99_ms(layouts, rate, long_ttft, short_ttft, local, at_rate)
        return [
            amended(
                c,
                ttft_p99_ms=float(t),
                pooled_ttft_p99_ms=float(lt),
                local_ttft_p99_ms=float(st),
                tpot_p99_ms=float(tp),
            )
            for (_, c), t, lt, st, tp in zip(rows, ttft, long_ttft, short_ttft, tpot99, strict=True)
        ]

    return reported
