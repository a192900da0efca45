"""Conditional disaggregation: a router threshold sends long prompts to a prefill pool.

The decode workers are colocated replicas (`sim.colocated_replica.Replica`: chunked prefill into the
decode batch) that also take requests prefilled elsewhere. The router decides per arrival
whether to "bypass" the prefill pool (prefill locally, on the decode worker with the least
prompt work queued, as the colocated simulator routes) with one of Dynamo's policies
(`--router-conditional-disagg-config` `policy`; semantics from ai-dynamo/dynamo
`docs/components/router/router-disaggregated-serving.md`, summarised in
shared/reference/dynamo_llmd.md "Generation 2" and peers_2026_11.md "Dynamo router"):

- `isl_bounding` (the default): bypass iff the uncached prompt u <= T, the threshold the
  calculator prices (Dynamo's check is the strict eff_isl < eff_isl_threshold, one token
  apart). Dynamo also requires u / prompt < `eff_isl_ratio_threshold` (at most 1.0, so a prompt
  with no cached prefix never bypasses on length: ai-dynamo/dynamo
  lib/kv-router/src/conditional_disagg.rs, `IslBoundingPolicy`); `eff_isl_ratio_threshold`
  models that check when set (the request's prefix hit standing for the decode worker's
  cached overlap), and None leaves it out, as the calculator does;
- `prefill_load`: bypass iff the chosen prefill worker is busy, whatever the prompt's length;
- `isl_or_load`: bypass iff either holds, so a long prompt stays local while the prefill pool
  is backed up and a short one is local always.

The chosen prefill worker is the one free soonest (the FCFS pool below); it is busy when its
active prefill tokens (uncached tokens queued on it or in progress) exceed
`prefill_busy_tokens` (Dynamo: `prefill_busy_threshold` x the worker's
max_num_batched_tokens; `config_of` takes the deploy's prefill token budget and a threshold
of 1.0; with Dynamo's threshold unset the worker counts as never busy, here an infinite
`prefill_busy_tokens`).

A remote request is prefilled first come first served on the prefill replica free soonest
(the calculator's M/G/c pool), reserves a seat and its KV on the decode worker with the fewest
requests in flight among those with room (or waits, first come first served, for one), moves
its uncached KV over the link (`calc.physics.transfer.transfer_ms`, alone on it: the calculator caps
ingress separately), and joins the decode batch at the next iteration boundary; that
iteration emits its first token.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.physics import kv, transfer
from disagg_decider.calc.physics.kvpath import TransferPath
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas.prefill import prefill_ms
from disagg_decider.sim.colocated import ColocatedConfig
from disagg_decider.sim.colocated_replica import IDLE, Replica, Shared
from disagg_decider.sim.events import run_events
from disagg_decider.sim.outcome import Outcome
from disagg_decider.sim.requests import Requests

POLICIES = ("isl_bounding", "prefill_load", "isl_or_load")
_PREFILL_DONE, _TRANSFER_DONE = -1, -2  # event markers in the replicas' heap (index slot)


@dataclass(frozen=True)
class ConditionalConfig:
    threshold_tokens: int
    prefill_replicas: int
    prefill_tp: int
    decode_replicas: int
    decode_tp: int
    chunk_tokens: int
    max_batch: int
    path: TransferPath
    policy: str = "isl_bounding"
    prefill_busy_tokens: float = math.inf  # active prefill tokens above which a worker is busy
    eff_isl_ratio_threshold: float | None = None  # Dynamo's u / prompt cap; None: not modelled

    @property
    def gpus(self) -> int:
        return self.prefill_replicas * self.prefill_tp + self.decode_replicas * self.decode_tp

    def layout(self) -> str:
        return (
            f"T={self.threshold_tokens} ({self.policy}): {self.prefill_replicas}P x "
            f"TP{self.prefill_tp} + {self.decode_replicas}D x TP{self.decode_tp} prefilling "
            f"locally in chunks of {self.chunk_tokens}, KV over {self.path.kind}"
        )


class _Worker(Replica):
    """A decode worker: a colocated replica that also seats requests prefilled elsewhere."""

    def __init__(self, index: int, shared: Shared, heap: list, on_free) -> None:
        super().__init__(index, shared, heap)
        self.pending: list[int] = []  # transferred, joining at the next iteration boundary
        self.on_free = on_free  # a seat was freed: remote requests waiting may take it

    def has_room(self, rid: int) -> bool:
        s = self.s
        return self.seated == 0 or (
            self.seated < s.cfg.max_batch and self.kv_used + s.kv_need[rid] <= s.kv_capacity
        )

    def _finish(self, rid: int, now: float) -> None:
        super()._finish(rid, now)
        self.on_free(now)

    def reserve(self, rid: int) -> None:
        self.seated += 1
        self.kv_used += self.s.kv_need[rid]
        self.in_flight += 1

    def receive(self, rid: int, now: float) -> None:
        self.pending.append(rid)
        if self.kind == IDLE:
            self.plan(now)
        else:
            self._cut(now)

    def plan(self, now: float) -> None:
        joined = self.pending
        for rid in joined:
            self.batch.join(rid, float(self.s.prompt[rid]), self.s.output[rid])
        self.pending = []
        super().plan(now)
        for rid in joined:
            self.s.first_ms[rid] = now + self.first  # the first iteration they ride in


def simulate(
    p_engine: Engine, d_engine: Engine, requests: Requests, cfg: ConditionalConfig, progress=None
) -> Outcome:
    if cfg.policy not in POLICIES:
        raise ValueError(f"policy {cfg.policy!r}: expected one of {', '.join(POLICIES)}")
    colo = ColocatedConfig(
        replicas=cfg.decode_replicas,
        tp=cfg.decode_tp,
        chunk_tokens=cfg.chunk_tokens,
        max_batch=min(cfg.max_batch, cfg.chunk_tokens - 1),
    )
    shared = Shared(d_engine, requests, colo)
    heap: list = []
    waiting: deque[int] = deque()  # prefilled, no decode worker has a seat for its KV yet

    def seat_waiting(now: float) -> None:
        while waiting:
            rid = waiting[0]
            roomy = [w for w in workers if w.has_room(rid)]
            if not roomy:
                return
            waiting.popleft()
            send(min(roomy, key=lambda w: w.in_flight), rid, now)

    workers = [_Worker(i, shared, heap, seat_waiting) for i in range(cfg.decode_replicas)]
    uncached = requests.uncached.astype(float)
    service = np.broadcast_to(
        np.asarray(prefill_ms(p_engine, uncached, requests.cached.astype(float))), (len(requests),)
    ).tolist()
    size = kv.kv_bytes(p_engine.model, p_engine.kv_dtype, uncached)
    gb_per_s = cfg.path.gb_per_s(cfg.prefill_tp, cfg.decode_tp)
    move = np.broadcast_to(
        np.asarray(transfer.transfer_ms(size, gb_per_s, cfg.path.latency_ms)), (len(requests),)
    ).tolist()
    uncached_tokens = uncached.tolist()
    long_mask = requests.uncached > cfg.threshold_tokens
    if cfg.eff_isl_ratio_threshold is not None:  # Dynamo: mostly cached prompts only
        ratio = requests.uncached / np.maximum(requests.prompt, 1)
        long_mask = long_mask | (ratio >= cfg.eff_isl_ratio_threshold)
    long = long_mask.tolist()
    free_at = [0.0] * cfg.prefill_replicas
    active: list[deque] = [deque() for _ in range(cfg.prefill_replicas)]  # (done_ms, tokens)
    active_tokens = [0.0] * cfg.prefill_replicas
    receiver = {}
    seq = [0]
    sent = [0]
    check_isl = cfg.policy in ("isl_bounding", "isl_or_load")
    check_load = cfg.policy in ("prefill_load", "isl_or_load")

    def send(worker: _Worker, rid: int, now: float) -> None:
        worker.reserve(rid)
        receiver[rid] = worker
        seq[0] += 1
        heapq.heappush(heap, (now + move[rid], _TRANSFER_DONE, seq[0], rid))

    def least_work(now: float) -> _Worker:
        return min(workers, key=lambda w: (w.prompt_tokens_left(now), w.in_flight))

    def busy(p: int, now: float) -> bool:
        """Active prefill tokens on prefill worker p (queued or running) above the threshold."""
        queue = active[p]
        while queue and queue[0][0] <= now:
            active_tokens[p] -= queue.popleft()[1]
        return active_tokens[p] > cfg.prefill_busy_tokens

    def arrive(rid: int, now: float) -> None:
        if not cfg.prefill_replicas:
            least_work(now).arrive(rid, now)
            return
        p = min(range(len(free_at)), key=free_at.__getitem__)
        local = (check_isl and not long[rid]) or (check_load and busy(p, now))
        if local:
            least_work(now).arrive(rid, now)
            return
        sent[0] += 1
        start = max(now, free_at[p])
        free_at[p] = start + service[rid]
        active[p].append((free_at[p], uncached_tokens[rid]))
        active_tokens[p] += uncached_tokens[rid]
        seq[0] += 1
        heapq.heappush(heap, (free_at[p], _PREFILL_DONE, seq[0], rid))

    def on_event(event: tuple) -> None:
        now, index = event[0], event[1]
        if index == _PREFILL_DONE:
            rid = event[3]
            roomy = [w for w in workers if w.has_room(rid)]
            if waiting or not roomy:
                waiting.append(rid)
            else:
                send(min(roomy, key=lambda w: w.in_flight), rid, now)
        elif index == _TRANSFER_DONE:
            rid = event[3]
            receiver.pop(rid).receive(rid, now)
        else:
            worker = workers[index]
            if event[2] == worker.version:
                worker.run_ended(now)

    run_events(requests.arrival_ms.tolist(), heap, on_event, arrive, progress)
    share = sent[0] / len(requests) if len(requests) else 0.0
    return Outcome.of("conditional", cfg, shared, share_to_prefill=share)


def config_of(
    r,
    verdict,
    policy: str = "isl_bounding",
    threshold_tokens: int | None = None,
    prefill_busy_threshold: float = 1.0,
    eff_isl_ratio_threshold: float | None = None,
) -> ConditionalConfig | None:
    """The verdict's conditional layout as a simulated cluster; None unless it is conditional.

    `threshold_tokens` replaces the verdict's T on the same pools; a prefill worker is busy
    above `prefill_busy_threshold` x the prefill pool's token budget as `decide deploy` sets
    it (its max_num_batched_tokens), as Dynamo's `prefill_busy_threshold` is a fraction of it."""
    from disagg_decider.calc.physics.kvpath import transfer_path
    from disagg_decider.deploy.plan import prefill_token_budget

    k = verdict.conditional
    if k is None or k.layout != "conditional":
        return None
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
    budget = prefill_token_budget(r.workload.traffic.prompt_tokens.p99)
    return ConditionalConfig(
        threshold_tokens=int(k.threshold_tokens if threshold_tokens is None else threshold_tokens),
        prefill_replicas=k.prefill_replicas,
        prefill_tp=int(k.prefill_tp),
        decode_replicas=k.decode_replicas,
        decode_tp=k.decode_tp,
        chunk_tokens=int(k.chunk_tokens),
        max_batch=r.workload.efficiency.max_decode_batch,
        path=transfer_path(r),
        policy=policy,
        prefill_busy_tokens=prefill_busy_threshold * budget,
        eff_isl_ratio_threshold=eff_isl_ratio_threshold,
    )


def goodput(r, cfg: ConditionalConfig, base: Requests, target: float, start_rate: float) -> float:
    """Highest rate at which `target` of `base`'s requests, replayed at it, meet both SLOs in
    steady state (as `sim.run.goodput` measures the other modes)."""
    from disagg_decider.sim import metrics
    from disagg_decider.sim.goodput import max_rate, replay_at
    from disagg_decider.sim.run import engine

    w = r.workload
    p_engine, d_engine = engine(r, cfg.prefill_tp), engine(r, cfg.decode_tp)

    def attainment_at(rate: float) -> float:
        replayed = replay_at(base, rate)
        outcome = simulate(p_engine, d_engine, replayed, cfg)
        return metrics.attainment(outcome, replayed, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]

    return max_rate(attainment_at, target, start_rate)


def simulate_and_score(r, cfg: ConditionalConfig, requests: Requests, progress=None):
    """The layout simulated on `requests` and scored against the workload's SLOs and GPU
    price (as `sim.run.simulate_and_score` scores the other modes); with the share of
    requests the router sent to the prefill pool."""
    from disagg_decider.sim import metrics
    from disagg_decider.sim.run import engine

    w = r.workload
    outcome = simulate(engine(r, cfg.prefill_tp), engine(r, cfg.decode_tp), requests, cfg, progress)
    scored = metrics.summarize(
        outcome, requests, w.slo.ttft_ms, w.slo.tpot_ms, w.cost.usd_per_gpu_hour
    )
    return scored, float(outcome.share_to_prefill or 0.0)


def no_pools_reason(verdict) -> str:
    """Why the verdict has no conditional pools to simulate, in words a user acts on."""
    k = verdict.conditional
    if k is None:
        return "the verdict has no conditional layout (heterogeneous or infeasible cluster)"
    return (
        f"the threshold search chose the {k.layout} layout ({k.threshold_reason}), so there are "
        "no conditional pools to simulate"
    )
