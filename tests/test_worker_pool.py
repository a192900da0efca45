"""The worker pool behind `--jobs` (`disagg_decider.pool`): ending it never hangs.

A Ctrl-C during `decide batch -f json --jobs 2` could hang (`ProcessPoolExecutor`, which the
pool was built on: terminated while one worker was writing a large result to the shared result
queue, its reader thread waited forever for the rest of the message). Each worker now has its
own pipe, read only by the pool's own loop: a worker killed with its result half written ends
as `WorkerDied` (made certain below by keeping the loop from reading while the worker dies),
and `tests/test_batch_stream.py` interrupts real batches.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time

import pytest

from disagg_decider.pool import WorkerPool
from tests.conftest import run_python

HANG_S = 120  # far above what any case here takes (about a second)


def _square(x: int) -> int:
    return x * x


def _fails_at_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x


def _sleeps_unless_zero(x: int) -> int:
    if x:
        time.sleep(3600)
    return x


def _unpicklable(x: int):
    return lambda: x


def test_results_come_in_input_order_and_exceptions_in_their_turn():
    seen = []
    with WorkerPool(2) as pool, pytest.raises(ValueError, match="three") as raised:
        for value in pool.ordered(_fails_at_three, range(8)):
            seen.append(value)
    assert seen == [0, 1, 2]
    assert any("in a worker process" in note for note in raised.value.__notes__)


def test_a_result_that_cannot_be_pickled_is_an_error_not_a_hang():
    with WorkerPool(2) as pool, pytest.raises(AttributeError, match="pickle") as raised:
        list(pool.ordered(_unpicklable, range(4)))
    assert any("in a worker process" in note for note in raised.value.__notes__)


# Ending early with a call still running (a Ctrl-C, or a caller that walks away): the busy
# worker sleeps for an hour, so only terminating it lets the script end before HANG_S.
_ENDS_EARLY = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, "tests")
    from test_worker_pool import _sleeps_unless_zero
    from disagg_decider.pool import WorkerPool
    how = sys.argv[1]
    with WorkerPool(2) as pool:
        asked = []
        for value in pool.ordered(_sleeps_unless_zero, range(6), stop=lambda: bool(asked)):
            assert value == 0
            if how == "abandon":
                break  # the caller walks away with a call still running
            asked.append(True)
        workers = [w.process for w in pool._workers]
    print("ended", how, sum(p.is_alive() for p in workers), "alive")
    """
)


@pytest.mark.parametrize("how", ["stop", "abandon"])
def test_ending_early_terminates_busy_workers_at_once(how):
    proc = run_python(_ENDS_EARLY, how, timeout_s=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ended {how} 0 alive"


def test_pool_matches_the_serial_path():
    with WorkerPool(3) as pool:
        parallel = list(pool.ordered(_square, range(50), in_flight=4))
    with WorkerPool(1) as pool:
        serial = list(pool.ordered(_square, range(50)))
    assert parallel == serial == [i * i for i in range(50)]


# A worker killed while its result is half written: the pool must say so, not wait forever.
_HALF_WRITTEN = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    sys.path.insert(0, "tests")
    from test_worker_pool import _killed_mid_send
    from disagg_decider.pool import WorkerDied, WorkerPool
    with WorkerPool(2) as pool:
        try:
            for value in pool.ordered(_killed_mid_send, [0, 1]):
                time.sleep(1.0)  # the other worker is killed meanwhile, its result half sent
        except WorkerDied as exc:
            print("WorkerDied:", exc)
    """
)


def _killed_mid_send(x: int) -> bytes:
    if x == 0:
        return b""
    pid = os.getpid()
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    return bytes(64 * 2**20)  # far more than a pipe holds: the send blocks until read


def test_a_worker_killed_while_sending_its_result_is_reported_not_waited_for():
    proc = run_python(_HALF_WRITTEN, timeout_s=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert "WorkerDied: a worker process ended without answering (exit code -9)" in proc.stdout
