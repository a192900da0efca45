"""What limits a workload: memory, context, latency targets or GPUs, in words a user acts on.

`compare` sizes both modes; a mode that serves nothing within the targets, or whose rate needs
more GPUs than the cluster has, gets a `Limit` saying why and what would change the answer:
how many GB a replica needs and which weight format, node size or GPU would hold it; the best
p99 any layout reaches unloaded; how many GPUs the rate needs. The figures come from the same
engine model the search uses (`calc.physics.step`, `calc.replicas.prefill`, `calc.replicas.decode`,
`calc.replicas.colocated`), evaluated for one workload, so they explain the search's answer rather
than re-derive it.
"""

from __future__ import annotations

import numpy as np

from disagg_decider import catalog
from disagg_decider.calc.layouts.layout_choices import TP_CANDIDATES, engine_for, free_layouts
from disagg_decider.calc.layouts.search import Members, pairs_allowed
from disagg_decider.calc.physics import model_costs, parallel
from disagg_decider.calc.physics.kvpath import transfer_times
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas import colocated, decode, prefill
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.result import ColocatedResult, DisaggregatedResult, Limit
from disagg_decider.workload import Resolved

GB = 1e9


def limits_for_block(
    members: Members, colo: list[ColocatedResult], disagg: list[DisaggregatedResult]
) -> list[list[Limit]]:
    """Every limit on each member of a search block, most fundamental first.

    Memory and context limits hold for both modes and explain every infeasible mode; memory
    comes first, since no other fix runs while the weights fit no replica (capping prompts for
    the context would still leave nothing that loads). An SLO limit is given for a mode that is
    infeasible for no other reason; a rate limit for a feasible mode the cluster is too small
    for. The unloaded bests are computed for all the members that need them at once, so a
    batch with many infeasible workloads stays fast.
    """
    out: list[list[Limit]] = [[] for _ in members.resolved]
    pairs = list(zip(colo, disagg, strict=True))
    todo = [k for k, (c, d) in enumerate(pairs) if not (c.feasible and d.feasible)]
    both = [k for k in todo if not colo[k].feasible and not disagg[k].feasible]
    if both:
        for k, bound in zip(both, _memory_bound(members, np.array(both)), strict=True):
            memory = _memory_limit(members.resolved[k]) if bound else None
            if memory is not None:
                out[k].append(memory)
    for k in todo:
        context = _context_limit(members.resolved[k])
        if context is not None:
            out[k].append(context)
    todo = [k for k in todo if not out[k]]
    need = [k for k in todo if not colo[k].feasible]
    if need:
        for k, limit in zip(need, _colocated_slo_limits(members, np.array(need)), strict=True):
            out[k].append(limit)
    need = [k for k in todo if not disagg[k].feasible]
    if need:
        for k, limit in zip(need, _disaggregated_slo_limits(members, np.array(need)), strict=True):
            out[k].append(limit)
    for k, (c, d) in enumerate(pairs):
        for mode in (c, d):
            if mode.feasible and not mode.fits_cluster:
                out[k].append(rate_limit(members.resolved[k], mode))
    return out


def replica_tps(r: Resolved) -> list[int]:
    """TP degrees a replica may use without a pin: the usual ones within a node and the
    cluster (TP1 at least)."""
    c = r.workload.cluster
    top = min(c.gpus, c.gpus_per_node)
    return [tp for tp in TP_CANDIDATES if tp <= top] or [1]


# --- context and memory ------------------------------------------------------------------------


def _context_limit(r: Resolved) -> Limit | None:
    """The p99 request beyond the model's window: the workload's, or with `traffic.classes`
    each class's own (the mix's fitted log-normal reaches past its longest class)."""
    t = r.workload.traffic
    window = r.model.max_context_tokens
    if t.classes:
        over = [
            (n, c.prompt_tokens.p99, c.output_tokens.p99)
            for n, c in enumerate(t.classes, start=1)
            if c.prompt_tokens.p99 + c.output_tokens.p99 > window * (1.0 + 1e-9)
        ]
        if not over:
            return None
        n, prompt, output = max(over, key=lambda x: x[1] + x[2])
        who = f"class {n}'s p99 request (traffic.classes[{n - 1}]: "
    else:
        prompt, output = t.prompt_tokens.p99, t.output_tokens.p99
        if prompt + output <= window * (1.0 + 1e-9):
            return None
        who = "a p99 request ("
    return Limit(
        mode="both",
        kind="context",
        detail=(
            f"{who}{prompt:,.0f} prompt + {output:,.0f} output tokens = {prompt + output:,.0f}) "
            f"exceeds {r.model.id}'s context of {window:,} tokens; the engine rejects it: cap "
            f"prompts at {max(window - output, 0):,.0f} tokens (truncate or retrieve less) or "
            "choose a model with a longer context"
        ),
    )


def _replica_bytes(
    r: Resolved, weights_dtype: str, gpu: catalog.Gpu, tp: int, context_tokens
) -> tuple:
    """(needed, available) bytes of a TP replica: weights, activations and one sequence's KV
    (`context_tokens`, the workload's mean decode context)."""
    w = r.workload
    engine = Engine(r.model, gpu, weights_dtype, w.kv_dtype, tp, w.efficiency)
    one_sequence = float(np.ravel(engine.kv_bytes_held(context_tokens))[0])
    weights = model_costs.weight_bytes(r.model, weights_dtype)
    reserve = w.efficiency.activation_reserve_gb * GB * tp
    available = gpu.hbm_gb * GB * w.efficiency.hbm_utilization * tp
    return weights + reserve + one_sequence, available


def _memory_bound(members: Members, idx: np.ndarray) -> np.ndarray:
    """Which members fit weights plus one sequence's KV on no replica the cluster allows
    (TP within a node, and the DP/EP layouts a MoE model may take on it)."""
    lay = parallel.as_arrays(
        sorted(set(parallel.tp_layouts(max(TP_CANDIDATES))) | set(_layouts_of(members)))
    )
    engine = engine_for(members.first, lay["tp"], lay["dp"], lay["ep"])
    lengths = members.lengths(members.prompt_p50[idx], idx, (-1, 1))
    fits = engine.kv_capacity_bytes() >= engine.kv_bytes_held(lengths.decode_context_mean)
    free = free_layouts([members.resolved[k] for k in idx], lay) | (lay["gpus"] == 1)
    return ~(fits & free).any(axis=1)


def _layouts_of(members: Members) -> list[parallel.Layout]:
    lay = members.layouts
    keys = zip(lay["gpus"], lay["tp"], lay["dp"], lay["ep"], strict=True)
    return [parallel.Layout(*(int(v) for v in key)) for key in keys]


def _memory_limit(r: Resolved) -> Limit | None:
    w = r.workload
    tps = replica_tps(r)
    top = tps[-1]
    # One sequence's context: the workload's, whichever replica is tried (two dozen of them).
    context = Lengths.of(w).decode_context_mean

    def fits(weights_dtype: str, gpu: catalog.Gpu, tp: int) -> bool:
        needed, available = _replica_bytes(r, weights_dtype, gpu, tp, context)
        return needed <= available

    if any(fits(w.weights_dtype, r.gpu, tp) for tp in tps):
        return None
    needed, available = _replica_bytes(r, w.weights_dtype, r.gpu, top, context)
    weights = model_costs.weight_bytes(r.model, w.weights_dtype)
    options = []
    for dtype in ("fp8", "fp4"):
        smaller = model_costs.weight_bytes(r.model, dtype) < weights
        if smaller and fits(dtype, r.gpu, top):
            options.append(
                f"{dtype} weights ({model_costs.weight_bytes(r.model, dtype) / GB:,.0f} GB)"
            )
    wider = [tp for tp in TP_CANDIDATES if tp > top and fits(w.weights_dtype, r.gpu, tp)]
    if wider:
        options.append(f"TP{wider[0]} replicas (nodes and a cluster of {wider[0]} x {r.gpu.id})")
    bigger = sorted(
        g.id
        for g in {g.id: g for g in catalog.gpus().values()}.values()
        if g.id != r.gpu.id and fits(w.weights_dtype, g, top)
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
        detail = (
            f"no {mode} layout meets {what}, even unloaded: relax the target or use faster GPUs"
        )
    else:  # each target is met idle: the load (queueing, chunks beside decode steps) breaks them
        rate = r.workload.traffic.requests_per_second
        detail = (
            f"no {mode} layout meets p99 TTFT {slo.ttft_ms:g} ms and TPOT {slo.tpot_ms:g} ms "
            f"together at {rate:g} req/s on {r.workload.cluster.gpus} GPUs (unloaded bests "
            f"{best_ttft_ms:,.1f} ms and {best_tpot_ms:,.2f} ms, not from the same layout or "
            "only at a lighter load per replica): relax a target, spread the rate over more "
            "GPUs or use faster GPUs"
        )
    return Limit(mode=mode, kind="slo", detail=detail)


def _rows(members: Members, idx: np.ndarray, shape: tuple[int, ...]) -> Lengths:
    return members.lengths(members.prompt_p50[idx], idx, shape)


def _colocated_slo_limits(members: Members, idx: np.ndarray) -> list[Limit]:
    """Best p99s over allowed TP and chunk sizes at a batch of one (the lightest load)."""
    first = members.first
    lay = members.layouts
    engine = engine_for(first, *(lay[k].reshape(1, -1, 1) for k in ("tp", "dp", "ep")))
    chunks = np.asarray(first.workload.efficiency.chunk_tokens, dtype=float).reshape(1, 1, -1)
    at = colocated.lines(
        engine,
        _rows(members, idx, (-1, 1, 1)),
        members.ttft_ms[idx].reshape(-1, 1, 1),
        members.tpot_ms[idx].reshape(-1, 1, 1),
        chunks,
    )
    point = colocated.evaluate(at, 1.0, with_headroom=False)  # idle TTFT and TPOT only
    allowed = members.allowed["colocated"][idx]
    ok = (allowed & engine.fits().reshape(1, -1))[:, :, None]
    # Unloaded: no queue and no prefill chunk riding along (the p99 TPOT at a batch of one
    # is a loaded replica's: one sequence always decoding, prompts arriving to match).
    ttft = np.where(ok, point.idle_ttft_ms, np.inf).min(axis=(1, 2))
    tpot = np.where(ok, point.idle_tpot_ms, np.inf).min(axis=(1, 2))
    out = []
    for n, k in enumerate(idx.tolist()):
        r = members.resolved[k]
        if not ok[n].any():
            out.append(_no_room(r, "colocated", _labels(lay, allowed[n])))
        else:
            out.append(_missed(r, "colocated", float(ttft[n]), float(tpot[n])))
    return out


def _disaggregated_slo_limits(members: Members, idx: np.ndarray) -> list[Limit]:
    """Best p99s over allowed (prefill TP, decode TP) pairs, unloaded."""
    first, lay = members.first, members.layouts
    tps, gpus = lay["tp"], lay["gpus"]  # attention TP (KV senders), GPUs per replica
    engine = engine_for(first, *(lay[k].reshape(1, -1) for k in ("tp", "dp", "ep")))
    lengths = _rows(members, idx, (-1, 1))
    fits = engine.fits().reshape(1, -1)
    p_allowed, d_allowed = members.allowed["prefill"][idx], members.allowed["decode"][idx]
    budget = members.budget[idx]
    pairs = pairs_allowed(first.workload.engine, tps, tps, budget[:, None, None], gpus, gpus)
    pairs = pairs & p_allowed[:, :, None] & d_allowed[:, None, :]
    ok = pairs & (fits[:, :, None] & fits[:, None, :])
    p99_prefill = prefill.p99_prefill_ms(engine, lengths)
    step = decode.decode_step_ms(engine, 1.0, lengths.decode_context_mean)
    u99 = (lengths.prompt_p99 * lengths.uncached_share).reshape(-1, 1, 1)
    path = members.path.take(idx, (-1, 1, 1))
    _, _, t99 = transfer_times(
        first, path, u99, p99_prefill[:, :, None], tps[None, :, None], tps[None, None, :]
    )
    ttft = np.where(ok, p99_prefill[:, :, None] + t99 + step[:, None, :], np.inf).min(axis=(1, 2))
    tpot = np.where(ok.any(axis=1), step, np.inf).min(axis=1)
    out = []
    for n, k in enumerate(idx.tolist()):
        r = members.resolved[k]
        if budget[n] < 2:
            detail = f"a split needs at least 2 GPUs (one per pool); the cluster has {budget[n]:g}"
            out.append(Limit(mode="disaggregated", kind="slo", detail=detail))
        elif not pairs[n].any():
            out.append(_no_pair(r, _labels(lay, p_allowed[n]), _labels(lay, d_allowed[n])))
        elif not ok[n].any():
            role = "prefill" if not (p_allowed[n] & fits[0]).any() else "decode"
            allowed = p_allowed[n] if role == "prefill" else d_allowed[n]
            out.append(_no_room(r, "disaggregated", _labels(lay, allowed), role))
        else:
            out.append(_missed(r, "disaggregated", float(ttft[n]), float(tpot[n])))
    return out


def _no_pair(r: Resolved, p_tps: list[str], d_tps: list[str]) -> Limit:
    w = r.workload
    rule = "equal TP" if w.engine == "sglang" else "decode TP >= prefill TP"
    return Limit(
        mode="disaggregated",
        kind="slo",
        detail=(
            f"no prefill/decode TP pair fits: {w.engine} transfers KV only with {rule}, both "
            f"pools within {w.cluster.gpus} GPUs (prefill {_tps(p_tps)}, decode "
            f"{_tps(d_tps)})"
        ),
    )


def _no_room(r: Resolved, mode: str, tps: list[str], role: str | None = None) -> Limit:
    """The layouts a role may use (a pin) leave no HBM for KV, though wider ones would."""
    w = r.workload
    who = f"{role} " if role else ""
    return Limit(
        mode=mode,  # type: ignore[arg-type]
        kind="memory",
        detail=(
            f"{who}{_tps(tps)} (parallelism:) leaves no room for KV: {r.model.id} in "
            f"{w.weights_dtype} needs "
            f"{model_costs.weight_bytes(r.model, w.weights_dtype) / GB:,.0f} GB "
            f"of weights on {r.gpu.id}; pin a wider TP or leave it to the calculator"
        ),
    )


def _tps(labels: list[str]) -> str:
    """Layouts as "TP1/TP2/TP4" (TP only) or "TP8, DP8/EP8"."""
    if all(x.startswith("TP") and x[2:].isdigit() for x in labels):
        return "TP " + "/".join(x[2:] for x in labels)
    return ", ".join(labels)


def _labels(lay: dict[str, np.ndarray], mask: np.ndarray) -> list[str]:
    """The labels of the layouts `mask` selects."""
    cols = (lay[k][mask].astype(int).tolist() for k in ("tp", "dp", "ep"))
    return [parallel.label(*v) for v in zip(*cols, strict=True)]


# --- the rate ------------------------------------------------------------------------------------


def rate_limit(r: Resolved, mode: ColocatedResult | DisaggregatedResult) -> Limit:
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
