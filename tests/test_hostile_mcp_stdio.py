"""Hostile MCP calls: each case of issue 12's "Why" for the tools, through a real `mcp.Client`
(in memory, the same `DeciderServer.call_tool` as stdio and HTTP), plus one short-lived stdio
subprocess for what only a process shows (it keeps answering, and exits when stdin closes).

Files: no local file is read unless the server was started with --allow-dir, and a refusal
reads the same whether the path exists or not. Every error is `isError` naming the field,
logged as one WARNING line; an unanticipated exception is an internal error and the server
keeps serving.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from disagg_decider import mcp_server
from tests.conftest import LLAMA_8B_CONFIG, ROOT
from tests.hostile_support import make_fifo, workload_data


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def call(client: Client, tool: str, args: dict) -> tuple[bool, str, float]:
    start = time.perf_counter()
    with anyio.fail_after(10):
        result = await client.call_tool(tool, args)
    text = result.content[0].text if result.content else ""
    return result.is_error, text, time.perf_counter() - start


def hf(path: str) -> dict:
    return {"workload": workload_data(model={"hf_config": path})}


def refusal_body(text: str) -> str:
    """The message without the path it quotes: what must not differ between paths."""
    return text.split(": ", 2)[-1]


# --- file access ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_no_file_is_read_without_allow_dir_and_refusals_look_alike(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    paths = [
        "/etc/shadow",
        "/etc/passwd",
        "../../../../etc/passwd",
        "/",
        "/nonexistent/config.json",
        str(tmp_path / "config.json"),  # even a valid config
    ]
    async with Client(mcp_server.build_server()) as client:
        answers = [await call(client, "decide_disaggregation", hf(p)) for p in paths]
    assert all(is_error for is_error, _, _ in answers)
    bodies = {refusal_body(text) for _, text, _ in answers}
    assert len(bodies) == 1, bodies
    assert "reads no local files" in bodies.pop()
    assert str(Path.cwd()) not in answers[2][1]  # a relative path is not joined to the cwd


@pytest.mark.anyio
async def test_allow_dir_confines_reads_and_refusals_reveal_nothing(tmp_path):
    allowed = tmp_path / "models"
    allowed.mkdir()
    (allowed / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    (tmp_path / "outside.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    os.symlink(tmp_path / "outside.json", allowed / "link.json")
    make_fifo(allowed / "fifo.json")
    os.symlink(allowed / "loop", allowed / "loop")
    refused = [
        "/etc/passwd",
        "../outside.json",
        "link.json",  # a symlink inside that resolves outside
        "fifo.json",
        "loop",
        "missing.json",
        "/dev/zero",
        str(allowed),  # a directory without config.json... has one: allowed below
    ][:-1]
    async with Client(mcp_server.build_server(allow_dirs=[allowed])) as client:
        answers = [await call(client, "decide_disaggregation", hf(p)) for p in refused]
        ok, text, _ = await call(client, "decide_disaggregation", hf("config.json"))
    assert not ok, text
    assert all(is_error for is_error, _, _ in answers)
    assert all(seconds < 2 for _, _, seconds in answers)
    bodies = {refusal_body(text) for _, text, _ in answers}
    assert len(bodies) == 1, bodies
    assert "not a readable regular file under the allowed directories" in bodies.pop()


@pytest.mark.anyio
async def test_values_from_an_allowed_json_file_are_never_echoed(tmp_path):
    secret = "SECRET-TOKEN-abc123"
    (tmp_path / "config.json").write_text(
        json.dumps({**LLAMA_8B_CONFIG, "num_hidden_layers": secret})
    )
    (tmp_path / "notes.txt").write_text(f"password={secret}\n")
    async with Client(mcp_server.build_server(allow_dirs=[tmp_path])) as client:
        bad_field = await call(client, "decide_disaggregation", hf("config.json"))
        not_json = await call(client, "decide_disaggregation", hf("notes.txt"))
    assert bad_field[0] and "num_hidden_layers" in bad_field[1] and secret not in bad_field[1]
    assert not_json[0] and "invalid JSON at line 1" in not_json[1] and secret not in not_json[1]


# --- bounded arguments ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("decide_disaggregation", {"workload": workload_data(model="m" * 10_000_000)}, "model"),
        ("decide_disaggregation", {"workload": {**workload_data(), "k" * 10_000_000: 1}}, "key"),
        ("explain_rule", {"rule_id": "R" * 10_000_000}, "characters"),
        ("decide_disaggregation", {"workload": workload_data(name="n" * 500_000)}, "name"),
    ],
    ids=["10MB-model", "10MB-key", "10MB-rule-id", "long-name"],
)
async def test_huge_values_come_back_short_and_fast(tool, args, field):
    async with Client(mcp_server.build_server()) as client:
        is_error, text, seconds = await call(client, tool, args)
    assert is_error and field in text
    assert len(text) < 3000 and seconds < 2


@pytest.mark.anyio
async def test_deeply_nested_arguments_are_refused_before_validation():
    deep: dict = {}
    node = deep
    for _ in range(200):
        node["x"] = {}
        node = node["x"]
    async with Client(mcp_server.build_server()) as client:
        is_error, text, seconds = await call(
            client, "decide_disaggregation", {"workload": workload_data(overrides=deep)}
        )
    assert is_error and "nested deeper than" in text and seconds < 2


NUMBER_CASES = [
    ({"traffic.prompt_tokens": {"p50": 100, "p99": 1e308}}, "traffic.prompt_tokens.p99"),
    ({"traffic.requests_per_second": 1e-308}, "traffic.requests_per_second"),
    ({"traffic.requests_per_second": True}, "traffic.requests_per_second"),
    ({"cost": {"usd_per_gpu_hour": 1e308}}, "cost.usd_per_gpu_hour"),
    ({"parallelism": {"colocated_tp": 1e9}}, "parallelism.colocated_tp"),
    ({"cluster.gpus": 10**5000}, "cluster.gpus"),
    ({"efficiency": {"chunk_tokens": list(range(1, 10_001))}}, "efficiency.chunk_tokens"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("change", "field"), NUMBER_CASES)
async def test_out_of_range_numbers_are_errors_naming_the_field(change, field):
    async with Client(mcp_server.build_server()) as client:
        is_error, text, seconds = await call(
            client, "decide_disaggregation", {"workload": workload_data(**change)}
        )
    assert is_error and f"workload.{field}" in text, text
    assert "Error executing tool" not in text and "Value error," not in text
    assert seconds < 2


# --- errors: one line, server keeps serving -----------------------------------------------------


@pytest.mark.anyio
async def test_tool_errors_are_one_warning_line(caplog):
    caplog.set_level(logging.INFO)
    async with Client(mcp_server.build_server()) as client:
        await call(client, "explain_rule", {"rule_id": "NOPE\nSECOND LINE"})
    ours = [r for r in caplog.records if r.name.startswith(("disagg_decider", "mcp"))]
    refused = [r for r in ours if "explain_rule" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.WARNING
    assert "\n" not in refused[0].getMessage() and refused[0].exc_info is None


@pytest.mark.anyio
async def test_an_unanticipated_exception_is_an_internal_error_and_serving_goes_on(
    caplog, monkeypatch
):
    from disagg_decider import mcp_tools

    def boom(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(mcp_tools, "decide", boom)
    caplog.set_level(logging.INFO)
    async with Client(mcp_server.build_server()) as client:
        is_error, text, seconds = await call(
            client, "decide_disaggregation", {"workload": workload_data()}
        )
        ok, listing, _ = await call(client, "list_catalog", {"kind": "gpus"})
    assert is_error and "internal error (ZeroDivisionError)" in text and seconds < 2
    assert not ok and "h100" in listing
    crashes = [r for r in caplog.records if "ZeroDivisionError" in r.getMessage()]
    assert len(crashes) == 1 and crashes[0].levelno == logging.WARNING
    assert crashes[0].exc_info is None  # no traceback rendered


# --- a real stdio process -------------------------------------------------------------------------


def _rpc(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _replies(proc: subprocess.Popen, want: set[int]) -> dict[int, dict]:
    """Read lines until every id in `want` is answered (replies may come in any order)."""
    got: dict[int, dict] = {}
    while not want <= set(got):
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"server closed stdout; answered {sorted(got)}")
        data = json.loads(line)
        if "id" in data:
            got[data["id"]] = data
    return got


def test_stdio_server_answers_after_39_fifo_calls_and_exits_when_stdin_closes(tmp_path):
    make_fifo(tmp_path / "fifo.json")
    env = {"PYTHONPATH": str(ROOT / "skill"), "PATH": os.environ.get("PATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "disagg_decider", "mcp", "--allow-dir", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    watchdog = threading.Timer(60, proc.kill)  # a hung server fails the test, never hangs it
    watchdog.start()
    try:
        _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            },
        )
        _replies(proc, {0})
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        workload = workload_data(model={"hf_config": "fifo.json"})
        for i in range(1, 40):
            _rpc(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": "decide_disaggregation",
                        "arguments": {"workload": workload},
                    },
                },
            )
        answers = _replies(proc, set(range(1, 40)))
        assert all(answers[i]["result"]["isError"] is True for i in range(1, 40))
        start = time.monotonic()
        _rpc(proc, {"jsonrpc": "2.0", "id": 99, "method": "ping"})
        assert _replies(proc, {99})[99] == {"jsonrpc": "2.0", "id": 99, "result": {}}
        assert time.monotonic() - start < 2
        proc.stdin.close()
        proc.wait(timeout=5)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read().decode()
    assert "Traceback" not in stderr
    assert stderr.count("refused") == 39  # one line per refused call


@pytest.mark.anyio
async def test_a_workload_calibration_file_is_confined_like_hf_config(tmp_path):
    """`calibration:` in a workload is a path too: without --allow-dir nothing is read, and
    refusals for an existing and a missing path read alike."""
    paths = ["/etc/passwd", "/nonexistent/calibration.yaml"]
    async with Client(mcp_server.build_server()) as client:
        answers = [
            await call(client, "decide_disaggregation", {"workload": workload_data(calibration=p)})
            for p in paths
        ]
    assert all(is_error for is_error, _, _ in answers)
    bodies = {refusal_body(text) for _, text, _ in answers}
    assert len(bodies) == 1, bodies
    assert "root:" not in answers[0][1]
