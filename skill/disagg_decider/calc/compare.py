"""Transfer versus gain: size both modes on the cluster and compare their goodput per GPU.

Both modes get the same GPU budget (`cluster.gpus`) in whole replicas. Goodput is the largest
request rate a mode serves within its p99 TTFT and TPOT targets; dividing by the whole budget
makes GPUs a mode cannot use, or a prefill pool idling on short prompts, count against it.

`calc/search.py` evaluates every configuration at once; index 0 of its prompt axis is the
workload's own p50 prompt, the rest a log-spaced grid from which the crossover (the prompt
length where disaggregation starts to win) is read, every mode re-optimised at every length.
This module turns that into the verdict's numbers at the workload's own rate.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from disagg_decider.calc import colocated, decode, kv, prefill
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.result import Analysis, ColocatedResult, DisaggregatedResult
from disagg_decider.calc.search import (
    Found,
    best_split,
    engine_for,
    search,
    tp_options,
    transfer_path,
    transfer_times,
)
from disagg_decider.calc.step import Engine, iteration_ms
from disagg_decider.workload import Resolved

HOURS_PER_YEAR = 8760.0
CROSSOVER_POINTS = 11
LOCAL_PREFILL_CANDIDATES = np.geomspace(16, 65536, 49)


def analyze(r: Resolved) -> Analysis:
    w = r.workload
    warnings: list[str] = []
    tps = tp_options(r, warnings)
    own = w.traffic.prompt_tokens.p50
    prompts = np.concatenate([[own], crossover_grid(r)])
    found = search(r, prompts, tps)
    lengths = Lengths.of(w)
    colo = _colocated_result(r, lengths, found)
    disagg = _disaggregated_result(r, lengths, found)
    p_engine = engine_for(r, disagg.prefill_tp)
    d_engine = engine_for(r, disagg.decode_tp)
    path = transfer_path(r)
    u50 = w.traffic.prompt_tokens.p50 * lengths.uncached_share
    cached50 = w.traffic.prompt_tokens.p50 - u50
    prefill50_ms = _scalar(prefill.prefill_ms(p_engine, u50, cached50))
    serial, layered, exposed = transfer_times(r, path, u50, prefill50_ms, p_engine.tp, d_engine.tp)
    warnings += _warnings(r, colo, disagg)
    return Analysis(
        kv_bytes_per_token=kv.kv_bytes_per_token(r.model, w.kv_dtype, max(u50, 1.0)),
        kv_bytes_per_request=_scalar(kv.kv_bytes(r.model, w.kv_dtype, u50)),
        kv_transfer_ms=exposed,
        kv_transfer_serialized_ms=serial,
        kv_transfer_layerwise_ms=layered,
        kv_transfer_path=path.kind,
        kv_transfer_gb_per_s=path.gb_per_s(p_engine.tp, d_engine.tp),
        kv_transfer_rdma=path.rdma,
        prefill_ms=prefill50_ms,
        decode_step_ms=_decode_step(d_engine, lengths, disagg),
        effective_prompt_tokens=u50,
        colocated=colo,
        disaggregated=disagg,
        gain=_gain(disagg.goodput_per_gpu, colo.goodput_per_gpu),
        crossover_prompt_tokens=_crossover(prompts, found.gain),
        conditional_disagg_threshold_tokens=_local_prefill_threshold(r, d_engine, lengths, disagg),
        warnings=warnings,
    )


def gain_curve(r: Resolved, prompt_tokens) -> np.ndarray:
    """Disaggregated over colocated goodput at each prompt p50, every mode re-optimised.

    The p99/p50 spread, outputs, rate, SLOs and cluster stay as in the workload. Returns inf
    where only disaggregation meets the SLO and nan where neither does.
    """
    return search(r, np.asarray(prompt_tokens, dtype=float), tp_options(r, [])).gain


def crossover_grid(r: Resolved) -> np.ndarray:
    return _log_grid(min(r.model.max_context_tokens, 131072))


@cache
def _log_grid(top: int) -> np.ndarray:
    grid = np.unique(np.round(np.geomspace(64, top, CROSSOVER_POINTS)))
    grid.setflags(write=False)
    return grid


def crossover_from_curve(prompts: np.ndarray, gains: np.ndarray, own_prompt: float) -> int | None:
    """Where disaggregation starts to win, seen from the workload's own prompt length.

    Whole replicas on a fixed budget make the gain curve step up and down, so "the" crossover
    is read relative to the workload: if disaggregation wins at its own prompt, the lower end
    of that winning stretch; if not, the first longer prompt where it would win. The crossing
    is log-interpolated between grid points; None when it never wins on the grid.
    """
    wins = np.where(np.isnan(gains), 0.0, gains) > 1.0
    if not wins.any():
        return None
    own = int(np.clip(np.searchsorted(prompts, own_prompt), 0, len(prompts) - 1))
    if wins[own]:
        start = own
        while start > 0 and wins[start - 1]:
            start -= 1
    else:
        later = np.flatnonzero(wins[own:])
        if later.size == 0:
            return None
        start = own + int(later[0])
    if start == 0:
        return int(prompts[0])
    return _log_crossing(prompts[start - 1], prompts[start], gains[start - 1], gains[start])


def _crossover(prompts: np.ndarray, gains: np.ndarray) -> int | None:
    """The crossover on the grid with the workload's own prompt (index 0) merged in."""
    order = np.argsort(prompts, kind="stable")
    return crossover_from_curve(prompts[order], gains[order], float(prompts[0]))


def _log_crossing(lo: float, hi: float, g_lo: float, g_hi: float) -> int:
    """Prompt length where the gain reaches 1 between two grid points (log-linear)."""
    g_lo = 0.0 if math.isnan(g_lo) else float(g_lo)
    if not math.isfinite(g_hi) or g_hi <= g_lo:
        return round(hi)
    frac = min(max((1.0 - g_lo) / (g_hi - g_lo), 0.0), 1.0)
    return round(math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo))))


# --- the modes at the workload's own rate -----------------------------------------------------


def _replicas_needed(rate: float, per_replica: float) -> int:
    """Whole replicas that carry `rate`; 1 when a replica carries nothing (no size fits)."""
    return max(math.ceil(rate / per_replica - 1e-9), 1) if per_replica > 0 else 1


def _replicas_for(rate: float, per_replica: float, tp: int, budget: int) -> tuple[int, bool]:
    """Whole replicas for the rate, capped at what the cluster holds."""
    cap = max(budget // tp, 1)
    if per_replica <= 0:
        return cap, False
    need = _replicas_needed(rate, per_replica)
    return min(need, cap), need <= cap


def _colocated_result(r: Resolved, lengths: Lengths, f: Found) -> ColocatedResult:
    w = r.workload
    t = int(f.colo_best_t[0])
    tp = int(f.tps["colocated"][t])
    per_replica = float(f.colo_rate[0, t])
    chunk_i = int(f.colo_chunk_index[0, t])
    replicas, fits = _replicas_for(w.traffic.requests_per_second, per_replica, tp, w.cluster.gpus)
    ttft = tpot = None
    if per_replica > 0:
        load = min(w.traffic.requests_per_second / replicas, per_replica)
        ttft, tpot = colocated.latencies_at_rate(f.colo_grid, (0, t, chunk_i), load)
    served = min(w.traffic.requests_per_second, replicas * per_replica)
    return ColocatedResult(
        feasible=per_replica > 0,
        fits_cluster=fits,
        gpus=replicas * tp,
        max_rate_per_s=float(f.colo_within[0]),
        goodput_per_gpu=float(f.colo_within[0]) / w.cluster.gpus,
        ttft_p99_ms=ttft,
        tpot_p99_ms=tpot,
        tp=tp,
        replicas=replicas,
        chunk_tokens=int(w.efficiency.chunk_tokens[chunk_i]),
        max_batch=int(f.colo_batch[0, t]),
        **_costs(r, lengths, replicas * tp, served),
    )


def _disaggregated_result(r: Resolved, lengths: Lengths, f: Found) -> DisaggregatedResult:
    w = r.workload
    budget = w.cluster.gpus
    i, j = (int(k) for k in f.best_pair[0])
    p_tp, d_tp = int(f.tps["prefill"][i]), int(f.tps["decode"][j])
    p_rate, d_rate = float(f.prefill_rate[0, i, j]), float(f.decode_rate[0, j])
    rate = w.traffic.requests_per_second
    feasible = bool(f.pair_served[0, i, j] > 0)
    x, y = _replicas_needed(rate, p_rate), _replicas_needed(rate, d_rate)
    fits = feasible and x * p_tp + y * d_tp <= budget
    if feasible and not fits:
        _, bx, by = best_split(budget, p_tp, d_tp, p_rate, d_rate)
        x, y = int(bx), int(by)
    transfer_p99 = float(f.transfer_p99_ms[0, i, j])
    ttft = tpot = None
    if feasible:
        p_engine, d_engine = engine_for(r, p_tp), engine_for(r, d_tp)
        step = decode.step_at_rate_ms(d_engine, lengths, min(rate / y, d_rate))
        ttft = prefill.ttft_p99_ms(p_engine, lengths, min(rate / x, p_rate)) + transfer_p99 + step
        tpot = step
    served = min(rate, x * p_rate, y * d_rate)
    gpus = x * p_tp + y * d_tp
    return DisaggregatedResult(
        feasible=feasible,
        fits_cluster=fits,
        gpus=gpus,
        max_rate_per_s=float(f.disagg_within[0]),
        goodput_per_gpu=float(f.disagg_within[0]) / budget,
        ttft_p99_ms=ttft,
        tpot_p99_ms=tpot,
        prefill_tp=p_tp,
        decode_tp=d_tp,
        prefill_replicas=x,
        decode_replicas=y,
        prefill_gpus=x * p_tp,
        decode_gpus=y * d_tp,
        max_batch=int(f.decode_batch[0, j]),
        transfer_ms_p99=transfer_p99,
        **_costs(r, lengths, gpus, served),
    )


def _decode_step(engine: Engine, lengths: Lengths, d: DisaggregatedResult) -> float:
    """Step time at the sized operating point, or at batch 1 when no size meets the SLO."""
    if d.tpot_p99_ms is not None:
        return d.tpot_p99_ms
    return _scalar(decode.decode_step_ms(engine, 1.0, lengths.decode_context_mean))


def _local_prefill_threshold(r: Resolved, d_engine: Engine, lengths, d) -> int:
    """Uncached prompt tokens a decode worker can prefill itself without breaking TPOT.

    At the batch the decode pool settles at, a prompt whose prefill still fits in one iteration
    under the TPOT target costs less computed locally than shipped; longer ones go to the
    prefill pool. This is Dynamo's `eff_isl_threshold` and llm-d's `nonCachedTokens`.
    """
    w = r.workload
    load = w.traffic.requests_per_second / max(d.decode_replicas, 1)
    batch = max(decode.batch_at_rate(d_engine, lengths, load), 1.0)
    candidates = LOCAL_PREFILL_CANDIDATES
    ctx = float(lengths.decode_context_mean)
    t = iteration_ms(d_engine, batch, ctx, candidates, 0.0)
    fits = candidates[t <= w.slo.tpot_ms]
    if fits.size == 0:
        return 16
    return int(max(16, fits.max() // 16 * 16))


# --- costs and warnings -----------------------------------------------------------------------


def _costs(r: Resolved, lengths: Lengths, gpus: int, served_rate: float) -> dict:
    usd_per_hour = gpus * r.workload.cost.usd_per_gpu_hour
    tokens_per_hour = served_rate * float(lengths.prompt_mean + lengths.output_mean) * 3600.0
    per_million = usd_per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else None
    return {
        "cost_per_million_tokens_usd": per_million,
        "cost_per_year_usd": usd_per_hour * HOURS_PER_YEAR,
    }


def _gain(disagg: float, colo: float) -> float | None:
    return disagg / colo if colo > 0 else None


def _scalar(x) -> float:
    return float(np.ravel(x)[0])


def _warnings(r: Resolved, colo: ColocatedResult, disagg: DisaggregatedResult) -> list[str]:
    w = r.workload
    out = []
    rate = w.traffic.requests_per_second
    if not colo.feasible and not disagg.feasible:
        out.append(
            f"no configuration meets p99 TTFT {w.slo.ttft_ms:g} ms and TPOT {w.slo.tpot_ms:g} ms "
            f"for {r.model.id} on {r.gpu.id}: relax the SLO, shorten prompts or use faster GPUs"
        )
    for res in (colo, disagg):
        if res.feasible and not res.fits_cluster:
            out.append(
                f"{res.mode}: {rate:g} req/s needs more than the cluster's {w.cluster.gpus} GPUs "
                f"(at most {res.max_rate_per_s:.2f} req/s within the SLO)"
            )
    if r.model.moe is not None and r.model.moe.experts >= 64:
        out.append(
            f"{r.model.id} has {r.model.moe.experts} experts: this calculator models tensor "
            "parallelism only; wide expert parallelism with data-parallel attention (DeepEP) "
            "raises decode capacity and usually favours disaggregation"
        )
    if w.traffic.prompt_tokens.p99 > r.model.max_context_tokens:
        out.append(
            f"traffic.prompt_tokens.p99 exceeds {r.model.id}'s context of "
            f"{r.model.max_context_tokens} tokens"
        )
    return out
