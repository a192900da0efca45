"""One colocated replica in the simulator: its iterations (chunked prefill or prefill-first), the
prompts waiting for their prefill, the seats and KV it admits them to, and the per-request data
and step tables every replica of a pool reads (`Shared`).

`colocated.py` routes a pool's arrivals to these replicas and runs their events;
`sim.conditional` uses them as its decode workers.
"""

from __future__ import annotations

from collections import deque
from heapq import heappush
from typing import TYPE_CHECKING

import numpy as np

from disagg_decider.calc.physics.step import Engine
from disagg_decider.sim.batch import DecodeBatch, run_ms, steps_within
from disagg_decider.sim.requests import Requests
from disagg_decider.sim.steps import CONTEXT_POINTS, DecodeTable, MixedTable

if TYPE_CHECKING:  # the pool's configuration, which lives with the pool (`colocated.py`)
    from disagg_decider.sim.colocated import ColocatedConfig

IDLE, DECODE, CHUNK, SINGLE = 0, 1, 2, 3
CONTEXT_LAST = CONTEXT_POINTS - 2  # the decode table's last segment


class Shared:
    """Per-request data and step tables every replica reads."""

    def __init__(self, engine: Engine, requests: Requests, cfg: ColocatedConfig) -> None:
        self.cfg = cfg
        self.prompt = requests.prompt.tolist()
        self.output = requests.output.tolist()
        self.cached = requests.cached.tolist()
        self.uncached = requests.uncached.tolist()
        total = requests.prompt + requests.output
        self.kv_need = np.asarray(engine.kv_bytes_held(total), dtype=float).tolist()
        self.kv_capacity = float(np.ravel(engine.kv_capacity_bytes())[0])
        max_context = float(total.max())
        self.decode = DecodeTable(engine, cfg.max_batch, max_context)
        prompt_tokens = cfg.chunk_tokens
        if cfg.policy == "prefill-first":
            prompt_tokens = max(cfg.chunk_tokens, int(requests.uncached.max()))
        self.mixed = MixedTable(
            engine, cfg.max_batch, max_context, prompt_tokens, float(requests.prompt.max())
        )
        n = len(requests)
        self.first_ms = [0.0] * n
        self.done_ms = [0.0] * n


class _Entry:
    """A prompt waiting for (or part-way through) its prefill."""

    __slots__ = ("admitted", "context", "left", "rid")

    def __init__(self, rid: int, cached: int, uncached: int) -> None:
        self.rid = rid
        self.left = uncached  # prompt tokens still to compute
        self.context = cached  # tokens before the next one to compute
        self.admitted = False


class Replica:
    """One colocated engine. The hot methods read their settings from plain attributes and
    spell out `DecodeBatch`'s arithmetic (same operations in the same order, so results stay
    bit-identical): they run a few times per simulated request."""

    def __init__(self, index: int, shared: Shared, heap: list) -> None:
        self.index = index
        self.s = shared
        self.heap = heap
        self.queue: deque[_Entry] = deque()
        self.batch = DecodeBatch()
        self.seated = 0
        self.kv_used = 0.0
        self.in_flight = 0
        self.version = 0
        self.kind = IDLE
        self.t0 = self.first = self.slope = 0.0
        self.k = 0
        self.tokens = 0
        self.pieces: list[tuple[_Entry, int]] = []
        self.queued_tokens = 0  # prompt tokens still to compute, over every queued entry
        cfg = shared.cfg
        self.chunked = cfg.policy == "chunked"
        self.chunk_tokens = cfg.chunk_tokens
        self.max_batch = cfg.max_batch
        self.kv_capacity = shared.kv_capacity
        self.kv_need = shared.kv_need
        self.mixed_ms = shared.mixed.ms
        self.decode_ms = shared.decode.ms
        self.decode_rows = shared.decode.rows
        self.decode_inv_step = shared.decode.inv_step

    # --- events ---------------------------------------------------------------------------------

    def arrive(self, rid: int, now: float) -> None:
        s = self.s
        uncached = s.uncached[rid]
        queue = self.queue
        queue.append(_Entry(rid, s.cached[rid], uncached))
        self.queued_tokens += uncached
        self.in_flight += 1
        kind = self.kind
        if kind == IDLE:
            self.plan(now)
        elif kind == DECODE and len(queue) == 1:
            self._cut(now)  # the new prompt joins at the next iteration boundary

    def run_ended(self, now: float) -> None:
        batch, kind = self.batch, self.kind
        if kind == CHUNK:
            k = self.k
            batch.step += k
            head = self.queue[0]
            done = k * self.tokens
            head.left -= done
            head.context += done
            self.queued_tokens -= done
        elif kind == DECODE:
            batch.step += self.k
        elif kind == SINGLE:
            if self.chunked:
                batch.step += 1
            queued = self.queued_tokens
            for entry, take in self.pieces:
                entry.left -= take
                entry.context += take
                queued -= take
                if entry.left == 0:
                    # self._prompt_done(entry, now), with batch.join inlined
                    s, rid = self.s, entry.rid
                    s.first_ms[rid] = now
                    output = s.output[rid]
                    if output > 1:
                        step = batch.step
                        base = float(s.prompt[rid]) - step
                        heappush(batch.finishes, (step + output - 1, rid, base))
                        batch.context_base += base
                        batch.size += 1
                    else:
                        self._finish(rid, now)
            self.queued_tokens = queued
            queue = self.queue
            while queue and queue[0].left == 0:
                queue.popleft()
            self.pieces = []
        finishes = batch.finishes
        if finishes and finishes[0][0] <= batch.step:  # checked here: most steps end none
            for rid in batch.pop_finished():
                self._finish(rid, now)
        self.plan(now)

    def prompt_tokens_left(self, now: float) -> int:
        """Prompt tokens still to compute here, counting the iterations of a chunk run done
        by `now` (the router's measure of queued work)."""
        left = self.queued_tokens
        if self.kind == CHUNK and self.queue:
            done = steps_within(self.first, self.slope, now - self.t0, self.k) - 1
            if done > 0:
                left -= done * self.tokens
        return left

    # --- scheduling -----------------------------------------------------------------------------

    def plan(self, now: float) -> None:
        """Choose what the next iterations carry and schedule the end of that run."""
        batch = self.batch
        size = batch.size
        queue = self.queue
        if self.chunked:
            room = self.chunk_tokens - size
            if room > 0 and queue:
                head = queue[0]
                if head.admitted or self._admit(head):
                    left = head.left
                    if left > room:
                        k = (left - 1) // room
                        if size:
                            to_finish = batch.finishes[0][0] - batch.step
                            if to_finish < k:
                                k = to_finish
                        # Chunk runs are never cut short, so only their total matters: k
                        # times the middle iteration, exact while time grows linearly along
                        # the run.
                        half = (k - 1) / 2.0
                        mean = batch.context_base / size + batch.step + half if size else 0.0
                        mid = self.mixed_ms(size, mean, room, head.context + half * room)
                        self.tokens = room
                        # self._start(now, CHUNK, k, mid, mid), inlined
                        self.kind, self.t0, self.k, self.first = CHUNK, now, k, mid
                        slope = self.slope = (mid - mid) / (k - 1) if k > 1 else 0.0
                        self.version = version = self.version + 1
                        end = now + k * mid + slope * k * (k - 1) / 2.0
                        heappush(self.heap, (end, self.index, version))
                        return
                    self._pack(now, room, size, stall_decodes=False)
                    return
        elif queue and self._admit(queue[0]):
            self._pack(now, max(self.chunk_tokens, queue[0].left), 0, stall_decodes=True)
            return
        if size:
            step = batch.step
            k = batch.finishes[0][0] - step
            mean = batch.context_base / size + step
            # first = self.decode_ms(size, mean), inlined (steps.DecodeTable.ms)
            row, inv_step, i_last = self.decode_rows[size], self.decode_inv_step, CONTEXT_LAST
            x = mean * inv_step
            i = int(x)
            if i > i_last:
                i = i_last
            lo = row[i]
            first = lo + (row[i + 1] - lo) * (x - i)
            # self._start(now, DECODE, k, first, last), inlined
            self.kind, self.t0, self.k, self.first = DECODE, now, k, first
            if k > 1:
                x = (mean + (k - 1)) * inv_step  # last = self.decode_ms(size, mean + (k - 1))
                i = int(x)
                if i > i_last:
                    i = i_last
                lo = row[i]
                last = lo + (row[i + 1] - lo) * (x - i)
                slope = self.slope = (last - first) / (k - 1)
            else:
                slope = self.slope = 0.0
            self.version = version = self.version + 1
            end = now + k * first + slope * k * (k - 1) / 2.0
            heappush(self.heap, (end, self.index, version))
        else:
            self.kind = IDLE

    def _pack(self, now: float, room: int, size: int, stall_decodes: bool) -> None:
        """One iteration carrying prompt tokens from the head of the queue onwards.

        Chunked: pieces of prompts fill the room. Prefill-first: whole prompts only, and the
        decode batch sits this pass out. The pass's prompt context is the one that gives the
        pieces' exact causal attention work (clamped at zero when short prompts share a pass).
        """
        pieces = []
        left = room
        work = 0.0
        for entry in self.queue:
            if not entry.admitted and not self._admit(entry):
                break
            take = entry.left
            if left < take:
                take = left
                if stall_decodes:
                    break
            pieces.append((entry, take))
            work += take * entry.context + take * take / 2.0
            left -= take
            if left == 0:
                break
        tokens = room - left
        prompt_context = max((work - tokens * tokens / 2.0) / tokens, 0.0)
        if stall_decodes:
            ms = self.mixed_ms(0, 0.0, tokens, prompt_context)
        else:
            batch = self.batch
            mean = batch.context_base / size + batch.step if size else 0.0
            ms = self.mixed_ms(size, mean, tokens, prompt_context)
        self.pieces = pieces
        # self._start(now, SINGLE, 1, ms, ms), inlined
        self.kind, self.t0, self.k, self.first = SINGLE, now, 1, ms
        self.slope = 0.0
        self.version = version = self.version + 1
        end = now + ms  # k = 1, slope 0: now + k * first + slope * k * (k - 1) / 2
        heappush(self.heap, (end, self.index, version))

    def _start(self, now: float, kind: int, k: int, first: float, last: float) -> None:
        self.kind, self.t0, self.k, self.first = kind, now, k, first
        slope = self.slope = (last - first) / (k - 1) if k > 1 else 0.0
        self.version = version = self.version + 1
        end = now + k * first + slope * k * (k - 1) / 2.0  # batch.run_ms, inlined: hot path
        heappush(self.heap, (end, self.index, version))

    def _cut(self, now: float) -> None:
        """End the current run after the iteration in flight at `now`."""
        m = steps_within(self.first, self.slope, now - self.t0, self.k)
        if m < self.k:
            self.k = m
            self.version += 1
            end = self.t0 + run_ms(self.first, self.slope, m)
            heappush(self.heap, (end, self.index, self.version))

    def _admit(self, entry: _Entry) -> bool:
        if entry.admitted:
            return True
        need = self.kv_need[entry.rid]
        seated = self.seated
        if seated and (seated >= self.max_batch or self.kv_used + need > self.kv_capacity):
            return False
        entry.admitted = True  # an empty replica takes any request, even one that overfills it
        self.seated = seated + 1
        self.kv_used += need
        return True

    def _prompt_done(self, entry: _Entry, now: float) -> None:
        s, rid = self.s, entry.rid
        s.first_ms[rid] = now
        output = s.output[rid]
        if output > 1:
            self.batch.join(rid, float(s.prompt[rid]), output - 1)
        else:
            self._finish(rid, now)

    def _finish(self, rid: int, now: float) -> None:
        self.s.done_ms[rid] = now
        self.seated -= 1
        self.kv_used -= self.kv_need[rid]
        self.in_flight -= 1
