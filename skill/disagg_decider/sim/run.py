"""Wiring: a workload and its verdict become two simulated clusters, their metrics and goodput.

Pool sizes, TP degrees and the colocated chunk size default to the verdict's `sizing`, so
`decide simulate` checks exactly what `decide` recommends; `--colocated-gpus`, `--prefill-gpus`
and `--decode-gpus` resize the pools with the verdict's TP degrees.

Batch caps: by default (`engine`) a replica holds up to `efficiency.max_decode_batch` sequences
(vLLM's `max_num_seqs`) and KV memory is the binding limit, so the simulated TPOT shows what the
load does to the batch. With `verdict`, the verdict's batch (its operating point at capacity)
becomes a hard `max_num_seqs`; that cap also counts prompts still in prefill, so a pool sized
at that batch queues sooner than the calculator, which counts only decoding sequences.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from disagg_decider.calc.physics import transfer
from disagg_decider.calc.physics.kvpath import transfer_path
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.decide import decide
from disagg_decider.errors import UserError
from disagg_decider.sim import colocated, disaggregated, metrics
from disagg_decider.sim import requests as reqs
from disagg_decider.sim.colocated import ColocatedConfig, Policy
from disagg_decider.sim.disaggregated import DisaggregatedConfig
from disagg_decider.sim.goodput import max_rate, replay_at
from disagg_decider.sim.limits import MAX_REPLICAS
from disagg_decider.sim.outcome import Outcome
from disagg_decider.verdict import Verdict
from disagg_decider.workload import Resolved, Workload, with_rate


@dataclass(frozen=True)
class Setup:
    """Both modes' engines and pools for one workload."""

    resolved: Resolved
    colocated_engine: Engine
    prefill_engine: Engine
    decode_engine: Engine
    colocated: ColocatedConfig
    disaggregated: DisaggregatedConfig
    # Heterogeneous clusters: each GPU type's colocated replicas with its share of arrivals
    # (sim/hetero.py); empty otherwise.
    colocated_pools: tuple = ()


def engine(r: Resolved, tp: int, dp: int = 1, ep: int = 1) -> Engine:
    """The calculator's engine for a layout (attention TP, DP ranks, EP size)."""
    from disagg_decider.calc.layouts.layout_choices import engine_for

    return engine_for(r, tp, dp, ep)


def layerwise_transfer(r: Resolved) -> bool:
    """The engine's KV transfer style, resolved as the calculator resolves it."""
    return transfer.is_layerwise(r.workload.engine, r.workload.efficiency.kv_transfer)


def setup(
    r: Resolved,
    verdict: Verdict,
    *,
    colocated_gpus: int | None = None,
    prefill_gpus: int | None = None,
    decode_gpus: int | None = None,
    policy: Policy = "chunked",
    batch_cap: str = "engine",
    router: str = "least-work",
) -> Setup:
    hetero = r.workload.cluster.heterogeneous
    if hetero:
        from disagg_decider.sim import hetero as het

        het.check_cross_split(verdict)
        if colocated_gpus is not None:
            raise UserError(
                "--colocated-gpus: a heterogeneous cluster's colocated mode runs every GPU of "
                "both pools (each pool's own colocated layout); resize cluster.prefill_gpus / "
                "decode_gpus instead"
            )
    s = verdict.sizing
    # The engine caps sequences per attention-DP rank (`Engine.max_decode_batch`).
    engine_batch = r.workload.efficiency.max_decode_batch
    use_verdict = batch_cap == "verdict"
    # Pools count GPUs per replica (tp x dp); engines take the layout itself.
    c_gpus, p_gpus, d_gpus = (
        s.colocated_tp * s.colocated_dp,
        s.prefill_tp * s.prefill_dp,
        s.decode_tp * s.decode_dp,
    )
    c_replicas = _replicas("--colocated-gpus", colocated_gpus, c_gpus, s.colocated_replicas)
    p_replicas = _replicas("--prefill-gpus", prefill_gpus, p_gpus, s.prefill_replicas)
    d_replicas = _replicas("--decode-gpus", decode_gpus, d_gpus, s.decode_replicas)

    def colocated_config(replicas: int, gpus: int, c, feasible: bool) -> ColocatedConfig:
        return ColocatedConfig(
            replicas=replicas,
            tp=gpus,
            chunk_tokens=c.chunk_tokens,
            max_batch=min(
                max(c.max_batch, 1) if use_verdict and feasible else engine_batch * c.dp,
                c.chunk_tokens - 1,
            ),
            policy=policy,
            router=router,
            dp=c.dp,
            ep=c.ep,
        )

    colo = colocated_config(
        c_replicas,
        c_gpus,
        _Colocated(s.colocated_dp, s.colocated_ep, s.colocated_chunk_tokens, s.colocated_max_batch),
        verdict.colocated.feasible,
    )
    pools: tuple = ()
    p_r, d_r, path = r, r, transfer_path(r)
    if hetero:
        from disagg_decider.calc.modes import hetero as calc_hetero
        from disagg_decider.calc.modes import hetero_cross

        pools = het.colocated_pools(
            r,
            lambda n, gpus, c, a: colocated_config(n, gpus, c, a.colocated.feasible),
            engine,
        )
        p_r, d_r = calc_hetero.pool_resolved(r, "prefill"), calc_hetero.pool_resolved(r, "decode")
        path = hetero_cross.network_path(r)
    dis = DisaggregatedConfig(
        prefill_replicas=p_replicas,
        prefill_tp=p_gpus,
        decode_replicas=d_replicas,
        decode_tp=d_gpus,
        max_batch=max(s.decode_max_batch, 1)
        if use_verdict and verdict.disaggregated.feasible
        else engine_batch * s.decode_dp,
        path=path,
        layerwise=layerwise_transfer(r),
        router=router,
        prefill_dp=s.prefill_dp,
        decode_dp=s.decode_dp,
        prefill_ep=s.prefill_ep,
        decode_ep=s.decode_ep,
        prefill_gpu=p_r.gpu.id if hetero else "",
        decode_gpu=d_r.gpu.id if hetero else "",
    )
    return Setup(
        resolved=r,
        colocated_engine=engine(r, s.colocated_tp, s.colocated_dp, s.colocated_ep),
        prefill_engine=engine(p_r, s.prefill_tp, s.prefill_dp, s.prefill_ep),
        decode_engine=engine(d_r, s.decode_tp, s.decode_dp, s.decode_ep),
        colocated=colo,
        disaggregated=dis,
        colocated_pools=pools,
    )


@dataclass(frozen=True)
class _Colocated:
    """The verdict's colocated sizing in the shape of a calculator ColocatedResult."""

    dp: int
    ep: int
    chunk_tokens: int
    max_batch: int


def _replicas(option: str, gpus: int | None, tp: int, default: int) -> int:
    if gpus is None:
        return max(default, 1)
    if gpus < tp or gpus % tp:
        raise UserError(
            f"{option} {gpus}: must be a positive multiple of the verdict's TP degree {tp} "
            f"(e.g. {option} {tp * max(gpus // tp, 1)})"
        )
    if gpus // tp > MAX_REPLICAS:
        raise UserError(
            f"{option} {gpus}: {gpus // tp:,} replicas of {tp} GPUs; one simulated pool has at "
            f"most {MAX_REPLICAS:,} replicas ({option} <= {tp * MAX_REPLICAS:,})"
        )
    return gpus // tp


def replicas_of(s: Setup) -> int:
    """Replicas of every pool a run simulates (what its cost grows with, `sim/limits.py`)."""
    d = s.disaggregated
    return s.colocated.replicas + d.prefill_replicas + d.decode_replicas


def at_max_rate(
    w: Workload, verdict: Verdict, mode: str, base_dir: Path | None = None
) -> tuple[Workload, Verdict]:
    """The workload at just under `mode`'s max rate, and its verdict: the pools that rate was
    priced on. A verdict sizes its pools for the workload's own rate, while `max_rate_per_s` is
    the whole cluster's best layout's; to simulate what the rate belongs to, decide again at it
    (the sweep's goodputs, the calculator-vs-simulator tests)."""
    top = getattr(verdict, mode).max_rate_per_s or 0.0
    if top <= 0:
        return w, verdict
    at = with_rate(w, top * 0.999)
    return at, decide(at, base_dir=base_dir)


def synthetic_requests(
    r: Resolved, count: int, seed: int, rate_per_s: float | None = None, cv: float = 1.0
) -> reqs.Requests:
    w = r.workload
    rate = w.traffic.requests_per_second if rate_per_s is None else rate_per_s
    if w.traffic.classes:  # mixed traffic: each request from its class, not the fitted mix
        from disagg_decider.classes import components
        from disagg_decider.sim import classes

        return classes.synthetic(components(w), count, rate, seed, r.model.max_context_tokens, cv)
    return reqs.synthetic(Lengths.of(w), count, rate, seed, r.model.max_context_tokens, cv)


def simulate_mode(
    s: Setup, mode: str, requests: reqs.Requests, progress: Callable[[int], None] | None = None
) -> Outcome:
    if mode == "colocated" and s.colocated_pools:
        from disagg_decider.sim import hetero as het

        parts = het.split(requests, [p.share for p in s.colocated_pools])
        outcomes = [
            colocated.simulate(p.engine, het.subset(requests, idx), p.config)
            for p, idx in zip(s.colocated_pools, parts, strict=True)
        ]
        outcomes = [
            replace(o, layout=f"{o.layout} on {p.gpu}")
            for p, o in zip(s.colocated_pools, outcomes, strict=True)
        ]
        return het.merged(outcomes, parts, len(requests))
    if mode == "colocated":
        return colocated.simulate(s.colocated_engine, requests, s.colocated, progress)
    return disaggregated.simulate(
        s.prefill_engine, s.decode_engine, requests, s.disaggregated, progress
    )


MODES = ("colocated", "disaggregated")


def simulate_both(
    s: Setup,
    requests: reqs.Requests,
    progress: Callable[[str, int], None] | None = None,
    jobs: int = 1,
) -> dict[str, metrics.ModeMetrics]:
    """Both modes on the same requests, scored against the workload's SLOs and GPU price.

    With `jobs` >= 2 the two modes run in two worker processes (`sim.parallel`), with equal
    results; `progress(mode, done)` then hears each mode once, when it ends, instead of as its
    arrivals are routed."""
    if jobs <= 1:
        out = {}
        for mode in MODES:
            tick = None if progress is None else functools.partial(progress, mode)
            out[mode] = simulate_and_score(s, mode, requests, tick)
        return out
    from disagg_decider.sim.parallel import run_all

    def finished(i: int) -> None:
        if progress is not None:
            progress(MODES[i], len(requests))

    scored = run_all(simulate_and_score, [(s, m, requests) for m in MODES], jobs, finished)
    return dict(zip(MODES, scored, strict=True))


def simulate_and_score(
    s: Setup, mode: str, requests: reqs.Requests, progress: Callable[[int], None] | None = None
) -> metrics.ModeMetrics:
    """One mode simulated and scored against the workload's SLOs and GPU price."""
    w = s.resolved.workload
    outcome = simulate_mode(s, mode, requests, progress)
    usd = w.cost.usd_per_gpu_hour
    if w.cluster.heterogeneous:  # each pool's GPUs at its own price
        from disagg_decider.sim import hetero as het

        usd = het.usd_per_gpu_hour(s.resolved, s, mode)
    return metrics.summarize(outcome, requests, w.slo.ttft_ms, w.slo.tpot_ms, usd)


def gpus_of(s: Setup, mode: str) -> int:
    if mode == "colocated" and s.colocated_pools:
        return sum(p.config.gpus for p in s.colocated_pools)
    return s.colocated.gpus if mode == "colocated" else s.disaggregated.gpus


def goodput(
    s: Setup,
    mode: str,
    base: reqs.Requests,
    target: float,
    start_rate: float,
    ttft_slo_ms: float | None = None,
    tpot_slo_ms: float | None = None,
    steady: bool = True,
) -> float:
    """Highest rate (req/s) at which `target` of `base`'s requests, replayed at that rate,
    meet both SLOs (the workload's unless given). With `steady` (the default) only requests
    arriving in steady state count (`metrics.steady_window`): warm-up and drain would
    otherwise flatter the pools (an empty pool meets every SLO for a while at any rate)."""
    w = s.resolved.workload
    ttft = w.slo.ttft_ms if ttft_slo_ms is None else ttft_slo_ms
    tpot = w.slo.tpot_ms if tpot_slo_ms is None else tpot_slo_ms

    def attainment_at(rate: float) -> float:
        replayed = replay_at(base, rate)
        outcome = simulate_mode(s, mode, replayed)
        return metrics.attainment(outcome, replayed, ttft, tpot, steady=steady)[0]

    return max_rate(attainment_at, target, start_rate)
