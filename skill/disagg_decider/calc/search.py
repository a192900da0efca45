"""The search: every serving configuration of both modes, evaluated at once.

Arrays carry the axes (prompt, TP, chunk, batch). The colocated comparator tries every TP
degree, chunk budget and decode batch; the disaggregated side tries every prefill TP, decode
TP and whole-replica split of the GPU budget that the engine allows. `search` returns, per
prompt length, the best of each mode; `compare.analyze` turns index 0 (the workload's own
prompt) into the verdict's numbers and the rest into the crossover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc import colocated, decode, kv, prefill, transfer
from disagg_decider.calc.frontier import pick
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.step import Engine
from disagg_decider.catalog import get_link
from disagg_decider.workload import Resolved

TP_CANDIDATES = (1, 2, 4, 8)


# --- engines and TP choices ------------------------------------------------------------------


def engine_for(r: Resolved, tp) -> Engine:
    w = r.workload
    return Engine(r.model, r.gpu, w.weights_dtype, w.kv_dtype, tp, w.efficiency)


def tp_options(r: Resolved, warnings: list[str]) -> dict[str, np.ndarray]:
    """TP degrees each role may use: pinned in the workload, or every one that fits a node."""
    w = r.workload
    limit = min(w.cluster.gpus, w.cluster.gpus_per_node)
    pinned = {
        "colocated": w.parallelism.colocated_tp,
        "prefill": w.parallelism.prefill_tp,
        "decode": w.parallelism.decode_tp,
    }
    out = {}
    for role, pin in pinned.items():
        options = np.array([pin] if pin else [t for t in TP_CANDIDATES if t <= limit] or [1])
        fits = engine_for(r, options).fits()
        if pin and not fits.all():
            warnings.append(
                f"parallelism.{role}_tp={pin}: {r.model.id} in {w.weights_dtype} leaves no room "
                f"for KV on {pin} x {r.gpu.id}"
            )
        out[role] = options[fits] if fits.any() else options[-1:]
    return out


# --- KV transfer ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransferPath:
    kind: str  # "scale-up" or "network"
    gbps_per_gpu: float
    efficiency: float
    latency_ms: float
    rdma: bool

    def gb_per_s(self, prefill_tp, decode_tp):
        """Each prefill rank ships its shard over its own link, in parallel."""
        senders = np.minimum(prefill_tp, decode_tp)
        bw = transfer.effective_gb_per_s(self.gbps_per_gpu, self.efficiency, senders)
        return float(bw) if np.ndim(bw) == 0 else bw


def transfer_path(r: Resolved) -> TransferPath:
    """KV stays on NVLink when the whole cluster is one scale-up domain; else the network."""
    c = r.workload.cluster
    domain = max(c.gpus_per_node, r.gpu.scaleup_domain_gpus)
    on_scaleup = r.link.kind == "scale-up" or (c.gpus <= domain and r.gpu.scaleup_gb_per_s > 0)
    if on_scaleup:
        nvlink = get_link("nvlink")
        gbps = transfer.link_gbps_per_gpu(nvlink, r.gpu)
        return TransferPath("scale-up", gbps, nvlink.efficiency, nvlink.latency_us / 1e3, True)
    link = r.link
    return TransferPath("network", r.link_gbps, link.efficiency, link.latency_us / 1e3, link.rdma)


def transfer_times(r: Resolved, path: TransferPath, uncached, prefill_compute_ms, p_tp, d_tp):
    """Serialized, layer-wise and engine-style (the one that shows in TTFT) transfer times."""
    size = kv.kv_bytes(r.model, r.workload.kv_dtype, uncached)
    bw = path.gb_per_s(p_tp, d_tp)
    serial = transfer.transfer_ms(size, bw, path.latency_ms)
    layered = transfer.layerwise_exposed_ms(
        size, bw, path.latency_ms, prefill_compute_ms, r.model.layers
    )
    layerwise = transfer.is_layerwise(r.workload.engine, r.workload.efficiency.kv_transfer)
    exposed = layered if layerwise else serial
    if np.ndim(serial) == 0:
        return float(serial), float(layered), float(exposed)
    return serial, layered, exposed


# --- the search -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """Best configuration of each mode per prompt length (leading axis)."""

    tps: dict[str, np.ndarray]
    colo_grid: colocated.ColocatedGrid
    colo_rate: np.ndarray  # per replica, (P, Tc)
    colo_chunk_index: np.ndarray
    colo_batch: np.ndarray
    colo_best_t: np.ndarray  # (P,)
    colo_within: np.ndarray  # (P,) req/s within the budget
    prefill_rate: np.ndarray  # per replica, (P, Tp, Td)
    decode_rate: np.ndarray  # per replica, (P, Td)
    decode_batch: np.ndarray
    transfer_p99_ms: np.ndarray  # (P, Tp, Td)
    pair_served: np.ndarray  # (P, Tp, Td) req/s within the budget
    best_pair: np.ndarray  # (P, 2) indices into tps["prefill"], tps["decode"]
    disagg_within: np.ndarray  # (P,)
    gain: np.ndarray  # (P,)


def search(r: Resolved, prompts: np.ndarray, tps: dict[str, np.ndarray]) -> Found:
    w = r.workload
    budget = w.cluster.gpus
    lengths = Lengths.of(w, prompt_p50=prompts.reshape(-1, 1, 1, 1))
    n_prompts = prompts.shape[0]

    # Colocated: every (TP, chunk, batch) at once.
    tc = tps["colocated"]
    c_engine = engine_for(r, tc.reshape(1, -1, 1, 1))
    grid = colocated.grid(c_engine, lengths, w.slo, w.efficiency.chunk_tokens)
    best = colocated.best_points(grid)
    colo_within_t = (budget // tc)[None, :] * best.rate_per_s
    colo_t = colo_within_t.argmax(axis=1)
    colo_within = colo_within_t[np.arange(n_prompts), colo_t]

    # Disaggregated: decode per TP, prefill per TP, then every allowed (prefill, decode) pair.
    tp_p, tp_d = tps["prefill"], tps["decode"]
    path = transfer_path(r)
    d_engine = engine_for(r, tp_d.reshape(1, -1, 1, 1))
    ingress = transfer.effective_gb_per_s(path.gbps_per_gpu, path.efficiency, tp_d)
    d_point = decode.replica_capacity(
        d_engine, lengths, w.slo.tpot_ms, ingress[None, :, None, None]
    )
    d_rate = d_point.rate_per_s[:, :, 0, 0]

    p_engine = engine_for(r, tp_p.reshape(1, -1, 1, 1))
    mean_s, second_s = (m[:, :, 0, 0] for m in prefill.service_moments_ms(p_engine, lengths))
    p99_s = prefill.p99_prefill_ms(p_engine, lengths)[:, :, 0, 0]
    u99 = (lengths.prompt_p99 * lengths.uncached_share).reshape(-1, 1, 1)
    _, _, t99 = transfer_times(
        r, path, u99, p99_s[:, :, None], tp_p[None, :, None], tp_d[None, None, :]
    )
    # The first token reaches the user once the KV has landed and the request joins the
    # decode batch at its next step; a step at batch 1 keeps the budget independent of TPOT.
    join_ms = decode.decode_step_ms(d_engine, 1.0, lengths.decode_context_mean)[:, :, 0, 0]
    ttft_budget = w.slo.ttft_ms - t99 - join_ms[:, None, :]
    p_rate = prefill.replica_rate_per_s(
        mean_s[:, :, None], second_s[:, :, None], p99_s[:, :, None], ttft_budget
    )
    served = best_split(budget, tp_p[None, :, None], tp_d[None, None, :], p_rate, d_rate[:, None])
    served = np.where(pairs_allowed(w.engine, tp_p, tp_d, budget)[None], served[0], 0.0)
    flat = served.reshape(n_prompts, -1).argmax(axis=1)
    pair = np.stack(np.unravel_index(flat, served.shape[1:]), axis=1)
    disagg_within = served.reshape(n_prompts, -1).max(axis=1)

    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(
            colo_within > 0,
            disagg_within / colo_within,
            np.where(disagg_within > 0, np.inf, np.nan),
        )
    return Found(
        tps=tps,
        colo_grid=grid,
        colo_rate=best.rate_per_s,
        colo_chunk_index=best.chunk_index,
        colo_batch=best.batch,
        colo_best_t=colo_t,
        colo_within=colo_within,
        prefill_rate=p_rate,
        decode_rate=d_rate,
        decode_batch=d_point.batch[:, :, 0, 0],
        transfer_p99_ms=t99,
        pair_served=served,
        best_pair=pair,
        disagg_within=disagg_within,
        gain=gain,
    )


def pairs_allowed(engine_name: str, tp_p: np.ndarray, tp_d: np.ndarray, budget: int):
    """vLLM/TensorRT-LLM NIXL paths need decode TP >= prefill TP; SGLang needs them equal."""
    p, d = tp_p[:, None], tp_d[None, :]
    same_rule = p == d if engine_name == "sglang" else d >= p
    return same_rule & (p + d <= budget)


def best_split(budget: int, p_tp, d_tp, p_rate, d_rate):
    """Whole prefill (x) and decode (y) replicas in the budget maximising min(x P, y D).

    Returns (served, x, y). The optimum of the relaxed problem is x* = B D / (p D + d P);
    the best integer split is among the whole numbers next to it.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal = budget * d_rate / (p_tp * d_rate + d_tp * p_rate)
    ideal = np.where(np.isfinite(ideal), ideal, 1.0)
    base = np.floor(ideal)
    cands = np.stack([base - 1, base, base + 1, base + 2])
    x = np.maximum(cands, 1.0)
    y = np.floor((budget - x * p_tp) / d_tp)
    ok = (y >= 1) & (x * p_tp + d_tp <= budget)
    value = np.where(ok, np.minimum(x * p_rate, y * d_rate), 0.0)
    best = value.argmax(axis=0)
    take = lambda a: np.moveaxis(np.broadcast_to(a, value.shape), 0, -1)  # noqa: E731
    return pick(take(value), best), pick(take(x), best), pick(take(y), best)
