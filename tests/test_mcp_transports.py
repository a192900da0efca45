"""`decide mcp` as agents run it: a subprocess over stdio, and streamable HTTP on loopback.

The stdio test is the one a coding agent reproduces: spawn the command, list the tools, call
decide_disaggregation with an example workload, and get the verdict `decide --format json`
prints for the same file.
"""

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from disagg_decider.plan_text import WORKLOAD_PLACEHOLDER
from tests.conftest import RAG_EXAMPLE as RAG
from tests.conftest import ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def cli_verdict(path: Path) -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "disagg_decider", "--workload", str(path), "--format", "json"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(run.stdout)


@pytest.mark.anyio
async def test_stdio_subprocess_serves_the_same_verdict_as_the_cli():
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "disagg_decider", "mcp"],
        env={"PYTHONPATH": str(ROOT / "skill"), "PATH": os.environ.get("PATH", "")},
        cwd=str(ROOT),
    )
    with anyio.fail_after(60):
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "decide_disaggregation" in tools
            schema = tools["decide_disaggregation"].output_schema
            assert {"decision", "fired_rules", "sizing", "metrics", "warnings"} <= set(
                schema["properties"]
            )
            assert set(schema["required"]) >= {"decision", "fired_rules", "sizing"}
            result = await client.call_tool(
                "decide_disaggregation", {"workload": yaml.safe_load(RAG.read_text())}
            )
    assert result.is_error is False
    got = result.structured_content
    expected = cli_verdict(RAG)
    # The CLI's next steps name the file it read; the tool gets the workload as data, so its
    # commands name the placeholder a user saves it as.
    assert any(str(RAG) in step["argv"] for step in expected["next_steps"])
    for step in expected["next_steps"]:
        step["argv"] = [WORKLOAD_PLACEHOLDER if a == str(RAG) else a for a in step["argv"]]
        step["command"] = shlex.join(step["argv"])
    assert got["decision"] == expected["decision"]
    assert [r["id"] for r in got["fired_rules"]] == [r["id"] for r in expected["fired_rules"]]
    assert got["sizing"] == expected["sizing"]
    assert got == expected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early: {proc.stderr.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {timeout_s} s")


@pytest.mark.anyio
async def test_streamable_http_on_loopback():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "disagg_decider", "mcp", "--transport", "http", "--port", str(port)],
        env=ENV,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_listening(port, proc, timeout_s=30)
        with anyio.fail_after(30):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                bad = await client.call_tool("explain_rule", {"rule_id": "NOPE001"})
                good = await client.call_tool("explain_rule", {"rule_id": "DSG007"})
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert bad.is_error is True and "unknown rule 'NOPE001'" in bad.content[0].text
    assert good.is_error is False
    assert good.structured_content["name"] == "gain-above-minimum"
    assert good.structured_content["parameters"][0]["name"] == "min_gain"


def test_bad_port_is_a_user_error():
    run = subprocess.run(
        [sys.executable, "-m", "disagg_decider", "mcp", "--transport", "http", "--port", "0"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "--port 0" in run.stderr and "Traceback" not in run.stderr
