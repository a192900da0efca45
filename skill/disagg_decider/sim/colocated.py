"""Colocated serving: replicas that run prefill and decode in the same iterations.

Each replica is an engine with continuous batching, as vLLM and SGLang run it:

- `chunked` (the default, vLLM's chunked prefill, Sarathi-Serve): every iteration has a token
  budget (`max_num_batched_tokens`) shared by one token per decoding sequence and as many
  prompt tokens as fit, taken first-come first-served from prompts waiting to be prefilled,
  several short prompts packed into one iteration, long ones split into chunks;
- `prefill-first` (vLLM before chunked prefill, DistServe's colocated baseline): whenever a
  prompt waits, the next iteration prefills whole waiting prompts and every decode stalls.

A request is admitted (takes a seat and reserves the KV of its prompt plus its output) when
its first prompt tokens are scheduled; a replica holds at most `max_batch` sequences and the KV
capacity of `Engine.kv_capacity_bytes()`. Reserving the whole output up front stands in for
vLLM's preemption: no recomputation is simulated. The router (`sim.routing`, `least-work` by
default) sends each arrival to the replica with the fewest prompt tokens waiting to be
prefilled (then the fewest requests in flight), which makes the pool's prefill one M/G/c queue
as the calculator prices it.

Step times are the calculator's `iteration_ms` (through `steps`). A prompt's first token is
emitted by the iteration that computes its last prompt token, as in the calculator's
colocated model; it then decodes its remaining output tokens one per iteration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from heapq import heappop
from typing import Literal

from disagg_decider.calc.physics.step import Engine
from disagg_decider.gcpause import paused_collector
from disagg_decider.sim.batch import steps_within
from disagg_decider.sim.colocated_replica import CHUNK, Replica, Shared
from disagg_decider.sim.outcome import Outcome
from disagg_decider.sim.requests import Requests
from disagg_decider.sim.routing import Picker

Policy = Literal["chunked", "prefill-first"]


@dataclass(frozen=True)
class ColocatedConfig:
    replicas: int
    tp: int
    chunk_tokens: int  # per-iteration token budget (max_num_batched_tokens)
    max_batch: int  # sequences in flight per replica (max_num_seqs)
    policy: Policy = "chunked"
    router: str = "least-work"  # sim.routing: fewest requests in flight, round-robin, random
    dp: int = 1  # tp counts GPUs per replica: dp attention ranks of tp // dp GPUs
    ep: int = 1

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp

    def layout(self) -> str:
        from disagg_decider.calc.physics.parallel import label

        policy = f"chunk {self.chunk_tokens}" if self.policy == "chunked" else "prefill-first"
        shape = label(self.tp // self.dp, self.dp, self.ep)
        return f"{self.replicas} x {shape}, {policy}, max batch {self.max_batch}"


def simulate(engine: Engine, requests: Requests, cfg: ColocatedConfig, progress=None) -> Outcome:
    """Serve `requests` on `cfg.replicas` replicas of `engine`; times in ms from the first arrival.

    `progress(done)` is called now and then with the number of arrivals routed so far.
    """
    shared = Shared(engine, requests, cfg)
    heap: list = []
    replicas = [Replica(i, shared, heap) for i in range(cfg.replicas)]
    picker = Picker(cfg.router, cfg.replicas)
    now_ms = [0.0]

    def shortest() -> int:
        # Least work: the fewest prompt tokens still to prefill (what a TTFT-aware router such
        # as Dynamo's KV router or llm-d's queue scorer weighs), then the fewest in flight.
        now = now_ms[0]
        best = best_left = best_flight = -1
        for replica in replicas:
            left = replica.queued_tokens  # replica.prompt_tokens_left(now), inlined
            if replica.kind == CHUNK and replica.queue:
                done = steps_within(replica.first, replica.slope, now - replica.t0, replica.k) - 1
                if done > 0:
                    left -= done * replica.tokens
            flight = replica.in_flight
            if best < 0 or left < best_left or (left == best_left and flight < best_flight):
                best, best_left, best_flight = replica.index, left, flight
        return best

    # The event loop of `events.run_events`, written out here: the run ends are dispatched
    # without a handler call (an event due at an arrival's instant still goes first), and a
    # single replica needs no router.
    # `least-work` picks what `shortest` names (Picker.pick, without the call)
    route = shortest if cfg.router == "least-work" else functools.partial(picker.pick, shortest)
    only = replicas[0] if len(replicas) == 1 else None
    with paused_collector():
        for i, arrival in enumerate(requests.arrival_ms.tolist()):
            while heap and heap[0][0] <= arrival:
                now, r, version = heappop(heap)
                replica = replicas[r]
                if version == replica.version:
                    replica.run_ended(now)
            if only is not None:
                only.arrive(i, arrival)
            else:
                now_ms[0] = arrival
                replicas[route()].arrive(i, arrival)
            if progress is not None and not (i + 1) & 0xFFF:
                progress(i + 1)
        while heap:
            now, r, version = heappop(heap)
            replica = replicas[r]
            if version == replica.version:
                replica.run_ended(now)
    return Outcome.of("colocated", cfg, shared)
