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
other. Costs use each pool's price. The crossover re-prices both modes of the inventory at each
prompt length of the usual grid (`gain_curve`), every length's pools searched in one call.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from disagg_decider import catalog
from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.limits import rate_limit
from disagg_decider.calc.layouts.search import members_of
from disagg_decider.calc.modes import conditional
from disagg_decider.calc.modes.hetero_cross import CrossSplit, cross_split, network_path
from disagg_decider.calc.physics import parallel
from disagg_decider.calc.physics.kvpath import transfer_times
from disagg_decider.calc.replicas import decode
from disagg_decider.calc.result import Analysis, ColocatedResult, DisaggregatedResult, Limit
from disagg_decider.errors import UserError
from disagg_decider.workload import Resolved, Workload, with_fitted_efficiency

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
    gpu = catalog.get_gpu(w.cluster.gpu)
    # The pool's GPU has its own fitted step constants (those the workload does not set).
    w, fitted_from = with_fitted_efficiency(w, r.model, gpu)
    return replace(r, workload=w, gpu=gpu, efficiency_from=fitted_from or r.efficiency_from)


def analyze_heterogeneous(r: Resolved, analyze_many) -> Analysis:
    """Both modes on the two pools; `analyze_many` searches each pool as its own cluster."""
    rp, rd = pool_resolved(r, "prefill"), pool_resolved(r, "decode")
    a_p, a_d = analyze_many([rp, rd], modes_only=True)
    colo, disagg, per_request, notes = _both_modes(r, rp, rd, a_p, a_d)
    base = a_d.model_dump()
    base.update(per_request)
    feasible = colo.feasible and disagg.feasible
    gain = disagg.goodput_per_gpu / colo.goodput_per_gpu if feasible else None
    # Conditional thresholds are priced on one GPU type (calc/modes/conditional.py): here only the
    # two modes are compared, so the layout is one of them.
    cond = conditional.evaluate(r, colo, disagg, search=False)
    base.update(
        conditional=cond,
        conditional_disagg_threshold_tokens=cond.threshold_tokens,
        colocated=colo,
        disaggregated=disagg,
        gain=gain,
        crossover_prompt_tokens=None,
        limits=_limits(r, colo, disagg, rp, a_p, rd, a_d),
        warnings=[
            *notes,
            *(
                f"{pool.gpu.id} pool alone: {w}"
                for pool, a in ((rp, a_p), (rd, a_d))
                for w in a.warnings
            ),
        ],
    )
    return Analysis.model_validate(base)


def _both_modes(r: Resolved, rp: Resolved, rd: Resolved, a_p: Analysis, a_d: Analysis):
    """The inventory's colocated and disaggregated records from its pools' own analyses, with
    the per-request figures of the cross split (when it wins) and a note (when it does not)."""
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
    return colo, disagg, per_request, notes


def _limits(r, colo, disagg, rp, a_p, rd, a_d) -> list[Limit]:
    """What limits the inventory: for a mode neither pool can serve, each pool's own reason
    (named by pool); for a feasible mode short of GPUs, the rate it needs."""
    out = []
    for mode in (colo, disagg):
        if not mode.feasible:
            for pool, a in ((rp, a_p), (rd, a_d)):
                for lim in a.limits:
                    if lim.mode in (mode.mode, "both") and lim.kind != "rate":
                        detail = f"{pool.gpu.id} pool: {lim.detail}"
                        out.append(Limit(mode=mode.mode, kind=lim.kind, detail=detail))
        elif not mode.fits_cluster:
            out.append(rate_limit(r, mode))
    return out


def gain_curve(r: Resolved, prompts: np.ndarray, analyze_many) -> np.ndarray:
    """Disaggregated over colocated goodput at each prompt p50 (p99/p50 kept), both pools
    re-optimised; inf where only disaggregation meets the SLOs, nan where neither does."""
    t = r.workload.traffic
    ratio = t.prompt_tokens.p99 / t.prompt_tokens.p50
    points = []
    for p50 in np.asarray(prompts, dtype=float).tolist():
        prompt = t.prompt_tokens.model_copy(update={"p50": p50, "p99": p50 * ratio})
        traffic = t.model_copy(update={"prompt_tokens": prompt})
        points.append(replace(r, workload=r.workload.model_copy(update={"traffic": traffic})))
    # Every point's two pools in one call: each pool's prompts are searched together.
    pools = [pool_resolved(x, role) for x in points for role in ROLES]
    analyses = analyze_many(pools, modes_only=True)
    out = []
    for k, x in enumerate(points):
        rp, rd = pools[2 * k], pools[2 * k + 1]
        c, d = _goodputs_per_gpu(x, rp, rd, analyses[2 * k], analyses[2 * k + 1])
        out.append(d / c if c > 0 else (np.inf if d > 0 else np.nan))
    return np.array(out)


def _goodputs_per_gpu(r, rp, rd, a_p: Analysis, a_d: Analysis) -> tuple[float, float]:
    """The colocated and disaggregated goodput per GPU `_both_modes` gives, without sizing the
    records for the workload's rate (the curve needs only these two numbers)."""
    total = r.workload.cluster.gpus
    colocated = sum(c.max_rate_per_s for c in (a_p.colocated, a_d.colocated)) / total
    cross = cross_split(rp, rd)
    homogeneous = a_p.disaggregated.max_rate_per_s + a_d.disaggregated.max_rate_per_s
    if cross is not None and cross.served_per_s >= homogeneous:
        return colocated, cross.served_per_s / total
    return colocated, homogeneous / total


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
    gpus, usd, left, needed = 0, 0.0, rate, 0
    for c, r in sorted(pools, key=lambda p: -p[0].goodput_per_gpu):
        if left <= 0 or c.max_rate_per_s <= 0:
            continue
        per_gpus = c.tp * c.dp
        fit = r.workload.cluster.gpus // per_gpus
        per_replica = c.max_rate_per_s / fit
        want = math.ceil(left / per_replica - 1e-9)
        used = min(want, fit) * per_gpus
        gpus += used
        needed = gpus + (want - min(want, fit)) * per_gpus  # the last pool grows past its GPUs
        usd += used * _price(r)
        left -= c.max_rate_per_s
    served = min(rate, within)
    fits = feasible and rate <= within * (1 + 1e-9)
    record = best.model_dump()
    record.update(
        feasible=feasible,
        fits_cluster=fits,
        gpus=max(gpus, 1),
        gpus_needed_for_rate=(max(gpus, 1) if fits else max(needed, gpus + 1))
        if feasible
        else None,
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
    fits = d.feasible and rate <= within * (1 + 1e-9)
    needed = d.gpus_needed_for_rate
    record.update(
        max_rate_per_s=within,
        goodput_per_gpu=within / total,
        fits_cluster=fits,
        gpus_needed_for_rate=(d.gpus if fits else max(needed or 0, d.gpus + 1))
        if d.feasible
        else None,
    )
    return DisaggregatedResult.model_validate(record)


def _cross_record(x: CrossSplit, rp, rd, total: int, rate: float) -> DisaggregatedResult:
    """Sized for the workload's rate (prefill-pool replicas first, then spare decode-pool GPUs);
    latencies at that load, from the same pooled queues the split was priced with."""
    (ptp, pdp, pep), (dtp, ddp, dep), (stp, sdp, sep) = x.p_layout, x.d_layout, x.spill_layout
    p_gpus, d_gpus, s_gpus = ptp * pdp, dtp * ddp, stp * sdp
    need_d = max(math.ceil(rate / x.d_rate - 1e-9), 1)
    yd = min(need_d, x.d_replicas)
    xp, xs, left = 0, 0, rate
    if x.p_replicas:
        xp = int(x.p_pool.servers_needed(rate, np.array(float(x.p_replicas))))
        xp = min(xp, x.p_replicas)
        left = max(rate - float(x.p_pool.max_rate_per_s(float(xp))), 0.0)
    if left > 0 and x.spill_replicas:
        xs = int(x.spill_pool.servers_needed(left, np.array(float(x.spill_replicas))))
        xs = min(xs, x.spill_replicas)
    p_cap = float(x.p_pool.max_rate_per_s(float(xp))) if xp else 0.0
    s_cap = float(x.spill_pool.max_rate_per_s(float(xs))) if xs else 0.0
    capacity = min(p_cap + s_cap, yd * x.d_rate)
    fits = rate <= capacity * (1 + 1e-9)
    m = members_of([rp])
    lengths = m.lengths(m.prompt_p50, np.arange(1), (-1, 1))
    # The router loads each prefill pool in proportion to what it carries within the target.
    share = min(rate, p_cap + s_cap) / (p_cap + s_cap) if p_cap + s_cap > 0 else 0.0
    ttfts = [
        float(pool.ttft_p99_ms(float(n), cap * share))
        for pool, n, cap in ((x.p_pool, xp, p_cap), (x.spill_pool, xs, s_cap))
        if n
    ]
    d_load = np.array([min(rate / yd, x.d_rate)])
    e_d = engine_for(rd, np.array([[dtp]]), np.array([[ddp]]), np.array([[dep]]))
    tpot = float(decode.tpot_p99_at_rate_ms(e_d, lengths, d_load)[0])
    served = min(rate, capacity)
    usd = xp * p_gpus * _price(rp) + (yd * d_gpus + xs * s_gpus) * _price(rd)
    prefill_label = f"{parallel.label(ptp, pdp, pep)} on {rp.gpu.id}"
    if xs:
        prefill_label += f" (+{xs} x {parallel.label(stp, sdp, sep)} on {rd.gpu.id})"
    gpus = xp * p_gpus + yd * d_gpus + xs * s_gpus
    return DisaggregatedResult(
        feasible=True,
        fits_cluster=fits,
        gpus=gpus,
        gpus_needed_for_rate=gpus if fits else _needed_beyond(x, rate, gpus, d_gpus, p_gpus),
        max_rate_per_s=x.served_per_s,
        goodput_per_gpu=x.served_per_s / total,
        ttft_p99_ms=max(ttfts) if ttfts else None,
        tpot_p99_ms=tpot,
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


def _needed_beyond(x: CrossSplit, rate: float, gpus: int, d_gpus: int, p_gpus: int) -> int:
    """GPUs the rate needs when the inventory falls short: decode replicas for the rate, and
    prefill replicas of the prefill pool's layout beyond what the cluster holds."""
    need_d = max(math.ceil(rate / x.d_rate - 1e-9), 1)
    pool = x.p_pool if x.p_replicas else x.spill_pool
    most = np.array(float(max(x.p_replicas, x.spill_replicas, 1) + 64))
    need_p = int(pool.servers_needed(rate, most))
    return max(need_d * d_gpus + need_p * p_gpus, gpus + 1)


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
