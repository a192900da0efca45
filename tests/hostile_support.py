"""Shared pieces of the hostile-input tests: running `decide` in-process, and writing inputs."""

from __future__ import annotations

import itertools
import os
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import RAG_EXAMPLE

RAG_TEXT = RAG_EXAMPLE.read_text()


# A hostile input must be answered, not computed on for long: a bound on this process's CPU
# time (not wall-clock time, which other work on the machine stretches), generous enough that
# a slow or loaded machine passes and a runaway search or parse does not.
MAX_CPU_SECONDS = 10.0


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    cpu_seconds: float
    peak_bytes: int


def run_decide(capsys: pytest.CaptureFixture, *args: str, trace_memory: bool = False) -> Outcome:
    """`decide ARGS` through the real entry point (`cli.main`), in this process."""
    from disagg_decider.cli import main

    old_argv = sys.argv
    sys.argv = ["decide", *args]
    if trace_memory:
        tracemalloc.start()
    start = time.process_time()
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        cpu_seconds = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1] if trace_memory else 0
        if trace_memory:
            tracemalloc.stop()
        sys.argv = old_argv
    out, err = capsys.readouterr()
    return Outcome(code, out, err, cpu_seconds, peak)


def assert_user_error(result: Outcome, *fragments: str, max_stderr: int = 4000) -> None:
    """Exit 2, a short message naming what is wrong, and never a traceback."""
    assert result.code == 2, (result.code, result.stderr[:2000], result.stdout[:500])
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert len(result.stderr) < max_stderr, len(result.stderr)
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr[:2000])


def workload_text(**replace: str) -> str:
    """The RAG example's YAML with some top-level lines replaced (raw YAML, aliases and all)."""
    lines = []
    for line in RAG_TEXT.splitlines():
        key = line.split(":", 1)[0]
        if key in replace and not line.startswith(" "):
            lines.append(f"{key}: {replace.pop(key)}")
        else:
            lines.append(line)
    lines += [f"{k}: {v}" for k, v in replace.items()]
    return "\n".join(lines) + "\n"


def workload_data(**changes) -> dict:
    data = yaml.safe_load(RAG_TEXT)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = data
        for p in parents:
            node = node[p]
        node[leaf] = value
    return data


MCP_INITIALIZE = {  # a JSON-RPC initialize request, for tests that speak the wire themselves
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


def make_fifo(path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(path)
    return path


BOMB_LEVELS = 10


def alias_bomb(levels: int = BOMB_LEVELS) -> tuple[str, str]:
    """A 'billion laughs' block (each level lists the previous ten times) and its top anchor."""
    names = [f"l{i}" for i in range(levels)]
    lines = ["bomb:", f"  - &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in itertools.pairwise(names):
        lines.append(f"  - &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + "\n", names[-1]


@dataclass
class Bounded:
    """A `decide` subprocess's outcome and what it cost (its own rusage, from wait4)."""

    code: int
    stdout: str
    stderr: str
    cpu_s: float
    peak_rss_bytes: int
    hung: bool  # still running at the timeout (then killed)


def run_decide_bounded(
    *args: str,
    timeout_s: float = 60.0,
    address_space_bytes: int = 1 << 30,
    cpu_limit_s: int = 30,
) -> Bounded:
    """`decide ARGS` in a fresh process under RLIMIT_AS and RLIMIT_CPU (guards that keep a
    runaway from taking the machine: over them, the child dies and the test fails), with a
    timeout far above any expected time that only detects a hang. Its CPU time and peak RSS
    come from `os.wait4` (CPU) and the child's VmHWM (memory), so they are this child's alone."""
    import resource
    import subprocess
    import tempfile
    import threading

    from tests.conftest import ROOT

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))

    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "OPENBLAS_NUM_THREADS": "1"}
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile() as peak,
    ):
        env["DECIDE_TEST_PEAK_FILE"] = peak.name
        proc = subprocess.Popen(
            [sys.executable, "-c", _PEAK_WRAPPER, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=ROOT,
            preexec_fn=limits,
        )
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            hung = timer.finished.is_set()  # set when the timer fired (checked before cancel)
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        peak_kb = peak.read().decode().strip()
        return Bounded(
            code=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            cpu_s=usage.ru_utime + usage.ru_stime,
            # VmHWM of the decide process (ru_maxrss would count the pytest process it was
            # forked from); a child that died before reporting counts as the whole guard
            peak_rss_bytes=int(peak_kb) * 1024 if peak_kb else address_space_bytes,
            hung=hung,
        )


# `decide ARGS`, reporting the peak RSS of its own address space (VmHWM; ru_maxrss carries over
# from before exec) to the file named by DECIDE_TEST_PEAK_FILE when it exits.
_PEAK_WRAPPER = """
import atexit, os, sys
def _peak():
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["DECIDE_TEST_PEAK_FILE"], "w") as out:
        out.write(kb)
atexit.register(_peak)
sys.argv = ["decide", *sys.argv[1:]]
from disagg_decider.entry import console
console()
"""


def assert_refused(result: Bounded, *fragments: str) -> None:
    """Exit 2 with a short message naming what is wrong, no traceback, no hang."""
    assert not result.hung, "still running at the timeout (a hang)"
    assert result.code == 2, (result.code, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(result.stderr) < 4000, len(result.stderr)
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr[-2000:])
