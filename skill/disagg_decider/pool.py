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

Each worker has a pipe of its own and holds one call at a time, and only this process's own
loop reads the pipes. So ending the workers at any moment is safe: a worker killed while it
was writing a result leaves a half-written message that nobody is waiting on. (A shared
result queue read by a background thread, as `concurrent.futures.ProcessPoolExecutor` has,
waits forever for the rest of such a message: a Ctrl-C during a batch of large rows could
hang there.)
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

POLL_S = 0.1  # how often a wait for the next result looks whether a stop was asked for
JOIN_S = 5.0  # how long a worker asked to finish, or terminated, is given to exit


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed, or out of memory)."""


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _serve(conn: Connection, inherited: list[Connection]) -> None:
    """A worker's loop: (fn, item) in, (True, fn(item)) or (False, its exception) out; None
    or a closed pipe ends it. The parent handles Ctrl-C for the whole batch."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in inherited:  # other workers' pipes, copied by the fork: not this worker's
        other.close()
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        fn, item = task
        try:
            answer = (True, fn(item))
        except BaseException as exc:  # every failure goes back to the caller
            answer = (False, _portable(exc))
        try:
            conn.send(answer)
        except (BrokenPipeError, ConnectionResetError):
            return
        except Exception as exc:  # a result that cannot be pickled
            conn.send((False, _portable(exc)))


def _portable(exc: BaseException) -> BaseException:
    """The exception with the worker's traceback as a note, or a RuntimeError naming it where
    it cannot be pickled."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    try:
        exc.add_note(f"in a worker process:\n{text}")
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"in a worker process:\n{text}")


@dataclass
class _Worker:
    process: Any
    conn: Connection


class WorkerPool:
    """`jobs` worker processes, or none for `jobs` <= 1 (calls then run in this process).

    Use as a context manager; `ordered` maps a function over inputs through it. On an
    exception or a stop the workers still busy are terminated, not waited for (a simulation
    can run for seconds).
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._workers: list[_Worker] = []
        self._busy: dict[Connection, tuple[_Worker, int]] = {}  # pipe -> its worker, call index

    def __enter__(self) -> WorkerPool:
        if self.jobs > 1:
            context = _context()
            forked = context.get_start_method() == "fork"
            for _ in range(self.jobs):
                mine, theirs = context.Pipe()
                inherited = [w.conn for w in self._workers] + [mine] if forked else []
                process = context.Process(target=_serve, args=(theirs, inherited), daemon=True)
                process.start()
                theirs.close()  # only the worker holds its end: its exit reads as EOF here
                self._workers.append(_Worker(process, mine))
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._workers:
            return
        if exc_type is not None or self._busy:
            self.terminate()
        else:
            for w in self._workers:
                with contextlib.suppress(OSError):  # a worker already gone
                    w.conn.send(None)
            self._join()
        for w in self._workers:
            w.conn.close()
        self._workers = []

    def terminate(self) -> None:
        """End the workers now; calls in progress are lost."""
        for w in self._workers:
            if w.process.is_alive():
                w.process.terminate()
        self._busy.clear()
        self._join()

    def _join(self) -> None:
        for w in self._workers:
            w.process.join(JOIN_S)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()

    def ordered(
        self,
        fn: Callable[[Any], Any],
        inputs: Iterable[Any],
        in_flight: int | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[Any]:
        """`fn(x)` for each input, in input order, each as soon as it and those before it are
        done; stops early (terminating the workers) once `stop()` is true. A call's exception
        is raised here in its turn."""
        if not self._workers:
            for item in inputs:
                if stop():
                    return
                yield fn(item)
            return
        limit = max(1, in_flight or 2 * self.jobs)
        items = iter(inputs)
        idle = list(self._workers)
        done: dict[int, tuple[bool, Any]] = {}
        drawn = given = 0  # calls sent out; results handed to the caller
        exhausted = False
        while True:
            if stop():
                self.terminate()
                return
            while idle and not exhausted and drawn - given < limit:
                item = next(items, _END)
                if item is _END:
                    exhausted = True
                else:
                    worker = idle.pop()
                    worker.conn.send((fn, item))
                    self._busy[worker.conn] = (worker, drawn)
                    drawn += 1
            if given in done:
                ok, value = done.pop(given)
                given += 1
                if not ok:
                    raise value
                yield value
                continue
            if exhausted and given == drawn:
                return
            for conn in wait(list(self._busy), timeout=POLL_S):
                worker, index = self._busy.pop(conn)  # type: ignore[index]
                done[index] = self._answer(worker)
                idle.append(worker)

    def _answer(self, worker: _Worker) -> tuple[bool, Any]:
        try:
            return worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(JOIN_S)
            code = worker.process.exitcode
            raise WorkerDied(
                f"a worker process ended without answering (exit code {code}); "
                "if it ran out of memory, try a smaller --chunk or fewer --jobs"
            ) from None


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
