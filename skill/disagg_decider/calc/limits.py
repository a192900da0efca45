"""What limits a workload: memory, context, latency targets or GPUs, in words a user acts on.

`compare` sizes both modes; a mode that serves nothing within the targets, or whose rate needs
more GPUs than the cluster has, gets a `Limit` saying why and what would change the answer:
how many GB a replica needs and which weight format, node size or GPU would hold it; the best
p99 any layout reaches unloaded; how many GPUs the rate needs. The figures come from the same
engine model the search uses (`calc.step`, `calc.prefill`, `calc.decode`, `calc.colocated`),
evaluated for one workload, so they explain the search's answer rather than re-derive it.
"""

from __future__ import annotations

import numpy as np

from disagg_decider import catalog
from disagg_decider.calc import arch, colocated, decode, prefill
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.result import ColocatedResult, DisaggregatedResult, Limit
from disagg_decider.calc.search import (
    TP_CANDIDATES,
    engine_for,
    pairs_allowed,
    pinned_tps,
    transfer_path,
    transfer_times,
)
from disagg_decider.calc.step import Engine
from disagg_decider.workload import Resolved

GB = 1e9


def limits_of(r: Resolved, c: ColocatedResult, d: DisaggregatedResult) -> list[Limit]:
    """Every limit on the workload, most fundamental first: context, memory, SLO, rate.

    Context and memory limits hold for both modes and explain every infeasible mode; an SLO
    limit is given for a mode that is infeasible for no other reason.
    """
    out: list[Limit] = []
    context = _context_limit(r)
    if context is not None:
        out.append(context)
    memory = _memory_limit(r) if context is None else None
    if memory is not None:
        out.append(memory)
    if context is None and memory is None:
        if not c.feasible:
            out.append(_colocated_slo_limit(r))
        if not d.feasible:
            out.append(_disaggregated_slo_limit(r))
    for mode in (c, d):
        if mode.feasible and not mode.fits_cluster:
            out.append(_rate_limit(r, mode))
    return out


def replica_tps(r: Resolved, role: str | None = None) -> list[int]:
    """TP degrees a replica may use here: the one `role` pins, else the usual ones within a
    node and the cluster (TP1 at least)."""
    pin = pinned_tps(r.workload)[role] if role else None
    if pin:
        return [pin]
    c = r.workload.cluster
    top = min(c.gpus, c.gpus_per_node)
    return [tp for tp in TP_CANDIDATES if tp <= top] or [1]


# --- context and memory ------------------------------------------------------------------------


def _context_limit(r: Resolved) -> Limit | None:
    t = r.workload.traffic
    total = t.prompt_tokens.p99 + t.output_tokens.p99
    window = r.model.max_context_tokens
    if total <= window * (1.0 + 1e-9):
        return None
    return Limit(
        mode="both",
        kind="context",
        detail=(
            f"a p99 request ({t.prompt_tokens.p99:,.0f} prompt + {t.output_tokens.p99:,.0f} "
            f"output tokens = {total:,.0f}) exceeds {r.model.id}'s context of {window:,} tokens; "
            f"the engine rejects it: cap prompts at {max(window - t.output_tokens.p99, 0):,.0f} "
            "tokens (truncate or retrieve less) or choose a model with a longer context"
        ),
    )


def _replica_bytes(r: Resolved, weights_dtype: str, gpu: catalog.Gpu, tp: int) -> tuple:
    """(needed, available) bytes of a TP replica: weights, activations and one sequence's KV."""
    w = r.workload
    engine = Engine(r.model, gpu, weights_dtype, w.kv_dtype, tp, w.efficiency)
    lengths = Lengths.of(w)
    one_sequence = float(np.ravel(engine.kv_bytes_held(lengths.decode_context_mean))[0])
    weights = arch.weight_bytes(r.model, weights_dtype)
    reserve = w.efficiency.activation_reserve_gb * GB * tp
    available = gpu.hbm_gb * GB * w.efficiency.hbm_utilization * tp
    return weights + reserve + one_sequence, available


def _fits(r: Resolved, weights_dtype: str, gpu: catalog.Gpu, tp: int) -> bool:
    needed, available = _replica_bytes(r, weights_dtype, gpu, tp)
    return needed <= available


def _memory_limit(r: Resolved) -> Limit | None:
    w = r.workload
    tps = replica_tps(r)
    top = tps[-1]
    if any(_fits(r, w.weights_dtype, r.gpu, tp) for tp in tps):
        return None
    needed, available = _replica_bytes(r, w.weights_dtype, r.gpu, top)
    weights = arch.weight_bytes(r.model, w.weights_dtype)
    options = []
    for dtype in ("fp8", "fp4"):
        smaller = arch.DTYPE_BYTES[dtype] < arch.DTYPE_BYTES[w.weights_dtype]
        if smaller and _fits(r, dtype, r.gpu, top):
            options.append(f"{dtype} weights ({arch.weight_bytes(r.model, dtype) / GB:,.0f} GB)")
    wider = [tp for tp in TP_CANDIDATES if tp > top and _fits(r, w.weights_dtype, r.gpu, tp)]
    if wider:
        options.append(f"TP{wider[0]} replicas (nodes and a cluster of {wider[0]} x {r.gpu.id})")
    bigger = sorted(
        g.id
        for g in {g.id: g for g in catalog.gpus().values()}.values()
        if g.id != r.gpu.id and _fits(r, w.weights_dtype, g, top)
    )
    if bigger:
        options.append(f"a GPU with more memory ({', '.join(bigger)} at TP{top})")
    fix = "; would fit: " + ", ".join(options) if options else "; no catalog option fits it"
    return Limit(
        mode="both",
        kind="memory",
        detail=(
            f"{r.model.id} in {w.weights_dtype} needs {weights / GB:,.0f} GB of weights; with "
            f"activations and one sequence's KV a replica needs {needed / GB:,.0f} GB, and the "
            f"largest replica this cluster allows (TP{top} on {r.gpu.id}) has "
            f"{available / GB:,.0f} GB usable{fix}"
        ),
    )


# --- latency targets -----------------------------------------------------------------------------


def _missed(r: Resolved, mode: str, best_ttft_ms: float, best_tpot_ms: float) -> Limit:
    """An SLO limit naming the targets the best unloaded layout misses, with its p99s."""
    slo = r.workload.slo
    missed = []
    if best_ttft_ms > slo.ttft_ms:
        missed.append(f"p99 TTFT {slo.ttft_ms:g} ms (best {best_ttft_ms:,.1f} ms)")
    if best_tpot_ms > slo.tpot_ms:
        missed.append(f"p99 TPOT {slo.tpot_ms:g} ms (best {best_tpot_ms:,.2f} ms)")
    if missed:
        what = " and ".join(missed)
        detail = f"no {mode} layout meets {what}, even unloaded"
    else:
        detail = (
            f"no {mode} layout meets p99 TTFT {slo.ttft_ms:g} ms and TPOT {slo.tpot_ms:g} ms "
            f"together at any load (unloaded bests {best_ttft_ms:,.1f} ms and "
            f"{best_tpot_ms:,.2f} ms, not from the same layout or not with queueing)"
        )
    return Limit(mode=mode, kind="slo", detail=detail + ": relax the target or use faster GPUs")


def _colocated_slo_limit(r: Resolved) -> Limit:
    """Best p99s over TP and chunk sizes at a batch of one (the lightest load that serves)."""
    w = r.workload
    tp = np.array(replica_tps(r, "colocated"), dtype=float).reshape(-1, 1)
    engine = engine_for(r, tp)
    chunks = np.asarray(w.efficiency.chunk_tokens, dtype=float).reshape(1, -1)
    at = colocated.lines(engine, Lengths.of(w), w.slo.ttft_ms, w.slo.tpot_ms, chunks)
    point = colocated.evaluate(at, 1.0)
    fits = engine.fits().reshape(-1, 1)
    ttft = np.where(fits, point.idle_ttft_ms, np.inf)
    tpot = np.where(fits, point.tpot_p99_ms, np.inf)
    return _missed(r, "colocated", float(ttft.min()), float(tpot.min()))


def _disaggregated_slo_limit(r: Resolved) -> Limit:
    """Best p99s over allowed (prefill TP, decode TP) pairs, unloaded."""
    w = r.workload
    budget = w.cluster.gpus
    if budget < 2:
        return Limit(
            mode="disaggregated",
            kind="slo",
            detail=f"a split needs at least 2 GPUs (one per pool); the cluster has {budget}",
        )
    p_tps = np.array(replica_tps(r, "prefill"), dtype=float)
    d_tps = np.array(replica_tps(r, "decode"), dtype=float)
    ok = pairs_allowed(w.engine, p_tps, d_tps, budget)
    if not ok.any():
        rule = "equal TP" if w.engine == "sglang" else "decode TP >= prefill TP"
        return Limit(
            mode="disaggregated",
            kind="slo",
            detail=(
                f"no prefill/decode TP pair fits: {w.engine} transfers KV only with {rule}, "
                f"both pools within {budget} GPUs (prefill TP {_tps(p_tps)}, decode TP "
                f"{_tps(d_tps)})"
            ),
        )
    lengths = Lengths.of(w)
    p_engine, d_engine = engine_for(r, p_tps), engine_for(r, d_tps)
    p99_prefill = np.ravel(prefill.p99_prefill_ms(p_engine, lengths)) * np.ones_like(p_tps)
    p99_prefill = np.where(p_engine.fits(), p99_prefill, np.inf)
    step = decode.decode_step_ms(d_engine, 1.0, lengths.decode_context_mean)
    step = np.where(d_engine.fits(), np.ravel(step) * np.ones_like(d_tps), np.inf)
    uncached_p99 = w.traffic.prompt_tokens.p99 * (1.0 - w.traffic.prefix_cache_hit_rate)
    _, _, transfer_ms = transfer_times(
        r, transfer_path(r), uncached_p99, p99_prefill[:, None], p_tps[:, None], d_tps[None, :]
    )
    ttft = np.where(ok, p99_prefill[:, None] + transfer_ms + step[None, :], np.inf)
    tpot = np.where(ok.any(axis=0), step, np.inf)
    return _missed(r, "disaggregated", float(ttft.min()), float(tpot.min()))


def _tps(tps: np.ndarray) -> str:
    return "/".join(str(int(t)) for t in tps)


# --- the rate ------------------------------------------------------------------------------------


def _rate_limit(r: Resolved, mode: ColocatedResult | DisaggregatedResult) -> Limit:
    w = r.workload
    rate = w.traffic.requests_per_second
    return Limit(
        mode=mode.mode,
        kind="rate",
        detail=(
            f"{rate:g} req/s needs {mode.gpus_needed_for_rate} GPUs {mode.mode}, the cluster "
            f"has {w.cluster.gpus}: it serves at most {mode.max_rate_per_s:.2f} req/s within "
            "the SLOs"
        ),
    )
