"""The conditional layout sized for the workload's rate, as the two modes are.

The threshold search prices each candidate on the whole cluster (its goodput per GPU is what
the layouts are compared on), so a chosen candidate holds the cluster's split: X prefill and
Y decode replicas. A team deploys for its own rate. The colocated mode keeps its layout and
takes the replicas the rate needs; the always-disaggregated mode sizes each pool for it. Here
the chosen candidate (its threshold, TP pair and chunk) keeps its shape and takes the fewest
GPUs, x * prefill TP + y * decode TP over x <= X and y <= Y, at which the rate still meets
the targets as the calculator prices the layout (`overall_miss`): at most 1% of all requests
beyond the TTFT target, the decode workers within the TPOT target, the prefill pool below
`queueing.RHO_MAX` of its capacity for its share, and the decode workers within their
capacity on every other limit (memory, chunk, KV ingress), as `overall_miss.lift` bounds them.
Where the rate needs the whole split (or more), the candidate is returned as it is.

Every operation is element-wise per row, so a candidate gets the same pools in a batch of
workloads as alone.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from disagg_decider.calc import overall_miss, queueing
from disagg_decider.calc.conditional_rows import Rows
from disagg_decider.calc.overall_miss import Layouts
from disagg_decider.calc.pools import ingress_rate_per_s
from disagg_decider.calc.search import engine_for
from disagg_decider.calc.thresholds import Candidate
from disagg_decider.workload import Resolved


def sized_for_rate(first: Resolved, rows: list[tuple[Resolved, Candidate]]) -> list[Candidate]:
    """Each chosen candidate (of workloads sharing `first`'s engine) with the fewest replicas
    that carry its workload's rate; ties go to fewer prefill replicas."""
    if not rows:
        return []
    pairs = [_smaller_splits(r, c) for r, c in rows]
    owner = np.concatenate([np.full(len(p), i) for i, p in enumerate(pairs)])
    xs = np.concatenate([p[:, 0] for p in pairs]).astype(float)
    ys = np.concatenate([p[:, 1] for p in pairs]).astype(float)
    if not xs.size:
        return [c for _, c in rows]
    parts = Rows.of(first, rows)
    shape = parts.layouts(rows)
    layouts = _with_servers(shape, owner, xs, ys)
    rates = np.array([float(r.workload.traffic.requests_per_second) for r, _ in rows])[owner]
    carries = _carries(first, parts, layouts, owner, rates)
    out = []
    for i, (_, c) in enumerate(rows):
        mine = np.flatnonzero((owner == i) & carries)
        if not mine.size:
            out.append(c)
            continue
        gpus = xs[mine] * c.prefill_tp + ys[mine] * c.decode_tp
        best = mine[np.lexsort((xs[mine], gpus))[0]]
        out.append(replace(c, prefill_replicas=int(xs[best]), decode_replicas=int(ys[best])))
    return out


def _smaller_splits(r: Resolved, c: Candidate) -> np.ndarray:
    """(x, y) with x <= X, y <= Y and fewer GPUs than the candidate's split, as rows (M, 2):
    empty where the rate needs at least the candidate's goodput (nothing smaller carries it)."""
    if float(r.workload.traffic.requests_per_second) >= c.goodput_rate_per_s:
        return np.empty((0, 2))
    x, y = np.meshgrid(np.arange(1, c.prefill_replicas + 1), np.arange(1, c.decode_replicas + 1))
    x, y = x.ravel(), y.ravel()
    whole = c.prefill_replicas * c.prefill_tp + c.decode_replicas * c.decode_tp
    keep = x * c.prefill_tp + y * c.decode_tp < whole
    return np.column_stack((x[keep], y[keep]))


def _with_servers(shape: Layouts, owner: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> Layouts:
    """The candidates' layouts at each row's owner, with the row's replica counts (the decode
    workers' lines and grid are built anew: they depend on the number of workers)."""
    return replace(shape.fields_at(owner), prefill_servers=xs, decode_servers=ys)


def _carries(
    first: Resolved, parts: Rows, layouts: Layouts, owner: np.ndarray, rate_per_s: np.ndarray
) -> np.ndarray:
    """Whether each row's split carries the rate: `overall_miss.within` and, as `lift` bounds
    a layout, the prefill pool's and the decode workers' capacity on their other limits."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pool_cap = (
            queueing.RHO_MAX
            * layouts.prefill_servers
            / layouts.pool.mean_ms
            * 1e3
            / layouts.long_share
        )
    shape3 = lambda a: np.reshape(a, (-1, 1, 1))  # noqa: E731
    worker_cap = overall_miss.worker_capacity_per_s(
        engine_for(first, shape3(layouts.engine.tp)),
        layouts.lengths.map(shape3),
        shape3(layouts.tpot_ms),
        np.ravel(layouts.chunk),
        shape3(layouts.decode_servers),
    )
    ingress = np.ravel(ingress_rate_per_s(first, parts.paths, parts.long, parts.p_tp, parts.d_tp))
    ingress = (ingress / parts.shares)[owner]
    worker_cap = layouts.decode_servers * np.minimum(np.ravel(worker_cap), ingress)
    room = (rate_per_s <= pool_cap) & (rate_per_s <= worker_cap)
    return room & overall_miss.within(layouts, rate_per_s)
