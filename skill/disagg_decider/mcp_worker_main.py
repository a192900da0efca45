"""The body of an MCP worker process: receive (tool name, arguments), answer, repeat.

Preloaded by the `forkserver` (`mcp_workers`), so each worker starts as a fork that has
already imported the calculator and parsed the catalogs and rulebook (done at import). Answers are
tuples, never exceptions: ("ok", result), ("user_error", message) or ("crash", text).
A `UserError` raised after reading a user's file has the file's own text taken out of it
(`redact_file_text`): the server was told to read files under --allow-dir, not to show them.
The worker's own housekeeping (the watchdog on the server, Ctrl-C ignored) lives here too, so
this module imports nothing of `mcp_workers`, the server side that starts it.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import threading
import time
from typing import Any

from disagg_decider import catalog, mcp_tools
from disagg_decider.errors import UserError, clip
from disagg_decider.rules.loader import shipped
from disagg_decider.userfiles import FilePolicy, file_policy, recording_reads

WATCHDOG_PERIOD_S = 0.5

TOOLS = {"decide_disaggregation": mcp_tools.decide_disaggregation}
TOOLS["find_crossover"] = mcp_tools.find_crossover
TOOLS["frontier"] = mcp_tools.frontier


def serve_calls(conn: Any, policy: FilePolicy, server_pid: int) -> None:
    ignore_interrupts()
    watch_server(server_pid)
    warm_caches()
    conn.send(("ready", None))
    while True:
        try:
            name, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        reply = run_tool(name, kwargs, policy)
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return
        except Exception as exc:  # a result that does not pickle
            conn.send(("crash", (type(exc).__name__, crash_text(exc))))


def run_tool(name: str, kwargs: dict[str, Any], policy: FilePolicy) -> tuple[str, Any]:
    read: list[str] = []
    try:
        with file_policy(policy), recording_reads(read):
            return ("ok", TOOLS[name](**kwargs))
    except UserError as exc:
        return ("user_error", redact_file_text(str(exc), read))
    except Exception as exc:
        return ("crash", (type(exc).__name__, crash_text(exc)))


def warm_caches() -> None:
    """The shipped catalogs and rulebook, parsed once per process (the forkserver does it at
    preload, so its forks start with them)."""
    catalog.gpus()
    catalog.models()
    catalog.links()
    shipped()


warm_caches()

QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
GOT = re.compile(r" \(got (.*)\)$", re.MULTILINE)
HIDDEN = "[value from the file not shown]"


def redact_file_text(message: str, texts: list[str]) -> str:
    """The message with every quoted value, and every `(got X)`, that occurs in a file read
    during the call (other than as a key) replaced by a placeholder: line numbers and field
    names stay."""
    if not texts:
        return message

    def from_file(value: str) -> bool:
        """Whether `value` occurs in a file other than as a key (field names may be shown)."""
        key = re.compile(re.escape(value) + r"[\"']?\s*:")
        for text in texts:
            start = text.find(value)
            while start >= 0:
                if not key.match(text, start) or not value:
                    return True
                start = text.find(value, start + 1)
        return False

    def quoted(match: re.Match[str]) -> str:
        try:
            value = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError):
            return HIDDEN
        if isinstance(value, str) and len(value) == 1 and not value.isalnum():
            return match[0]  # a parser naming the punctuation it expected
        return HIDDEN if not isinstance(value, str) or from_file(value) else match[0]

    def got(match: re.Match[str]) -> str:
        inner = match.group(1).split("... (")[0]
        return f" (got {HIDDEN})" if from_file(inner.strip("'\"")) or "'" in inner else match[0]

    return QUOTED.sub(quoted, GOT.sub(got, message))


# --- the process around the calls --------------------------------------------------------------


def watch_server(server_pid: int, period_s: float = WATCHDOG_PERIOD_S) -> None:
    """Exit this process as soon as the server that asked for it is gone (it would otherwise
    compute on: its parent is the forkserver, which lives as long as its children do)."""

    def watch() -> None:
        while True:
            time.sleep(period_s)
            if not process_alive(server_pid):
                os._exit(0)

    threading.Thread(target=watch, name="server-watchdog", daemon=True).start()


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): os.kill said it exists


def ignore_interrupts() -> None:
    """Ctrl-C reaches the whole process group; the server decides, the workers just compute."""
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def crash_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {clip(str(exc), 200)}"
