"""The cycle collector paused around allocation-heavy work that builds no reference cycles.

A batch of verdicts and a simulator's event loop both allocate many short-lived records
(arrays, heap tuples, queue entries) that reference counting frees; none forms a cycle, so the
collector's repeated passes over everything still alive are pure cost (about a fifth of a
large batch's time in `benchmarks/decide_speed.py`, a few percent of a simulation). Results do
not depend on it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collector() -> Iterator[None]:
    """The collector off for the block, and back on afterwards if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
