"""The installed `decide` answers a plain verdict request without typer (`entry.py`); it must
print exactly what the typer app prints, with the same messages and exit codes.

Each case runs both front doors in fresh interpreters: `python -m disagg_decider ARGS` (the
entry point, fast lane) and `cli.main` (the typer app), and compares stdout, stderr and the
exit code byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from disagg_decider.entry import verdict_request

ROOT = Path(__file__).resolve().parents[1]
RAG = str(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml")
CHAT = str(ROOT / "examples" / "chat-short-colocate.yaml")
TYPER_APP = "import sys; from disagg_decider.cli import main; sys.argv[0] = 'decide'; main()"


def both(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, ...]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "COLUMNS": "100"}
    runs = []
    for front in (["-m", "disagg_decider"], ["-c", TYPER_APP]):
        runs.append(
            subprocess.run(
                [sys.executable, *front, *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=cwd,
                timeout=120,
            )
        )
    return tuple(runs)


@pytest.mark.parametrize(
    "args",
    [
        ["--workload", RAG, "--format", "json"],
        ["-f", "json", "-w", CHAT],
        ["--workload", CHAT],
        ["-w", RAG, "--format", "text"],
        ["--workload", RAG, "--format", "markdown"],
        ["--workload", "no-such-file.yaml", "--format", "json"],
        ["--workload", "bad.yaml", "--format", "json"],
        ["--workload", ".", "--format", "json"],
    ],
    ids=["json", "short-options", "text-default", "text", "markdown", "missing", "bad", "dir"],
)
def test_the_fast_lane_prints_what_the_typer_app_prints(args, tmp_path):
    (tmp_path / "bad.yaml").write_text("name: x\nmodel: no-such-model\ntraffic: [1, 2\n")
    fast, app = both(args, tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (app.returncode, app.stdout, app.stderr)
    if args[1] in ("no-such-file.yaml", "bad.yaml", "."):
        assert fast.returncode == 2 and fast.stderr.startswith("error:")
    else:
        assert fast.returncode == 0 and fast.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--workload", "w.yaml"], (Path("w.yaml"), "text")),
        (["-w", "w.yaml", "-f", "json"], (Path("w.yaml"), "json")),
        (["--format", "markdown", "--workload", "w.yaml"], (Path("w.yaml"), "markdown")),
        (["--workload=w.yaml"], None),  # typer splits that form
        (["--workload", "w.yaml", "--format", "JSON"], None),  # typer says what is valid
        (["--workload", "w.yaml", "--workload", "v.yaml"], None),
        (["--workload", "-f"], None),
        (["--workload", ""], None),
        (["--format", "json"], None),
        (["--workload", "w.yaml", "--set", "min_gain=1.2"], None),
        (["--workload", "w.yaml", "--help"], None),
        (["catalog", "gpus"], None),
        ([], None),
    ],
)
def test_only_a_plain_verdict_request_takes_the_fast_lane(args, expected):
    assert verdict_request(args) == expected


PLUGIN_PROBE = """
import json, os, sys
from disagg_decider.entry import skip_pydantic_plugin_discovery
skip_pydantic_plugin_discovery()
from pydantic import BaseModel
class M(BaseModel):
    x: int
seen = {"value": M(x=1).x, "metadata": "importlib.metadata" in sys.modules,
        "variable": os.environ.get("PYDANTIC_DISABLE_PLUGINS")}
os.environ["PYDANTIC_DISABLE_PLUGINS"] = ""  # plugins back on: the real loader answers
from pydantic.plugin._loader import get_plugins
seen["plugins"] = list(get_plugins())
seen["real"] = sys.modules["pydantic.plugin._loader"].__file__ is not None
print(json.dumps(seen))
"""


def test_pydantic_builds_models_without_plugin_discovery_and_can_get_it_back():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    proc = subprocess.run(
        [sys.executable, "-c", PLUGIN_PROBE], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    assert seen["value"] == 1
    assert seen["metadata"] is False
    assert seen["variable"] == "1"
    assert seen["plugins"] == []  # none installed here; asked of pydantic's own loader
    assert seen["real"] is True


def test_a_users_pydantic_plugin_setting_is_left_alone():
    probe = (
        "import os, sys; from disagg_decider.entry import skip_pydantic_plugin_discovery; "
        "skip_pydantic_plugin_discovery(); "
        "print(os.environ['PYDANTIC_DISABLE_PLUGINS'], 'pydantic.plugin._loader' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "PYDANTIC_DISABLE_PLUGINS": "logfire"}
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.stdout.split() == ["logfire", "False"]


TEARDOWN_PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("teardown ran\\n"))
sys.argv = ["decide", *sys.argv[1:]]
from disagg_decider.entry import console
console()
"""


@pytest.mark.parametrize(
    ("args", "code", "teardown"),
    [
        (["--workload", RAG, "--format", "json"], 0, False),  # the fast lane: ends at once
        (["--workload", "no-such-file.yaml", "--format", "json"], 2, False),
        ([f"--workload={RAG}", "--format", "json"], 0, True),  # typer: the ordinary end
    ],
    ids=["fast-lane", "fast-lane-error", "typer"],
)
def test_the_fast_lane_ends_the_process_without_the_teardown(args, code, teardown, tmp_path):
    """`console` skips the interpreter's teardown (and so any exit handler) only after the
    fast lane answered; the output is complete and the exit code kept either way."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.run(
        [sys.executable, "-c", TEARDOWN_PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == code
    assert ("teardown ran" in proc.stderr) is teardown
    if code == 0:
        assert json.loads(proc.stdout)["workload"]  # the whole verdict was flushed
    else:
        assert proc.stderr.startswith("error:")


def test_a_stream_that_cannot_be_flushed_leaves_the_end_to_the_ordinary_shutdown(monkeypatch):
    from disagg_decider import entry

    class Closed:
        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    def no_exit(code):
        raise AssertionError(f"os._exit({code}) with an unflushed stream")

    monkeypatch.setattr(sys, "stdout", Closed())
    monkeypatch.setattr(entry.os, "_exit", no_exit)
    assert entry.end_process(0) is None  # returned: Python's own shutdown reports the pipe
