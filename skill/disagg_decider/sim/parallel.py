"""Run independent simulations in worker processes (`decide simulate|sweep --jobs N`).

Each simulation is a pure function of its inputs (engines, pools, a seeded request batch), so
running them in other processes changes nothing but the wall time: results come back in the
order submitted and equal what the same calls return in this process. `jobs=1` runs them here,
one after the other, as before `--jobs` existed.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any


def default_jobs() -> int:
    """Two processes (one per serving mode), or one on a one-CPU machine."""
    return max(1, min(2, os.cpu_count() or 1))


def _context():
    # fork starts a worker in milliseconds with the parent's modules already imported (spawn
    # re-imports numpy and the calculator, ~0.5 s a worker); platforms without it use theirs.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def run_all(
    fn: Callable[..., Any],
    calls: Sequence[tuple],
    jobs: int,
    on_done: Callable[[int], None] | None = None,
) -> list[Any]:
    """`[fn(*args) for args in calls]`, in up to `jobs` processes; `on_done(i)` hears each call
    finish (in this process, in completion order)."""
    if jobs <= 1 or len(calls) <= 1:
        results = []
        for i, args in enumerate(calls):
            results.append(fn(*args))
            if on_done is not None:
                on_done(i)
        return results
    workers = min(jobs, len(calls))
    with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool:
        futures = {pool.submit(fn, *args): i for i, args in enumerate(calls)}
        results: list[Any] = [None] * len(calls)
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            if on_done is not None:
                on_done(i)
    return results
