"""The event loop both simulated modes run: arrivals and timed events, in time order."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from disagg_decider.gcpause import paused_collector

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
    pop = heapq.heappop
    with paused_collector():
        for i, arrival in enumerate(arrivals_ms):
            while heap and heap[0][0] <= arrival:
                on_event(pop(heap))
            on_arrival(i, arrival)
            if progress is not None and not (i + 1) & 0xFFF:
                progress(i + 1)
        while heap:
            on_event(pop(heap))
