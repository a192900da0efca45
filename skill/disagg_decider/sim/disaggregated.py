"""Disaggregated serving: a prefill pool, a KV transfer over the link, a decode pool.

- Prefill: each replica serves one prompt at a time, first come first served; its service time
  is `calc.replicas.prefill.prefill_ms` of the uncached prompt after its cached prefix, so
  prefix-cache hits shorten it. The router (`sim.routing`, `least-work` by default) sends each
  arrival to the replica that will be free soonest, which makes the pool the calculator's M/G/c
  queue.
- Transfer: when a prompt is done, a decode replica with a free seat and room for the request's
  KV (prompt plus output, `Engine.kv_bytes_held`) is reserved, or the request waits for one,
  first come first served. Its uncached KV (`calc.physics.kv.kv_bytes`) then moves over the path the
  calculator picks (`calc.physics.kvpath.transfer_path`), taking `calc.physics.transfer.transfer_ms`
  when it has the link to itself. Transfers into one decode replica share its ingress equally
  (processor sharing, O(log n) per event: `_Link`), the limit the calculator prices. With layer-wise
  streaming (TensorRT-LLM; `efficiency.kv_transfer`) only the part the calculator's
  `layerwise_exposed_ms` leaves exposed after prefill goes through the shared link.
- Decode: continuous batching of up to `max_batch` sequences; a transferred request joins at
  the next iteration boundary. Its first decode iteration emits the first token, as the
  calculator counts it (TTFT = prefill + transfer + one decode step).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush

import numpy as np

from disagg_decider.calc.physics import kv, transfer
from disagg_decider.calc.physics.kvpath import TransferPath
from disagg_decider.calc.physics.parallel import label
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas.prefill import prefill_ms
from disagg_decider.gcpause import paused_collector
from disagg_decider.sim.batch import DecodeBatch, run_ms, steps_within
from disagg_decider.sim.outcome import Outcome
from disagg_decider.sim.requests import Requests
from disagg_decider.sim.routing import Picker
from disagg_decider.sim.steps import DecodeTable

PREFILL_DONE, TRANSFER_DONE, RUN_END = 0, 1, 2


@dataclass(frozen=True)
class DisaggregatedConfig:
    prefill_replicas: int
    prefill_tp: int
    decode_replicas: int
    decode_tp: int
    max_batch: int  # sequences per decode replica
    path: TransferPath
    layerwise: bool = False
    router: str = "least-work"  # sim.routing: how a prompt picks its prefill replica
    # prefill_tp / decode_tp count GPUs per replica; a DP-attention replica holds dp ranks of
    # tp // dp GPUs each, experts over ep GPUs (calc/physics/parallel.py).
    prefill_dp: int = 1
    decode_dp: int = 1
    prefill_ep: int = 1
    decode_ep: int = 1
    prefill_gpu: str = ""  # set when the pools run different GPU types (calc/modes/hetero.py)
    decode_gpu: str = ""

    @property
    def gpus(self) -> int:
        return self.prefill_replicas * self.prefill_tp + self.decode_replicas * self.decode_tp

    @property
    def senders_tp(self) -> tuple[int, int]:
        """Attention TP on each side: the ranks one request's KV lives on and moves between
        (`TransferPath.gb_per_s`, as the calculator's search prices a transfer)."""
        return self.prefill_tp // self.prefill_dp, self.decode_tp // self.decode_dp

    def layout(self) -> str:
        p_tp, d_tp = self.senders_tp
        p = label(p_tp, self.prefill_dp, self.prefill_ep)
        d = label(d_tp, self.decode_dp, self.decode_ep)
        if self.prefill_gpu:
            p, d = f"{p} on {self.prefill_gpu}", f"{d} on {self.decode_gpu}"
        return (
            f"{self.prefill_replicas}P x {p} + {self.decode_replicas}D x {d}, "
            f"max batch {self.max_batch}, KV over {self.path.kind}"
        )


class _Sim:
    def __init__(
        self, p_engine: Engine, d_engine: Engine, requests: Requests, cfg: DisaggregatedConfig
    ) -> None:
        self.cfg = cfg
        self.heap: list = []
        self.seq = 0
        n = len(requests)
        self.prompt = requests.prompt.tolist()
        self.output = requests.output.tolist()
        uncached = requests.uncached.astype(float)
        service = np.asarray(prefill_ms(p_engine, uncached, requests.cached.astype(float)))
        self.service_ms = np.broadcast_to(service, (n,)).tolist()
        size = kv.kv_bytes(p_engine.model, p_engine.kv_dtype, uncached)
        gb_per_s = cfg.path.gb_per_s(*cfg.senders_tp)
        alone = np.asarray(transfer.transfer_ms(size, gb_per_s, cfg.path.latency_ms))
        if cfg.layerwise:
            alone = np.asarray(
                transfer.layerwise_exposed_ms(
                    size, gb_per_s, cfg.path.latency_ms, service, p_engine.model.layers
                )
            )
        self.transfer_alone_ms = np.broadcast_to(alone, (n,)).tolist()
        total = requests.prompt + requests.output
        self.kv_need = np.asarray(d_engine.kv_bytes_held(total), dtype=float).tolist()
        self.kv_capacity = float(np.ravel(d_engine.kv_capacity_bytes())[0])
        self.table = DecodeTable(d_engine, cfg.max_batch, float(total.max()))
        self.first_ms = [0.0] * n
        self.done_ms = [0.0] * n
        self.prefill_free_at = [0.0] * cfg.prefill_replicas
        self.picker = Picker(cfg.router, cfg.prefill_replicas)
        self.decoders = [_Decoder(j, self) for j in range(cfg.decode_replicas)]
        self.waiting: deque[int] = deque()  # prefilled, no decode replica has room yet
        # One receiver per decode DP rank: each rank takes its requests' KV on its own NICs,
        # so a replica's ingress is dp x one transfer's bandwidth, as the calculator prices it.
        self.ranks = cfg.decode_dp
        self.link = _Link(cfg.decode_replicas * cfg.decode_dp, self)

    def push(self, time: float, kind: int, a: int, b: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, self.seq, kind, a, b))

    def free_soonest(self) -> int:
        """The prefill replica free soonest (the first of equals)."""
        free = self.prefill_free_at
        return free.index(min(free))

    def arrive(self, rid: int, now: float) -> None:
        free = self.prefill_free_at
        p = self.picker.pick(self.free_soonest)
        start = max(now, free[p])
        free[p] = start + self.service_ms[rid]
        self.push(free[p], PREFILL_DONE, rid, 0)

    def prefill_done(self, rid: int, now: float) -> None:
        if self.waiting or not self._reserve(rid, now):
            self.waiting.append(rid)

    def _reserve(self, rid: int, now: float) -> bool:
        """Pick the decode replica with the fewest seats taken among those with room."""
        need = self.kv_need[rid]
        best = None
        for d in self.decoders:
            fits = d.seated == 0 or (
                d.seated < self.cfg.max_batch and d.kv_used + need <= self.kv_capacity
            )
            if fits and (best is None or d.seated < best.seated):
                best = d
        if best is None:
            return False
        best.seated += 1
        best.kv_used += need
        base = best.index * self.ranks
        rank = min(range(base, base + self.ranks), key=lambda k: len(self.link.ends[k]))
        self.link.start(rid, rank, now)
        return True

    def seats_freed(self, now: float) -> None:
        while self.waiting and self._reserve(self.waiting[0], now):
            self.waiting.popleft()


class _Link:
    """KV transfers in flight into each decode replica, sharing its ingress equally.

    Every transfer runs on min(prefill attention TP, decode attention TP) NICs
    (`TransferPath.gb_per_s`, its time alone `transfer_ms`), and the transfers into one receiver
    share those NICs: processor sharing per receiver, the ingress limit the calculator prices
    (`search.ingress_rate_per_s`). A receiver is one decode DP rank (one per TP-only replica);
    a request's KV goes to the rank of its replica with the fewest transfers in flight.
    Each receiver keeps a virtual clock that advances at 1 / (transfers in flight) of real
    time; a transfer ends when the clock has advanced by its time alone. Only the receiver's
    earliest end is an event, so a start or an end costs O(log n), however many transfers
    share the link.
    """

    def __init__(self, receivers: int, sim: _Sim) -> None:
        self.sim = sim
        self.clock = [0.0] * receivers  # virtual ms of work done per transfer in flight
        self.since = [0.0] * receivers
        self.ends: list[list[tuple[float, int]]] = [[] for _ in range(receivers)]
        self.version = [0] * receivers

    def _advance(self, r: int, now: float) -> None:
        n = len(self.ends[r])
        if n:
            self.clock[r] += (now - self.since[r]) / n
        self.since[r] = now

    def _schedule(self, r: int) -> None:
        self.version[r] += 1
        heap = self.ends[r]
        if heap:
            left = max(heap[0][0] - self.clock[r], 0.0)
            self.sim.push(self.since[r] + left * len(heap), TRANSFER_DONE, r, self.version[r])

    def start(self, rid: int, receiver: int, now: float) -> None:
        self._advance(receiver, now)
        finish = self.clock[receiver] + self.sim.transfer_alone_ms[rid]
        heapq.heappush(self.ends[receiver], (finish, rid))
        self._schedule(receiver)

    def finished(self, receiver: int, version: int, now: float) -> list[int]:
        """The transfers into `receiver` that end now (none for a stale event)."""
        if version != self.version[receiver]:
            return []
        self._advance(receiver, now)
        heap = self.ends[receiver]
        # The event was scheduled for the earliest end: it ends now whatever rounding left on
        # the clock (waiting for the last 1e-12 ms would never advance a large clock), and so
        # does any other transfer due at the same virtual time.
        done = [heapq.heappop(heap)[1]] if heap else []
        tolerance = 1e-9 * max(1.0, abs(self.clock[receiver]))
        while heap and heap[0][0] <= self.clock[receiver] + tolerance:
            done.append(heapq.heappop(heap)[1])
        self._schedule(receiver)
        return done


class _Decoder:
    """One decode replica: a continuous batch fast-forwarded between joins and finishes.

    `run_ended` and `plan` spell out `DecodeBatch`'s and `run_ms`'s arithmetic (the same
    operations in the same order): they run about twice per simulated request."""

    def __init__(self, index: int, sim: _Sim) -> None:
        self.index = index
        self.sim = sim
        self.batch = DecodeBatch()
        self.seated = 0
        self.kv_used = 0.0
        self.joining: list[int] = []
        self.running = False
        self.version = 0
        self.t0 = self.first = self.slope = 0.0
        self.k = 0

    def join(self, rid: int, now: float) -> None:
        self.joining.append(rid)
        if not self.running:
            self.plan(now)
        else:
            m = steps_within(self.first, self.slope, now - self.t0, self.k)
            if m < self.k:
                self._schedule(m)

    def run_ended(self, now: float) -> None:
        sim, batch = self.sim, self.batch
        step = batch.step = batch.step + self.k
        finishes = batch.finishes
        if finishes and finishes[0][0] <= step:
            done_ms, kv_need = sim.done_ms, sim.kv_need
            for rid in batch.pop_finished():
                done_ms[rid] = now
                self.seated -= 1
                self.kv_used -= kv_need[rid]
            self.plan(now)
            sim.seats_freed(now)
        else:
            self.plan(now)

    def plan(self, now: float) -> None:
        sim, batch = self.sim, self.batch
        new = self.joining
        if new:
            prompt, output = sim.prompt, sim.output
            for rid in new:
                batch.join(rid, float(prompt[rid]), output[rid])
            self.joining = []
        size = batch.size
        if size == 0:
            self.running = False
            return
        step = batch.step
        k = batch.finishes[0][0] - step
        mean = batch.context_base / size + step
        ms = sim.table.ms
        first = ms(size, mean)
        if new:
            first_ms = sim.first_ms
            for rid in new:
                first_ms[rid] = now + first
        self.running = True
        self.t0, self.first = now, first
        if k > 1:
            slope = self.slope = (ms(size, mean + (k - 1)) - first) / (k - 1)
        else:
            slope = self.slope = 0.0
        # self._schedule(k), inlined
        self.k = k
        self.version = version = self.version + 1
        sim.seq = seq = sim.seq + 1
        end = now + (k * first + slope * k * (k - 1) / 2.0)
        heappush(sim.heap, (end, seq, RUN_END, self.index, version))

    def _schedule(self, k: int) -> None:
        self.k = k
        self.version += 1
        end = self.t0 + run_ms(self.first, self.slope, k)
        self.sim.push(end, RUN_END, self.index, self.version)


def simulate(
    p_engine: Engine,
    d_engine: Engine,
    requests: Requests,
    cfg: DisaggregatedConfig,
    progress=None,
) -> Outcome:
    sim = _Sim(p_engine, d_engine, requests, cfg)
    decoders, link = sim.decoders, sim.link

    heap, arrive = sim.heap, sim.arrive

    def handle(now: float, kind: int, a: int, b: int) -> None:
        if kind == RUN_END:
            decoder = decoders[a]
            if b == decoder.version:
                decoder.run_ended(now)
        elif kind == PREFILL_DONE:
            sim.prefill_done(a, now)
        else:
            for rid in link.finished(a, b, now):
                decoders[a // sim.ranks].join(rid, now)

    # The event loop of `events.run_events`, written out: events are unpacked in place.
    with paused_collector():
        for i, arrival in enumerate(requests.arrival_ms.tolist()):
            while heap and heap[0][0] <= arrival:
                now, _, kind, a, b = heappop(heap)
                handle(now, kind, a, b)
            arrive(i, arrival)
            if progress is not None and not (i + 1) & 0xFFF:
                progress(i + 1)
        while heap:
            now, _, kind, a, b = heappop(heap)
            handle(now, kind, a, b)
    return Outcome.of("disaggregated", cfg, sim)
