"""`slo.basis: static`: size both modes the way static-batch planners do.

AIConfigurator and Dynamo's SLA planner profile engines at fixed batches with no arrival
process: TTFT is the prefill latency of a batch (no queueing), TPOT the mean step over the
output, and the batch is the one that maximises throughput per GPU within both targets
(aiconfigurator.md section 7). Same physics as every other figure here (`step.iteration_ms`
through `calc/replicas/benchmark.py`, `calc/replicas/prefill.py`, `calc/replicas/decode.py`); only
the SLO semantics differ, so a verdict on this basis can be set beside theirs.

- Colocated: every (TP, chunk budget, decode batch); the mean-field replica of
  `calc/benchmark.at_batch` gives its rate, the prompt's own chunk iterations its TTFT and the
  mean iteration its TPOT. A batch whose prompts need more chunk iterations than there are
  iterations (prompt channel busy >= 1) is not a steady state and is left out, as
  AIConfigurator's agg model turns prefill-bound once its mix steps outnumber the output's.
- Disaggregated: prefill replicas run one prompt at a time (AIConfigurator's default prefill
  batch of 1), TTFT = prefill + the exposed KV transfer; decode replicas run the largest batch
  whose step meets TPOT and whose KV fits; whole replicas are split as the p99 basis splits
  them (`best_split`). Unlike AIConfigurator, no fixed degradation factors (0.9, 0.92,
  x1.8) are applied and the KV transfer is charged.
"""

from __future__ import annotations

import math

import numpy as np

from disagg_decider.calc.layouts.layout_choices import TP_CANDIDATES, engine_for, pinned_layouts
from disagg_decider.calc.layouts.pins import cuts_fp8_blocks
from disagg_decider.calc.layouts.search import pairs_allowed
from disagg_decider.calc.mode_records import HOURS_PER_YEAR
from disagg_decider.calc.physics.kvpath import transfer_path, transfer_times
from disagg_decider.calc.physics.parallel import Layout
from disagg_decider.calc.queues.array_helpers import sorted_unique
from disagg_decider.calc.queues.batch_edge import pick
from disagg_decider.calc.replicas import benchmark, decode, prefill
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.result import (
    Analysis,
    ColocatedResult,
    ConditionalResult,
    DisaggregatedResult,
    ThresholdPoint,
)
from disagg_decider.errors import UserError
from disagg_decider.workload import Resolved

# What a mode that no static batch serves reports (the p99 basis's sizing is not carried over).
NOT_SERVED = {
    "feasible": False,
    "fits_cluster": False,
    "gpus_needed_for_rate": None,
    "max_rate_per_s": 0.0,
    "goodput_per_gpu": 0.0,
    "ttft_p99_ms": None,
    "tpot_p99_ms": None,
}
BATCHES = sorted_unique(np.round(np.geomspace(1, 1024, 64)))


def _tps(r: Resolved, role: str) -> list[int]:
    """TP degrees the static basis tries for a role: TP-only layouts (no DP/EP)."""
    pin = pinned_layouts(r.workload)[role]
    if pin and not pin.tp_only:
        raise UserError(
            f"parallelism.{role} ({pin.label}): slo.basis static prices tensor-parallel "
            "layouts only; pin a TP degree or use slo.basis p99-under-load for DP/EP layouts"
        )
    if pin:
        return [pin.tp]
    c = r.workload.cluster
    tps = [t for t in TP_CANDIDATES if t <= min(c.gpus, c.gpus_per_node)]
    return [t for t in tps if not cuts_fp8_blocks(r, Layout.of(t))]


def _runs(lengths: Lengths) -> benchmark.Runs:
    one = lambda v: np.array([float(np.ravel(v)[0])])  # noqa: E731
    return benchmark.Runs(
        prompt_tokens=one(lengths.uncached_mean),
        output_tokens=one(lengths.output_mean),
        prompt_cv=np.zeros(1),
        request_rate_per_s=np.array([math.inf]),
        concurrency=np.array([math.nan]),
    )


def colocated_best(r: Resolved, lengths: Lengths) -> dict | None:
    """Best static colocated replica: tokens/s per GPU within both targets."""
    w = r.workload
    runs = _runs(lengths)
    best = None
    for tp in _tps(r, "colocated"):
        engine = engine_for(r, tp)
        if not bool(np.all(engine.fits())):
            continue
        per_seq = engine.kv_bytes_held(lengths.prompt_mean + lengths.output_mean)
        memory = float(np.ravel(np.floor(engine.kv_capacity_bytes() / per_seq))[0])
        for chunk in w.efficiency.chunk_tokens:
            b = BATCHES[(chunk > BATCHES) & (min(memory, w.efficiency.max_decode_batch) >= BATCHES)]
            if b.size == 0:
                continue
            rep = benchmark.at_batch(engine, runs, float(chunk), b)
            ttft, tpot = rep.prefill_service_ms, rep.tpot_ms
            # A batch is sustainable only while the prompt chunks fit in the iterations: one
            # chunk of (chunk - b) tokens per iteration, so the prompt channel must be busy
            # less than all of the time (past that, the closed form's rate and TPOT are not a
            # steady state: 16K prompts at chunk 256 with 14 decoding would need 151%).
            ok = (ttft <= w.slo.ttft_ms) & (tpot <= w.slo.tpot_ms) & (rep.prefill_busy < 1.0)
            if not ok.any():
                continue
            per_gpu = np.where(ok, rep.rate_per_s / tp, -1.0)
            i = int(per_gpu.argmax())
            if best is None or per_gpu[i] > best["rate_per_gpu"]:
                best = {
                    "tp": tp,
                    "chunk": int(chunk),
                    "batch": float(b[i]),
                    "rate": float(rep.rate_per_s[i]),
                    "rate_per_gpu": float(per_gpu[i]),
                    "ttft_ms": float(ttft[i]),
                    "tpot_ms": float(tpot[i]),
                }
    return best


def disaggregated_best(r: Resolved, lengths: Lengths) -> dict | None:
    """Best static prefill/decode pair on the cluster's budget, in whole replicas."""
    w = r.workload
    path = transfer_path(r)
    u = float(np.ravel(lengths.uncached_mean)[0])
    p = float(np.ravel(lengths.prompt_mean)[0])
    ctx = lengths.decode_context_mean
    prefill_side = {}
    for tp in _tps(r, "prefill"):
        e = engine_for(r, tp)
        if bool(np.all(e.fits())):
            prefill_side[tp] = float(np.ravel(prefill.prefill_ms(e, u, p - u))[0])
    decode_side = {}
    for tp in _tps(r, "decode"):
        e = engine_for(r, tp)
        if not bool(np.all(e.fits())):
            continue
        per_seq = e.kv_bytes_held(ctx)
        memory = float(np.ravel(np.floor(e.kv_capacity_bytes() / per_seq))[0])
        b = BATCHES[min(memory, w.efficiency.max_decode_batch) >= BATCHES]
        step = np.ravel(decode.decode_step_ms(e, b, ctx))
        ok = step <= w.slo.tpot_ms
        if ok.any():
            rates = np.where(ok, b / (float(np.ravel(lengths.output_mean)[0]) * step) * 1e3, -1)
            i = int(rates.argmax())
            decode_side[tp] = (float(rates[i]), float(b[i]), float(step[i]))
    budget = float(w.cluster.gpus)
    best = None
    for p_tp, pre_ms in prefill_side.items():
        for d_tp, (d_rate, batch, step) in decode_side.items():
            if not pairs_allowed(w.engine, np.array([p_tp]), np.array([d_tp]), budget)[0, 0]:
                continue
            _, _, exposed = transfer_times(r, path, u, pre_ms, p_tp, d_tp)
            ttft = pre_ms + exposed + step
            if ttft > w.slo.ttft_ms:
                continue
            p_rate = 1e3 / pre_ms
            served, x, y = (
                float(np.ravel(v)[0]) for v in best_split(budget, p_tp, d_tp, p_rate, d_rate)
            )
            if served > 0 and (best is None or served > best["served"]):
                best = {
                    "p_tp": p_tp,
                    "d_tp": d_tp,
                    "p_rate": p_rate,
                    "d_rate": d_rate,
                    "x": x,
                    "y": y,
                    "served": served,
                    "batch": batch,
                    "ttft_ms": ttft,
                    "tpot_ms": step,
                    "transfer_ms": float(exposed),
                }
    return best


def static_analysis(r: Resolved, a: Analysis) -> Analysis:
    """The p99-basis analysis with both modes re-sized on the static basis."""
    w = r.workload
    lengths = Lengths.of(w)
    rate = w.traffic.requests_per_second
    budget = w.cluster.gpus
    tokens_per_request = float(np.ravel(lengths.prompt_mean + lengths.output_mean)[0])
    price = w.cost.usd_per_gpu_hour

    def costs(gpus: float, served: float) -> dict:
        per_hour = gpus * price
        tokens = served * tokens_per_request * 3600.0
        return {
            "cost_per_million_tokens_usd": per_hour / tokens * 1e6 if tokens > 0 else None,
            "cost_per_year_usd": per_hour * HOURS_PER_YEAR,
        }

    c = colocated_best(r, lengths)
    if c is None:
        colo = a.colocated.model_copy(update=NOT_SERVED)
    else:
        cap = budget // c["tp"]
        need = max(math.ceil(rate / c["rate"] - 1e-9), 1)
        replicas = min(need, cap)
        within = cap * c["rate"]
        colo = a.colocated.model_copy(
            update={
                "feasible": True,
                "fits_cluster": need <= cap,
                "gpus": replicas * c["tp"],
                "gpus_needed_for_rate": need * c["tp"],
                "max_rate_per_s": within,
                "goodput_per_gpu": within / budget,
                "ttft_p99_ms": c["ttft_ms"],
                "tpot_p99_ms": c["tpot_ms"],
                "tp": c["tp"],
                "dp": 1,
                "ep": 1,
                "layout": f"TP{c['tp']}",
                "replicas": replicas,
                "chunk_tokens": c["chunk"],
                "max_batch": int(c["batch"]),
                **costs(replicas * c["tp"], min(rate, replicas * c["rate"])),
            }
        )
    d = disaggregated_best(r, lengths)
    if d is None:
        dis = a.disaggregated.model_copy(update=NOT_SERVED)
    else:
        x = max(math.ceil(rate / d["p_rate"] - 1e-9), 1)
        y = max(math.ceil(rate / d["d_rate"] - 1e-9), 1)
        needed = x * d["p_tp"] + y * d["d_tp"]
        fits = needed <= budget
        if not fits:
            x, y = int(d["x"]), int(d["y"])
        gpus = x * d["p_tp"] + y * d["d_tp"]
        dis = a.disaggregated.model_copy(
            update={
                "feasible": True,
                "fits_cluster": fits,
                "gpus": gpus,
                "gpus_needed_for_rate": needed,
                "max_rate_per_s": d["served"],
                "goodput_per_gpu": d["served"] / budget,
                "ttft_p99_ms": d["ttft_ms"],
                "tpot_p99_ms": d["tpot_ms"],
                "prefill_tp": d["p_tp"],
                "decode_tp": d["d_tp"],
                "prefill_dp": 1,
                "decode_dp": 1,
                "prefill_ep": 1,
                "decode_ep": 1,
                "prefill_layout": f"TP{d['p_tp']}",
                "decode_layout": f"TP{d['d_tp']}",
                "prefill_replicas": x,
                "decode_replicas": y,
                "prefill_gpus": x * d["p_tp"],
                "decode_gpus": y * d["d_tp"],
                "max_batch": int(d["batch"]),
                "transfer_ms_p99": d["transfer_ms"],
                **costs(gpus, min(rate, x * d["p_rate"], y * d["d_rate"])),
            }
        )
    gain = dis.goodput_per_gpu / colo.goodput_per_gpu if colo.goodput_per_gpu > 0 else None
    note = (
        "slo.basis static: TTFT is a batch's prefill latency with no queueing and TPOT the mean "
        "step (ttft_p99_ms / tpot_p99_ms hold these static figures); the conditional column is "
        "the better of the two static modes; the crossover prompt length is still read on the "
        "p99-under-load basis"
    )
    return a.model_copy(
        update={
            "colocated": colo,
            "disaggregated": dis,
            "conditional": static_conditional(a.conditional, colo, dis),
            "gain": gain,
            "warnings": [*a.warnings, note],
        }
    )


STATIC_ROUTING = (
    "slo.basis static: no routing threshold between the modes is priced on this basis, so the "
    "conditional layout is the better of static colocated and static always-disaggregated"
)


def static_conditional(
    k: ConditionalResult | None, colo: ColocatedResult, dis: DisaggregatedResult
) -> ConditionalResult | None:
    """The conditional column on the static basis: its two ends (no prefill pool, T = 0) are
    the static modes, so it reports the better of them rather than the p99 basis's pools,
    which a column of static figures beside it would misread as comparable."""
    if k is None:  # an analysis without the conditional layout (the interactivity sweep)
        return None
    curve = [
        ThresholdPoint(
            threshold_tokens=None, goodput_per_gpu=colo.goodput_per_gpu, share_to_prefill=0.0
        ),
        ThresholdPoint(
            threshold_tokens=0, goodput_per_gpu=dis.goodput_per_gpu, share_to_prefill=1.0
        ),
    ]
    split = dis.feasible and dis.goodput_per_gpu > colo.goodput_per_gpu
    best = dis if split else colo
    common = {
        "feasible": best.feasible,
        "threshold_reason": STATIC_ROUTING,
        "max_rate_per_s": best.max_rate_per_s,
        "goodput_per_gpu": best.goodput_per_gpu,
        "ttft_p99_ms": best.ttft_p99_ms,
        "tpot_p99_ms": best.tpot_p99_ms,
        "pooled_ttft_p99_ms": None,
        "local_ttft_p99_ms": None,
        "gain_over_colocated": _ratio(best.goodput_per_gpu, colo.goodput_per_gpu),
        "gain_over_disaggregated": _ratio(best.goodput_per_gpu, dis.goodput_per_gpu),
        "curve": curve,
    }
    if split:
        return k.model_copy(
            update={
                **common,
                "layout": "disaggregated",
                "threshold_tokens": 0,
                "share_to_prefill": 1.0,
                "prefill_tp": dis.prefill_tp,
                "decode_tp": dis.decode_tp,
                "prefill_replicas": dis.prefill_replicas,
                "decode_replicas": dis.decode_replicas,
                "chunk_tokens": None,
            }
        )
    return k.model_copy(
        update={
            **common,
            "layout": "colocated",
            "threshold_tokens": None,
            "share_to_prefill": 0.0,
            "prefill_tp": None,
            "decode_tp": colo.tp,
            "prefill_replicas": 0,
            "decode_replicas": colo.replicas,
            "chunk_tokens": colo.chunk_tokens,
        }
    )


def _ratio(x: float, y: float) -> float | None:
    return x / y if y > 0 else None


def best_split(budget, p_tp, d_tp, p_rate, d_rate):
    """Whole prefill (x) and decode (y) replicas in the budget maximising min(x P, y D).

    With no queueing a prefill replica serves a fixed rate, so the pools add up linearly (the
    p99-under-load basis sizes pooled M/G/c prefill queues instead, `pools.pooled_split`).
    The optimum of the relaxed problem is x* = B D / (p D + d P); the best whole split is among
    the whole numbers next to it. Returns (served, x, y).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal = budget * d_rate / (p_tp * d_rate + d_tp * p_rate)
    ideal = np.where(np.isfinite(ideal), ideal, 1.0)
    base = np.floor(ideal)
    x = np.maximum(np.stack([base - 1, base, base + 1, base + 2]), 1.0)
    y = np.floor((budget - x * p_tp) / d_tp)
    ok = (y >= 1) & (x * p_tp + d_tp <= budget)
    value = np.where(ok, np.minimum(x * p_rate, y * d_rate), 0.0)
    best = value.argmax(axis=0)
    take = lambda a: np.moveaxis(np.broadcast_to(a, value.shape), 0, -1)  # noqa: E731
    return pick(take(value), best), pick(take(x), best), pick(take(y), best)
