"""Worker processes for the MCP tools whose work grows with the workload, with a deadline.

`decide_disaggregation` and `find_crossover` search pool sizes, and their cost grows with
`cluster.gpus` (1,024 GPUs: about 37 CPU-seconds). A Python thread cannot be stopped, so a
call that ran on the SDK's worker thread kept computing after its client gave up, and held
the interpreter lock the event loop needs to answer anyone else. Here each such call runs in
a small pool of worker processes instead:

- a call has a deadline (`call_timeout_s`, queueing included); past it, or when the client
  cancels the call or the server shuts down, the process computing it is killed (SIGKILL) and
  a fresh one takes its place on the next call;
- the event loop's process never computes a decision, so pings, listings and argument checks
  are answered while the workers are busy;
- each client (an HTTP peer address; the one stdio or in-memory peer) holds at most
  `per_client` workers at once, and waiting calls are served first come, first served, so one
  client's burst of calls takes turns with another's instead of queueing ahead of it.

Why processes and not a cancellation check in the calculator's loops: the check would have
to sit inside numpy-vectorised code paths owned by the core, and it would not give the lock
back to the event loop. The price of a process is paid once (a fork from a preloaded
`forkserver`, then the catalogs parsed once per worker); a warm call adds one pickle of the
workload and one of the verdict over a pipe, under a millisecond (`benchmarks/mcp_latency.py`).

Workers exit on their own when the server goes away: the pipe closes, and a watchdog thread
notices within half a second that the server's process is gone (SIGKILL of it included).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import anyio

from disagg_decider.errors import UserError
from disagg_decider.userfiles import FilePolicy

HEAVY_TOOLS = ("decide_disaggregation", "find_crossover", "frontier")
DEFAULT_CALL_TIMEOUT_S = 20.0
DEFAULT_WORKERS = max(2, min(4, os.cpu_count() or 2))


class WorkerCrash(Exception):
    """A worker raised something other than a `UserError`, or died: an internal error.

    `kind` is the name of the exception in the worker, for the one-line answer and log."""

    def __init__(self, kind: str, text: str = "") -> None:
        super().__init__(text or kind)
        self.kind = kind


@dataclass
class _Worker:
    process: Any
    conn: Any

    def kill(self) -> None:
        """SIGKILL, then reap: the computation stops now, whatever it was doing."""
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.join(timeout=2)
        with contextlib.suppress(Exception):
            self.conn.close()

    async def call(self, message: tuple[str, dict[str, Any]]) -> tuple:
        self.conn.send(message)
        return await self.reply()

    async def reply(self) -> tuple:
        while not self.conn.poll():
            await anyio.wait_readable(self.conn.fileno())
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise WorkerCrash("WorkerExited", "the worker process exited") from None


@dataclass
class WorkerPool:
    """Up to `size` worker processes, started on demand; see the module docstring."""

    policy: FilePolicy
    size: int = DEFAULT_WORKERS
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    per_client: int = 0  # 0: half the pool, at least one
    _idle: list[_Worker] = field(default_factory=list)
    _busy: set[int] = field(default_factory=set)  # pids computing a call
    _slots: Any = None
    _gates: dict[Hashable, Any] = field(default_factory=dict)
    _waiting: dict[Hashable, int] = field(default_factory=dict)

    def worker_pids(self) -> list[int]:
        """Pids of the live workers (for tests and diagnostics)."""
        return [w.process.pid for w in self._idle] + sorted(self._busy)

    def prewarm(self) -> None:
        """Start one worker now (blocking), so the first call does not pay for it."""
        if not self._idle:
            self._idle.append(_start_worker(self.policy))

    async def run(self, name: str, kwargs: dict[str, Any], client: Hashable = None) -> Any:
        """`mcp_tools.<name>(**kwargs)` in a worker; a UserError for a bad input or a timeout."""
        computing = False
        gate = self._gate(client)
        try:
            with anyio.fail_after(self.call_timeout_s):
                async with gate, self._slot():
                    computing = True
                    reply = await self._call_in_worker((name, kwargs))
        except TimeoutError:
            raise UserError(_timeout_text(name, self.call_timeout_s, computing)) from None
        finally:
            self._release(client, gate)
        return _unpack(reply)

    def _slot(self) -> Any:
        if self._slots is None:
            self._slots = anyio.Semaphore(self.size)
        return self._slots

    def _gate(self, client: Hashable) -> Any:
        gate = self._gates.get(client)
        if gate is None:
            limit = self.per_client or max(1, self.size // 2)
            gate = self._gates[client] = anyio.Semaphore(limit)
        self._waiting[client] = self._waiting.get(client, 0) + 1
        return gate

    def _release(self, client: Hashable, gate: Any) -> None:
        """Forget a client's gate once it has no call left (bounded memory over many peers)."""
        left = self._waiting.get(client, 1) - 1
        if left <= 0:
            self._waiting.pop(client, None)
            if self._gates.get(client) is gate:
                del self._gates[client]
        else:
            self._waiting[client] = left

    async def _call_in_worker(self, message: tuple[str, dict[str, Any]]) -> tuple:
        worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = await anyio.to_thread.run_sync(_start_worker, self.policy)
        self._busy.add(worker.process.pid)
        try:
            reply = await worker.call(message)
        except BaseException:
            worker.kill()  # timed out, cancelled or broken: never left computing
            raise
        finally:
            self._busy.discard(worker.process.pid)
        self._idle.append(worker)
        return reply

    def close(self) -> None:
        """Kill every worker (idle ones; busy ones die with their cancelled calls)."""
        while self._idle:
            self._idle.pop().kill()


def _timeout_text(name: str, limit_s: float, computing: bool) -> str:
    if not computing:
        return (
            f"not started within {limit_s:g} s: the server's workers are busy with other "
            "calls; try again shortly"
        )
    return (
        f"no answer within {limit_s:g} s, so the call was cancelled and its worker stopped. "
        "The search grows with cluster.gpus (and find_crossover with steps): try fewer GPUs "
        "for one service, or start the server with a longer `decide mcp --call-timeout-s`"
    )


def _unpack(reply: tuple) -> Any:
    kind, payload = reply
    if kind == "ok":
        return payload
    if kind == "user_error":
        raise UserError(payload)
    raise WorkerCrash(*payload)


# --- the worker side ------------------------------------------------------------------------


def _context() -> Any:
    """forkserver where there is one (forks of a preloaded, single-threaded process); spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["disagg_decider.mcp_worker_main"])
        return ctx
    return multiprocessing.get_context("spawn")


def _start_worker(policy: FilePolicy) -> _Worker:
    """A worker process, started and warm (it says so once its caches are loaded)."""
    from disagg_decider.mcp_worker_main import serve_calls

    ctx = _context()
    parent_conn, child_conn = ctx.Pipe()
    process = ctx.Process(
        target=serve_calls,
        args=(child_conn, policy, os.getpid()),
        daemon=True,
        name="decide-mcp-worker",
    )
    process.start()
    child_conn.close()
    if not parent_conn.poll(60) or parent_conn.recv() != ("ready", None):
        process.kill()
        raise WorkerCrash("WorkerStart", "a worker process did not start")
    return _Worker(process, parent_conn)
