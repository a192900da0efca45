"""Worker processes for batches and sweeps (`decide batch|simulate|sweep --jobs N`).

One helper for every command that runs independent pure calls: results come back in the order
the inputs were given, whatever order the workers finish in, so `--jobs N` changes the wall
time and nothing else. Inputs are drawn lazily and at most `in_flight` calls are outstanding,
so memory is bounded by the chunk a call carries times that number, not by the input's length.

Workers are forked (they start in milliseconds with the parent's modules already imported;
spawn would re-import numpy and the calculator, about 0.5 s each) on platforms that have fork,
all of them at once before any thread of this process starts (`WorkerPool.__enter__`), and
ignore SIGINT: a Ctrl-C at the terminal reaches the whole process group, and it is this
process that decides what to keep (a batch writes what is complete, see `batch_stream`), then
ends the workers.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

POLL_S = 0.1  # how often a wait for the next result looks whether a stop was asked for


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _ignore_sigint() -> None:
    """Worker initializer: the parent handles Ctrl-C for the whole batch."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _nothing() -> None:
    """Submitted once on entry, so that every worker is forked before anything else runs."""


class WorkerPool:
    """`jobs` worker processes, or none for `jobs` <= 1 (calls then run in this process).

    Use as a context manager; `ordered` maps a function over inputs through it. On an
    exception or a stop the workers still busy are terminated, not waited for (a simulation
    can run for seconds).
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._executor: ProcessPoolExecutor | None = None
        self._workers: list[Any] = []

    def __enter__(self) -> WorkerPool:
        if self.jobs > 1:
            before = set(multiprocessing.active_children())
            self._executor = ProcessPoolExecutor(
                max_workers=self.jobs, mp_context=_context(), initializer=_ignore_sigint
            )
            self._executor.submit(_nothing).result()  # forks every worker (fork: all at once)
            self._workers = [p for p in multiprocessing.active_children() if p not in before]
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._executor is None:
            return
        if exc_type is not None:
            self.terminate()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._executor = None

    def terminate(self) -> None:
        """End the workers now; calls in progress are lost."""
        for process in self._workers:
            if process.is_alive():
                process.terminate()

    def ordered(
        self,
        fn: Callable[[Any], Any],
        inputs: Iterable[Any],
        in_flight: int | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[Any]:
        """`fn(x)` for each input, in input order, each as soon as it and those before it are
        done; stops early (terminating the workers) once `stop()` is true."""
        if self._executor is None:
            for item in inputs:
                if stop():
                    return
                yield fn(item)
            return
        limit = in_flight or 2 * self.jobs
        pending: deque[Future] = deque()
        items = iter(inputs)
        exhausted = False
        try:
            while pending or not exhausted:
                while not exhausted and len(pending) < limit:
                    item = next(items, _END)
                    if item is _END:
                        exhausted = True
                    else:
                        pending.append(self._executor.submit(fn, item))
                head = pending[0]
                while not head.done():
                    if stop():
                        self.terminate()
                        return
                    wait([head], timeout=POLL_S, return_when=FIRST_COMPLETED)
                if stop():
                    self.terminate()
                    return
                pending.popleft()
                yield head.result()
        finally:
            for future in pending:
                future.cancel()


_END = object()


def _apply(call: tuple[Callable[..., Any], tuple]) -> Any:
    fn, args = call
    return fn(*args)


def run_all(
    fn: Callable[..., Any],
    calls: list[tuple],
    jobs: int,
    on_done: Callable[[int], None] | None = None,
) -> list[Any]:
    """`[fn(*args) for args in calls]`, in up to `jobs` processes; `on_done(i)` hears each call
    finish (in input order)."""
    results = []
    with WorkerPool(min(jobs, len(calls))) as pool:
        for i, result in enumerate(pool.ordered(_apply, [(fn, args) for args in calls])):
            results.append(result)
            if on_done is not None:
                on_done(i)
    return results
