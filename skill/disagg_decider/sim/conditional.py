"""Conditional disaggregation: a router threshold sends long prompts to a prefill pool.

The decode workers are colocated replicas (`sim.colocated.Replica`: chunked prefill into the
decode batch) that also take requests prefilled elsewhere. Each arrival's uncached prompt is
compared with the threshold T by the router:

- `isl_bounding` (Dynamo's default policy): u > T goes to the prefill pool, the rest to the
  decode worker with the least prompt work queued (as the colocated simulator routes);
- `prefill_load`: as `isl_bounding`, but a long prompt is kept local when every prefill replica
  is busy for longer than the local replica's queued prefill would take (Dynamo's policy that
  weighs the prefill pool's load; here its queue against the local one, in milliseconds).

A remote request is prefilled first come first served on the prefill replica free soonest
(the calculator's M/G/c pool), reserves a seat and its KV on the decode worker with the fewest
requests in flight among those with room (or waits, first come first served, for one), moves
its uncached KV over the link (`calc.transfer.transfer_ms`, alone on it: the calculator caps
ingress separately), and joins the decode batch at the next iteration boundary; that
iteration emits its first token.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc import kv, transfer
from disagg_decider.calc.kvpath import TransferPath
from disagg_decider.calc.prefill import prefill_ms
from disagg_decider.calc.step import Engine
from disagg_decider.sim.colocated import IDLE, ColocatedConfig, Replica, _Shared
from disagg_decider.sim.events import run_events
from disagg_decider.sim.outcome import Outcome
from disagg_decider.sim.requests import Requests

POLICIES = ("isl_bounding", "prefill_load")
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

    def __init__(self, index: int, shared: _Shared, heap: list, on_free) -> None:
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
    shared = _Shared(d_engine, requests, colo)
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
    local_ms_per_token = float(
        np.ravel(prefill_ms(d_engine, float(cfg.chunk_tokens), 0.0))[0] / cfg.chunk_tokens
    )
    long = (requests.uncached > cfg.threshold_tokens).tolist()
    free_at = [0.0] * cfg.prefill_replicas
    receiver = {}
    now_ms = [0.0]
    seq = [0]

    def send(worker: _Worker, rid: int, now: float) -> None:
        worker.reserve(rid)
        receiver[rid] = worker
        seq[0] += 1
        heapq.heappush(heap, (now + move[rid], _TRANSFER_DONE, seq[0], rid))

    def least_work() -> _Worker:
        return min(workers, key=lambda w: (w.prompt_tokens_left(now_ms[0]), w.in_flight))

    def arrive(rid: int, now: float) -> None:
        now_ms[0] = now
        if long[rid] and cfg.prefill_replicas:
            p = min(range(len(free_at)), key=free_at.__getitem__)
            if cfg.policy == "prefill_load":
                local = least_work()
                if free_at[p] - now > local.prompt_tokens_left(now) * local_ms_per_token:
                    local.arrive(rid, now)
                    return
            start = max(now, free_at[p])
            free_at[p] = start + service[rid]
            seq[0] += 1
            heapq.heappush(heap, (free_at[p], _PREFILL_DONE, seq[0], rid))
            return
        least_work().arrive(rid, now)

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
    return Outcome(
        mode="conditional",
        gpus=cfg.gpus,
        first_token_ms=np.asarray(shared.first_ms),
        done_ms=np.asarray(shared.done_ms),
        layout=cfg.layout(),
    )


def config_of(r, verdict, policy: str = "isl_bounding") -> ConditionalConfig | None:
    """The verdict's conditional layout as a simulated cluster; None unless it is conditional."""
    from disagg_decider.calc.kvpath import transfer_path

    k = verdict.conditional
    if k is None or k.layout != "conditional":
        return None
    return ConditionalConfig(
        threshold_tokens=int(k.threshold_tokens),
        prefill_replicas=k.prefill_replicas,
        prefill_tp=int(k.prefill_tp),
        decode_replicas=k.decode_replicas,
        decode_tp=k.decode_tp,
        chunk_tokens=int(k.chunk_tokens),
        max_batch=r.workload.efficiency.max_decode_batch,
        path=transfer_path(r),
        policy=policy,
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
