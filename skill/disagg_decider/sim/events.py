"""The event loop both simulated modes run: arrivals and timed events, in time order."""

from __future__ import annotations

import heapq
from collections.abc import Callable

Progress = Callable[[int], None] | None


def run_events(
    arrivals_ms: list[float],
    heap: list,
    on_event: Callable[[tuple], None],
    on_arrival: Callable[[int, float], None],
    progress: Progress = None,
) -> None:
    """Hand out every arrival and every event on `heap` (tuples led by their time) in time
    order, until both run dry; handlers may push new events.

    An event due at the same instant as an arrival goes first, so a replica frees its seats
    before the router picks one. `progress(done)` hears the arrivals handed out, every 4096.
    """
    n = len(arrivals_ms)
    i = 0
    pop, inf = heapq.heappop, float("inf")
    while True:
        next_arrival = arrivals_ms[i] if i < n else inf
        if heap and heap[0][0] <= next_arrival:
            on_event(pop(heap))
        elif i < n:
            on_arrival(i, next_arrival)
            i += 1
            if progress is not None and not i & 0xFFF:
                progress(i)
        else:
            return
