"""The conditional layout sized for the workload's rate, as the two modes are.

The threshold search prices each candidate on the whole cluster (its goodput per GPU is what
the layouts are compared on), so a chosen candidate holds the cluster's split: X prefill and
Y decode replicas. A team deploys for its own rate. The colocated mode keeps its layout and
takes the replicas the rate needs; the always-disaggregated mode sizes each pool for it. Here
the chosen candidate (its threshold, TP pair and chunk) keeps its shape and takes the fewest
GPUs, x * prefill TP + y * decode TP over x <= X and y <= Y, at which the rate still meets
the targets as the calculator prices the layout (`overall_ttft`): at most 1% of all requests
beyond the TTFT target, the decode workers within the TPOT target, the prefill pool below
`queueing.RHO_MAX` of its capacity for its share, and the decode workers within their
capacity on every other limit (memory, chunk, KV ingress), as `overall_ttft.lift` bounds them.
Where the rate needs the whole split (or more), the candidate is returned as it is.

Every operation is element-wise per row, so a candidate gets the same pools in a batch of
workloads as alone.

On a large cluster the split (X, Y) is large, and X x Y smaller splits too many to price. As
more replicas of either role never carry less, a split that carries the rate bounds the
answer: it has at most that split's GPUs. So where X x Y exceeds `FULL_GRID`, splits along the
candidate's own ratio (s X, s Y) are priced first (`RAY_PROBES` values of s, twice, the
second time between the largest that fails and the smallest that carries), and only splits
within the smallest carrying one's GPUs are then priced: as many as the rate needs, whatever
the cluster. The answer is the one pricing every split gives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from disagg_decider.calc.layouts.thresholds import Candidate, amended
from disagg_decider.calc.modes import overall_ttft, ttft_parts
from disagg_decider.calc.modes.conditional_rows import Lifted, Rows
from disagg_decider.calc.modes.overall_ttft import Layouts
from disagg_decider.calc.queues import queueing
from disagg_decider.workload import Resolved


def sized_for_rate(
    first: Resolved, rows: list[tuple[Resolved, Candidate]], lifted: Lifted | None = None
) -> list[Candidate]:
    """Each chosen candidate (of workloads sharing `first`'s engine) with the fewest replicas
    that carry its workload's rate; ties go to fewer prefill replicas (`sized_rows`)."""
    return sized_rows(first, rows, lifted)[0]


@dataclass(frozen=True)
class Priced:
    """The decode workers of the splits `sized_rows` priced, at the workload's rate: their
    `Layouts.worker_terms` and `Layouts.local_of`, (M,) rows, and the row each sized
    candidate took (-1 where it kept its split). The report of the sized candidates at that
    rate (`conditional_report.report_rows`) takes their rows rather than evaluate them again:
    every value is the row's own (element-wise), so taken rows give the same bits."""

    terms: tuple
    local: ttft_parts.Part
    picked: np.ndarray  # (N,) into the M rows
    pooled: ttft_parts.Part  # the prefill pools at the rate
    miss: np.ndarray  # (M,) the share of all requests beyond the TTFT target at the rate

    def at_picked(self) -> tuple | None:
        """(worker terms, local part, (pooled part, miss at the target)) at each candidate's
        sized split, or None where one kept its split (it was not priced here)."""
        if (self.picked < 0).any():
            return None
        rows = self.picked
        (terms, reported, tpot), n = self.terms, len(self.local.c_wait)
        take = lambda a: ttft_parts.take_rows(a, n, rows)  # noqa: E731

        def reported_at(p99: np.ndarray) -> np.ndarray:
            full = np.zeros(n)  # the other rows' values are never read
            full[rows] = np.ravel(p99)
            return np.asarray(reported(full))[rows]

        taken = (tuple(map(take, terms)), reported_at, take(tpot))
        part = lambda p: ttft_parts.Part(  # noqa: E731
            *(None if v is None else take(v) for v in vars(p).values())
        )
        return taken, part(self.local), (part(self.pooled), take(self.miss))


def sized_rows(
    first: Resolved, rows: list[tuple[Resolved, Candidate]], lifted: Lifted | None = None
) -> tuple[list[Candidate], Priced | None]:
    """`sized_for_rate`, with the decode workers it priced (None where it priced none).

    `lifted`, where the candidates come from it (`conditional_rows.priced_rows`), gives their
    rows as priced there (the layouts' fields, the KV ingress bound): the bits `Rows.of` on
    the candidates alone would give, not built again."""
    if not rows:
        return [], None
    at = None if lifted is None else lifted.index([c for _, c in rows])
    if at is None:
        parts = Rows.of(first, rows)
        shape = parts.layouts(rows)
        ingress = parts.ingress_per_s()
    else:
        shape, ingress = lifted.layouts.fields_at(at), lifted.ingress_per_s[at]
    rates = np.array([float(r.workload.traffic.requests_per_second) for r, _ in rows])
    # Where `shape`'s rows come from: the lift's layouts (with the decode workers' lines and
    # grid) at `at`, else `shape` itself (`_with_servers` takes the workers on from there).
    source = (shape, None) if at is None else (lifted.layouts, at)
    bounds = _ray_bounds(first, rows, ingress, shape, rates, source)
    pairs = [_smaller_splits(r, c, bound) for (r, c), bound in zip(rows, bounds, strict=True)]
    owner = np.arange(len(pairs)).repeat([len(p) for p in pairs])  # each row's candidate
    xs = np.concatenate([p[:, 0] for p in pairs]).astype(float)
    ys = np.concatenate([p[:, 1] for p in pairs]).astype(float)
    if not xs.size:
        return [c for _, c in rows], None
    layouts = _with_servers(shape, owner, xs, ys, source)
    carries, terms, local, at_rate = _carries(first, ingress, layouts, owner, rates[owner])
    out, picked = [], np.zeros(len(rows), dtype=np.int64) - 1
    for i, (_, c) in enumerate(rows):
        mine = ((owner == i) & carries).nonzero()[0]
        if not mine.size:
            out.append(c)
            continue
        gpus = xs[mine] * c.prefill_tp + ys[mine] * c.decode_tp
        best = mine[np.lexsort((xs[mine], gpus))[0]]
        picked[i] = best
        out.append(amended(c, prefill_replicas=int(xs[best]), decode_replicas=int(ys[best])))
    return out, Priced(terms, local, picked, *at_rate)


FULL_GRID = 4096  # splits up to this many (X x Y) are all priced; beyond, bounded first
RAY_PROBES = 16  # splits along the candidate's ratio priced per pass, two passes


def _needs_less(r: Resolved, c: Candidate) -> bool:
    """Whether the rate is below the candidate's goodput (else nothing smaller carries it)."""
    return float(r.workload.traffic.requests_per_second) < c.goodput_rate_per_s


def _whole_gpus(c: Candidate) -> int:
    return c.prefill_replicas * c.prefill_tp + c.decode_replicas * c.decode_tp


def _smaller_splits(r: Resolved, c: Candidate, most_gpus: float) -> np.ndarray:
    """(x, y) with x <= X, y <= Y, fewer GPUs than the candidate's split and at most
    `most_gpus`, as rows (M, 2): empty where the rate needs at least the candidate's goodput
    (nothing smaller carries it)."""
    if not _needs_less(r, c):
        return np.empty((0, 2))
    p_tp, d_tp = c.prefill_tp, c.decode_tp
    x_most = int(min(c.prefill_replicas, (most_gpus - d_tp) // p_tp))
    y_most = int(min(c.decode_replicas, (most_gpus - p_tp) // d_tp))
    # Every (x, y), y major: `np.meshgrid`'s raveled grids, without its layers of calls.
    each_x, each_y = np.arange(1, max(x_most, 0) + 1), np.arange(1, max(y_most, 0) + 1)
    x, y = (each_y[:, None] * 0 + each_x).ravel(), each_y.repeat(each_x.size)
    gpus = x * p_tp + y * d_tp
    keep = (gpus < _whole_gpus(c)) & (gpus <= most_gpus)
    return np.array((x[keep], y[keep])).T  # (M, 2), as `np.column_stack` lays them


def _ray_bounds(
    first: Resolved,
    rows: list,
    ingress: np.ndarray,
    shape: Layouts,
    rates: np.ndarray,
    source: tuple[Layouts, np.ndarray | None] | None = None,
) -> np.ndarray:
    """Per row, the GPUs of the smallest split along the candidate's ratio found to carry the
    rate (the whole split where none is priced or none carries): the answer has no more."""
    bounds = np.array([float(_whole_gpus(c)) for _, c in rows])
    big = [
        i
        for i, (r, c) in enumerate(rows)
        if _needs_less(r, c) and c.prefill_replicas * c.decode_replicas > FULL_GRID
    ]
    if not big:
        return bounds
    lo = np.array([1.0 / max(rows[i][1].prefill_replicas, rows[i][1].decode_replicas) for i in big])
    hi = np.ones(len(big))
    for _ in range(2):
        scale = np.geomspace(lo, hi, RAY_PROBES, axis=1)  # (B, P)
        owner = np.repeat(np.array(big), RAY_PROBES)
        whole_x = np.array([rows[i][1].prefill_replicas for i in big], dtype=float)[:, None]
        whole_y = np.array([rows[i][1].decode_replicas for i in big], dtype=float)[:, None]
        xs, ys = np.ceil(scale * whole_x - 1e-9), np.ceil(scale * whole_y - 1e-9)
        layouts = _with_servers(shape, owner, xs.ravel(), ys.ravel(), source)
        ok = _carries(first, ingress, layouts, owner, rates[owner])[0].reshape(scale.shape)
        first_ok = np.where(ok.any(axis=1), ok.argmax(axis=1), RAY_PROBES - 1)
        at = np.arange(len(big))
        carried = ok[at, first_ok]
        p_tp = np.array([rows[i][1].prefill_tp for i in big])
        d_tp = np.array([rows[i][1].decode_tp for i in big])
        gpus = xs[at, first_ok] * p_tp + ys[at, first_ok] * d_tp
        bounds[big] = np.where(carried, np.minimum(bounds[big], gpus), bounds[big])
        lo = np.where(carried & (first_ok > 0), scale[at, np.maximum(first_ok - 1, 0)], lo)
        hi = np.where(carried, scale[at, first_ok], hi)
    return bounds


def _with_servers(
    shape: Layouts,
    owner: np.ndarray,
    xs: np.ndarray,
    ys: np.ndarray,
    source: tuple[Layouts, np.ndarray | None] | None = None,
) -> Layouts:
    """The candidates' layouts at each row's owner, with the row's replica counts.

    The decode workers' lines and grid depend on their number alone of the two: where every
    row keeps its owner's (most sizings shrink the prefill pool only) and `source` (the
    layouts `shape`'s rows were taken from, at which rows; None: `shape` itself) holds them,
    they are taken from there in one go, the bits built anew would give (each row its own,
    as `Layouts.take` says); else built anew when read."""
    if source is not None and source[0].has_workers():
        whole, at = source
        if np.array_equal(ys, shape.decode_servers[owner]):
            return replace(whole.take(owner if at is None else at[owner]), prefill_servers=xs)
    return replace(shape.fields_at(owner), prefill_servers=xs, decode_servers=ys)


def _carries(
    first: Resolved,
    ingress_per_s: np.ndarray,
    layouts: Layouts,
    owner: np.ndarray,
    rate_per_s: np.ndarray,
) -> tuple[np.ndarray, tuple, ttft_parts.Part, tuple]:
    """Whether each row's split carries the rate: `overall_ttft.within` and, as `lift` bounds
    a layout, the prefill pool's and the decode workers' capacity on their other limits
    (`ingress_per_s`: each candidate's KV ingress bound on a decode worker); with the decode
    workers' terms and local part, the pooled part and the miss at the target, at the rate
    it read (`Priced`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pool_cap = (
            queueing.RHO_MAX
            * layouts.prefill_servers
            / layouts.pool.mean_ms
            * 1e3
            / layouts.long_share
        )
    ingress = ingress_per_s[owner]
    worker_cap = layouts.decode_servers * np.minimum(layouts.worker_capacity_per_s(), ingress)
    room = (rate_per_s <= pool_cap) & (rate_per_s <= worker_cap)
    terms = layouts.worker_terms(rate_per_s)
    local = layouts.local_of(rate_per_s, terms)
    ok, pooled, miss = overall_ttft.within_parts(layouts, rate_per_s, local)
    return room & ok, terms, local, (pooled, miss)
