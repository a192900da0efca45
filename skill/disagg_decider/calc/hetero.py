"""Heterogeneous inventories: one GPU type for prefill, another for decode.

`cluster.prefill_gpu` / `cluster.decode_gpu` give two pools on separate nodes. Disaggregation
can then put prompts on the compute-dense pool and decoding on the memory-rich one, with each
request's KV crossing the network between their nodes (Splitwise's heterogeneous pools,
AIConfigurator's `--decode-system`). The comparators use what the same inventory could run
otherwise:

- colocated: each pool serves its own colocated replicas, and their rates add;
- disaggregated: the best of the cross split (prefill on the prefill pool, decode on the decode
  pool) and each pool running its own homogeneous split, rates added. A heterogeneous cluster
  therefore never scores below the better homogeneous use of its GPUs.

Each pool is searched as a homogeneous cluster of its own (`compare.analyze_many`); the cross
split reuses the search's pieces with the prefill engine on one GPU and the decode engine on the
other. Costs use each pool's price. The crossover re-decides the whole inventory at each prompt
length of the usual grid (`gain_curve`), one workload at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from disagg_decider import catalog
from disagg_decider.calc import decode, parallel, prefill, transfer
from disagg_decider.calc.result import Analysis, ColocatedResult, DisaggregatedResult
from disagg_decider.calc.search import (
    TransferPath,
    engine_for,
    members_of,
    pairs_allowed,
    transfer_times,
)
from disagg_decider.errors import UserError
from disagg_decider.workload import Resolved, Workload

HOURS_PER_YEAR = 8760.0
ROLES = ("prefill", "decode")


def pool_workload(w: Workload, role: str) -> Workload:
    """The workload as if its cluster were only this role's pool (homogeneous)."""
    c, cost = w.cluster, w.cost
    gpu = getattr(c, f"{role}_gpu") or c.gpu
    gpus = getattr(c, f"{role}_gpus")
    price = getattr(cost, f"{role}_usd_per_gpu_hour") or cost.usd_per_gpu_hour
    cluster = c.model_copy(
        update={
            "gpu": gpu,
            "gpus": gpus,
            "prefill_gpu": None,
            "prefill_gpus": None,
            "decode_gpu": None,
            "decode_gpus": None,
        }
    )
    pool_cost = cost.model_copy(
        update={
            "usd_per_gpu_hour": price,
            "prefill_usd_per_gpu_hour": None,
            "decode_usd_per_gpu_hour": None,
        }
    )
    return w.model_copy(update={"cluster": cluster, "cost": pool_cost})


def pool_resolved(r: Resolved, role: str) -> Resolved:
    """`r` with its cluster cut down to one pool, its GPU looked up."""
    if r.link.kind == "scale-up":
        raise UserError(
            "cluster.network: heterogeneous pools sit on different nodes; name the network "
            "between them (for example ib-ndr-400), not a scale-up link"
        )
    w = pool_workload(r.workload, role)
    return replace(r, workload=w, gpu=catalog.get_gpu(w.cluster.gpu))


def network_path(r: Resolved) -> TransferPath:
    """KV between the pools always crosses the cluster network."""
    link = r.link
    return TransferPath("network", r.link_gbps, link.efficiency, link.latency_us / 1e3, link.rdma)


@dataclass(frozen=True)
class CrossSplit:
    """Prefill on the prefill pool (and on decode-pool GPUs decode leaves free), decode on the
    decode pool: the best layouts and replica counts."""

    served_per_s: float  # within both pools
    p_layout: tuple[int, int, int]  # (tp, dp, ep) on the prefill pool
    d_layout: tuple[int, int, int]
    spill_layout: tuple[int, int, int]  # prefill layout on spare decode-pool GPUs
    p_rate: float  # per replica
    d_rate: float
    spill_rate: float
    p_replicas: int  # within the cluster
    d_replicas: int
    spill_replicas: int
    d_batch: float
    transfer_p99_ms: float


def _prefill_rates(r: Resolved, m, lengths, ttft_ms, path, ld, join):
    """Prefill replica rate per (prefill layout on r's GPU, decode layout): (Tp, Td)."""
    lp = m.layouts
    axis = (1, -1, 1, 1)
    e_p = engine_for(r, *(lp[k].reshape(axis) for k in ("tp", "dp", "ep")))
    mean_s, second_s = (v[0, :, 0, 0] for v in prefill.service_moments_ms(e_p, lengths))
    p99_s = prefill.p99_prefill_ms(e_p, lengths)[0, :, 0, 0]
    u99 = float(np.ravel(lengths.prompt_p99 * lengths.uncached_share)[0])
    _, _, t99 = transfer_times(r, path, u99, p99_s[:, None], lp["tp"][:, None], ld["tp"][None, :])
    budget = ttft_ms - t99 - join[None, :]
    rate = prefill.replica_rate_per_s(mean_s[:, None], second_s[:, None], p99_s[:, None], budget)
    ok = m.allowed["prefill"][0][:, None] & pairs_allowed(
        r.workload.engine, lp["tp"], ld["tp"], np.inf
    )
    return np.where(ok, rate, 0.0), t99


def cross_split(rp: Resolved, rd: Resolved) -> CrossSplit | None:
    """Every allowed (prefill layout on rp's GPU, decode layout on rd's GPU, prefill layout for
    spare rd GPUs) and decode replica count, as `search` prices the disaggregated side, each
    pool within its own GPU count."""
    mp, md = members_of([rp]), members_of([rd])
    rows = mp.rows([mp.prompt_p50[:1]])
    lengths = rows.lengths
    ld = md.layouts
    axis = (1, -1, 1, 1)
    e_d = engine_for(rd, *(ld[k].reshape(axis) for k in ("tp", "dp", "ep")))
    path = network_path(rp)
    ingress = transfer.effective_gb_per_s(path.gbps_per_gpu, path.efficiency, ld["gpus"])
    d_point = decode.replica_capacity(e_d, lengths, rows.tpot_ms, ingress.reshape(axis))
    d_rate = np.where(md.allowed["decode"][0], d_point.rate_per_s[0, :, 0, 0], 0.0)
    join = decode.decode_step_ms(e_d, 1.0, lengths.decode_context_mean)[0, :, 0, 0]
    ttft = float(np.ravel(rows.ttft_ms)[0])
    p_rate, t99 = _prefill_rates(rp, mp, lengths, ttft, path, ld, join)  # (Tp, Td)
    s_rate, _ = _prefill_rates(rd, members_of([rd]), lengths, ttft, path, ld, join)  # (Ts, Td)
    n_p, n_d = rp.workload.cluster.gpus, rd.workload.cluster.gpus
    x = n_p // mp.layouts["gpus"]  # (Tp,)
    y = np.arange(1, n_d + 1)  # decode replicas tried
    # Axes (Tp, Td, Ts, Y): spare decode-pool GPUs run prefill replicas of layout s.
    free = n_d - y[None, None, None, :] * ld["gpus"][None, :, None, None]
    spill = np.broadcast_to(
        np.maximum(free, 0) // md.layouts["gpus"][None, None, :, None],
        (len(x), len(ld["gpus"]), len(md.layouts["gpus"]), len(y)),
    )
    prefill_cap = (x * p_rate.T).T[:, :, None, None] + spill * s_rate.T[None, :, :, None]
    decode_cap = y[None, None, None, :] * d_rate[None, :, None, None]
    served = np.where(free >= 0, np.minimum(prefill_cap, decode_cap), -1.0)
    best = np.unravel_index(int(served.argmax()), served.shape)
    i, j, k, n = (int(v) for v in best)
    if served[best] <= 0:
        return None

    def layout(lay, index) -> tuple[int, int, int]:
        return (int(lay["tp"][index]), int(lay["dp"][index]), int(lay["ep"][index]))

    return CrossSplit(
        served_per_s=float(served[best]),
        p_layout=layout(mp.layouts, i),
        d_layout=layout(ld, j),
        spill_layout=layout(md.layouts, k),
        p_rate=float(p_rate[i, j]),
        d_rate=float(d_rate[j]),
        spill_rate=float(s_rate[k, j]),
        p_replicas=int(x[i]) if p_rate[i, j] > 0 else 0,
        d_replicas=int(y[n]),
        spill_replicas=int(spill[i, j, k, n]) if s_rate[k, j] > 0 else 0,
        d_batch=float(d_point.batch[0, j, 0, 0]),
        transfer_p99_ms=float(t99[i, j]),
    )


def analyze_heterogeneous(r: Resolved, analyze_many) -> Analysis:
    """Both modes on the two pools; `analyze_many` searches each pool as its own cluster."""
    rp, rd = pool_resolved(r, "prefill"), pool_resolved(r, "decode")
    a_p, a_d = analyze_many([rp, rd])
    total = r.workload.cluster.gpus
    rate = r.workload.traffic.requests_per_second
    colo = _colocated(a_p, a_d, rp, rd, total, rate)
    cross = cross_split(rp, rd)
    homogeneous = a_p.disaggregated.max_rate_per_s + a_d.disaggregated.max_rate_per_s
    notes = []
    if cross is not None and cross.served_per_s >= homogeneous:
        disagg = _cross_record(cross, rp, rd, total, rate)
        per_request = _cross_per_request(cross, rp, a_p, a_d)
    else:
        disagg = _combined(a_d.disaggregated, homogeneous, total, rate)
        per_request = {}
        notes.append(
            f"heterogeneous pools: each pool runs its own prefill/decode split "
            f"({rp.gpu.id}: {a_p.disaggregated.max_rate_per_s:.2f} req/s, {rd.gpu.id}: "
            f"{a_d.disaggregated.max_rate_per_s:.2f} req/s) beats prefill on {rp.gpu.id} and "
            f"decode on {rd.gpu.id}; the layout shown is the {rd.gpu.id} pool's"
        )
    base = a_d.model_dump()
    base.update(per_request)
    gain = disagg.goodput_per_gpu / colo.goodput_per_gpu if colo.goodput_per_gpu > 0 else None
    base.update(
        colocated=colo,
        disaggregated=disagg,
        gain=gain,
        crossover_prompt_tokens=None,
        warnings=[
            *notes,
            *(
                f"{res.mode}: {rate:g} req/s needs more than the cluster's {total} GPUs "
                f"(at most {res.max_rate_per_s:.2f} req/s within the SLO)"
                for res in (colo, disagg)
                if res.feasible and not res.fits_cluster
            ),
            *(
                f"{pool.gpu.id} pool alone: {w}"
                for pool, a in ((rp, a_p), (rd, a_d))
                for w in a.warnings
                if "needs more than" not in w
            ),
        ],
    )
    return Analysis.model_validate(base)


def gain_curve(r: Resolved, prompts: np.ndarray, analyze_many) -> np.ndarray:
    """Disaggregated over colocated goodput at each prompt p50 (p99/p50 kept), both pools
    re-optimised; inf where only disaggregation meets the SLOs, nan where neither does."""
    t = r.workload.traffic
    ratio = t.prompt_tokens.p99 / t.prompt_tokens.p50
    out = []
    for p50 in np.asarray(prompts, dtype=float).tolist():
        prompt = t.prompt_tokens.model_copy(update={"p50": p50, "p99": p50 * ratio})
        traffic = t.model_copy(update={"prompt_tokens": prompt})
        w = r.workload.model_copy(update={"traffic": traffic})
        a = analyze_heterogeneous(replace(r, workload=w), analyze_many)
        d, c = a.disaggregated.goodput_per_gpu, a.colocated.goodput_per_gpu
        out.append(d / c if c > 0 else (np.inf if d > 0 else np.nan))
    return np.array(out)


def _price(r: Resolved) -> float:
    return r.workload.cost.usd_per_gpu_hour


def _cost(usd_per_hour: float, served_per_s: float, tokens_per_request: float) -> dict:
    tokens_per_hour = served_per_s * tokens_per_request * 3600.0
    per_million = usd_per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else None
    return {
        "cost_per_million_tokens_usd": per_million,
        "cost_per_year_usd": usd_per_hour * HOURS_PER_YEAR,
    }


def _colocated(a_p, a_d, rp, rd, total: int, rate: float) -> ColocatedResult:
    """Colocated replicas on both pools, the faster per GPU filled first."""
    pools = [(a_p.colocated, rp), (a_d.colocated, rd)]
    within = sum(c.max_rate_per_s for c, _ in pools)
    feasible = any(c.feasible for c, _ in pools)
    best, best_r = max(pools, key=lambda p: p[0].goodput_per_gpu)
    # Size for the rate: the better pool first, the other for what is left.
    gpus, usd, left = 0, 0.0, rate
    for c, r in sorted(pools, key=lambda p: -p[0].goodput_per_gpu):
        if left <= 0 or c.max_rate_per_s <= 0:
            continue
        per_gpus = c.tp * c.dp
        fit = r.workload.cluster.gpus // per_gpus
        per_replica = c.max_rate_per_s / fit
        used = min(math.ceil(left / per_replica - 1e-9), fit) * per_gpus
        gpus += used
        usd += used * _price(r)
        left -= c.max_rate_per_s
    served = min(rate, within)
    record = best.model_dump()
    record.update(
        feasible=feasible,
        fits_cluster=feasible and rate <= within,
        gpus=max(gpus, 1),
        max_rate_per_s=within,
        goodput_per_gpu=within / total,
        **_cost(usd, served, _mean_tokens(best_r)),
    )
    return ColocatedResult.model_validate(record)


def _mean_tokens(r: Resolved) -> float:
    m = members_of([r])
    lengths = m.lengths(m.prompt_p50, np.arange(1), (-1,))
    return float(lengths.prompt_mean[0] + lengths.output_mean[0])


def _combined(d: DisaggregatedResult, within: float, total: int, rate: float):
    record = d.model_dump()
    record.update(
        max_rate_per_s=within,
        goodput_per_gpu=within / total,
        fits_cluster=d.feasible and rate <= within,
    )
    return DisaggregatedResult.model_validate(record)


def _cross_record(x: CrossSplit, rp, rd, total: int, rate: float) -> DisaggregatedResult:
    """Sized for the workload's rate (prefill-pool replicas first); latencies at that load."""
    (ptp, pdp, pep), (dtp, ddp, dep), (stp, sdp, sep) = x.p_layout, x.d_layout, x.spill_layout
    p_gpus, d_gpus, s_gpus = ptp * pdp, dtp * ddp, stp * sdp
    need_d = max(math.ceil(rate / x.d_rate - 1e-9), 1)
    yd = min(need_d, x.d_replicas)
    xp = min(max(math.ceil(rate / x.p_rate - 1e-9), 1), x.p_replicas) if x.p_rate > 0 else 0
    left = max(rate - xp * x.p_rate, 0.0)
    xs = min(math.ceil(left / x.spill_rate - 1e-9), x.spill_replicas) if x.spill_rate > 0 else 0
    capacity = min(xp * x.p_rate + xs * x.spill_rate, yd * x.d_rate)
    fits = rate <= capacity * (1 + 1e-9)
    m = members_of([rp])
    lengths = m.lengths(m.prompt_p50, np.arange(1), (-1, 1))
    main_rate = x.p_rate if xp else x.spill_rate
    p_load = np.array([min(rate / max(xp + xs, 1), main_rate)])
    d_load = np.array([min(rate / yd, x.d_rate)])
    main = (ptp, pdp, pep) if xp else (stp, sdp, sep)
    e_p = engine_for(rp if xp else rd, *(np.array([[v]]) for v in main))
    e_d = engine_for(rd, np.array([[dtp]]), np.array([[ddp]]), np.array([[dep]]))
    step = float(decode.step_at_rate_ms(e_d, lengths, d_load)[0])
    ttft = float(prefill.ttft_p99_ms(e_p, lengths, p_load)[0]) + x.transfer_p99_ms + step
    served = min(rate, capacity)
    usd = xp * p_gpus * _price(rp) + (yd * d_gpus + xs * s_gpus) * _price(rd)
    prefill_label = f"{parallel.label(ptp, pdp, pep)} on {rp.gpu.id}"
    if x.spill_replicas:
        prefill_label += f" (+{xs} x {parallel.label(stp, sdp, sep)} on {rd.gpu.id})"
    return DisaggregatedResult(
        feasible=True,
        fits_cluster=fits,
        gpus=xp * p_gpus + yd * d_gpus + xs * s_gpus,
        max_rate_per_s=x.served_per_s,
        goodput_per_gpu=x.served_per_s / total,
        ttft_p99_ms=ttft,
        tpot_p99_ms=step,
        prefill_tp=ptp,
        decode_tp=dtp,
        prefill_dp=pdp,
        decode_dp=ddp,
        prefill_ep=pep,
        decode_ep=dep,
        prefill_layout=prefill_label,
        decode_layout=f"{parallel.label(dtp, ddp, dep)} on {rd.gpu.id}",
        prefill_replicas=xp,
        decode_replicas=yd,
        prefill_gpus=xp * p_gpus + xs * s_gpus,
        decode_gpus=yd * d_gpus,
        max_batch=math.floor(x.d_batch + 1e-6),
        transfer_ms_p99=x.transfer_p99_ms,
        **_cost(usd, served, _mean_tokens(rp)),
    )


def _cross_per_request(x: CrossSplit, rp: Resolved, a_p: Analysis, a_d: Analysis) -> dict:
    """Prefill on the prefill pool's GPU; the KV at the p50 prompt over the network between
    the pools."""
    path = network_path(rp)
    u50 = a_d.effective_prompt_tokens
    p_tp, d_tp = x.p_layout[0], x.d_layout[0]
    serial, layered, exposed = transfer_times(rp, path, u50, a_p.prefill_ms, p_tp, d_tp)
    return {
        "prefill_ms": a_p.prefill_ms,
        "kv_transfer_ms": exposed,
        "kv_transfer_serialized_ms": serial,
        "kv_transfer_layerwise_ms": layered,
        "kv_transfer_path": "network",
        "kv_transfer_gb_per_s": path.gb_per_s(p_tp, d_tp),
        "kv_transfer_rdma": path.rdma,
    }
