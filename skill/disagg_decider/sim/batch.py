"""A continuous decode batch whose iterations can be fast-forwarded between events.

Every running sequence gains one token per iteration, so one global iteration counter `step`
describes them all: a sequence that joined at step j with context c0 has context
c0 + (step - j), and finishes at step j + tokens. The sum of contexts is then
`context_base + size * step`, and the next finish is the top of a heap. Between two events
(a join, a finish, an arrival that changes what an iteration carries) nothing about the batch
changes but its context, which grows by one per iteration, so a run of k iterations is
planned as one event instead of k.
"""

from __future__ import annotations

import heapq


class DecodeBatch:
    __slots__ = ("context_base", "finishes", "size", "step")

    def __init__(self) -> None:
        self.step = 0
        self.size = 0
        self.context_base = 0.0
        self.finishes: list[tuple[int, int, float]] = []  # (finish step, request, base term)

    def join(self, request: int, context: float, tokens: int) -> None:
        """Add a sequence with `context` tokens of KV that will decode `tokens` more tokens."""
        base = context - self.step
        heapq.heappush(self.finishes, (self.step + tokens, request, base))
        self.context_base += base
        self.size += 1

    def mean_context(self, ahead: int = 0) -> float:
        """Mean context of the batch `ahead` iterations from now."""
        if self.size == 0:
            return 0.0
        return self.context_base / self.size + self.step + ahead

    def steps_to_next_finish(self) -> int:
        return self.finishes[0][0] - self.step

    def advance(self, iterations: int) -> None:
        self.step += iterations

    def pop_finished(self) -> list[int]:
        done = []
        while self.finishes and self.finishes[0][0] <= self.step:
            _, request, base = heapq.heappop(self.finishes)
            self.context_base -= base
            self.size -= 1
            done.append(request)
        return done


def steps_within(first_ms: float, slope_ms: float, elapsed_ms: float, limit: int) -> int:
    """Iterations of a run (the j-th lasting first_ms + slope_ms * j) done by the one in flight.

    The smallest m with m * first + slope * m (m - 1) / 2 >= elapsed, between 1 and limit: an
    iteration in progress is never cut, so an event mid-iteration waits for its end. (`run_ms`
    and the clamps are spelled out: this runs on most arrivals.)
    """
    if elapsed_ms <= 0.0:
        return 1
    if -1e-12 < slope_ms < 1e-12:
        m = int(elapsed_ms / first_ms)
    else:
        a, b = slope_ms / 2.0, first_ms - slope_ms / 2.0
        disc = b * b + 4.0 * a * elapsed_ms
        m = int((-b + disc**0.5) / (2.0 * a)) if disc > 0 else limit
    m = m - 1 if m > 0 else 0
    while m < limit and m * first_ms + slope_ms * m * (m - 1) / 2.0 < elapsed_ms:
        m += 1
    if m > limit:
        m = limit
    return m if m > 1 else 1


def run_ms(first_ms: float, slope_ms: float, iterations: int) -> float:
    """Duration of `iterations` iterations whose times grow linearly (the j-th: first + slope j)."""
    return iterations * first_ms + slope_ms * iterations * (iterations - 1) / 2.0
