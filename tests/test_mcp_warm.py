"""The MCP server keeps what it may keep warm between calls, and nothing it may not (issue 17).

Shipped package data (catalogs, rulebook) is parsed once per process, when the server is
built; a file a caller names (`{hf_config: path}`) is read and policy-checked on every call,
so an edit between calls is seen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from mcp import Client

from disagg_decider import mcp_server
from tests.conftest import LLAMA_8B_CONFIG, ROOT

# In a fresh interpreter (this test process has parsed everything long ago): count the YAML
# documents parsed, and the shipped files read from their JSON snapshot (`shipped_data.py`),
# while building the server and during three calls.
PROBE = """
import json, sys, anyio, yaml
from mcp import Client
from disagg_decider import mcp_server, shipped_data
workload = yaml.safe_load(open(sys.argv[1]))
parsed = {"build": 0, "calls": 0}
phase = "build"
real_load, real_shipped = yaml.load, shipped_data.load_shipped
def counting_load(*args, **kwargs):
    parsed[phase] += 1
    return real_load(*args, **kwargs)
def counting_shipped(path, parse):
    parsed[phase] += 1  # a snapshot miss also counts its yaml.load: at least one either way
    return real_shipped(path, parse)
yaml.load = counting_load
shipped_data.load_shipped = counting_shipped
server = mcp_server.build_server()
phase = "calls"
async def calls():
    async with Client(server) as client:
        for _ in range(3):
            result = await client.call_tool("decide_disaggregation", {"workload": workload})
            assert not result.is_error, result.content[0].text
anyio.run(calls)
print(json.dumps(parsed))
"""


def test_catalogs_and_rulebook_are_parsed_at_build_and_never_during_calls():
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'skill'}{os.pathsep}{ROOT}"}
    example = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(example)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    parsed = json.loads(proc.stdout)
    assert parsed["build"] >= 4  # three catalogs and the rule files
    assert parsed["calls"] == 0


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_an_hf_config_edited_between_calls_is_read_again(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_8B_CONFIG))
    workload = yaml.safe_load((ROOT / "examples" / "chat-short-colocate.yaml").read_text())
    workload["model"] = {"hf_config": "config.json"}
    async with Client(mcp_server.build_server(allow_dirs=[tmp_path])) as client:
        args = {"workload": workload}
        first = (await client.call_tool("decide_disaggregation", args)).structured_content
        config.write_text(json.dumps({**LLAMA_8B_CONFIG, "num_key_value_heads": 4}))
        second = (await client.call_tool("decide_disaggregation", args)).structured_content
    assert LLAMA_8B_CONFIG["num_key_value_heads"] == 8
    kv_first = first["metrics"]["kv_bytes_per_token"]
    assert second["metrics"]["kv_bytes_per_token"] == pytest.approx(kv_first / 2)
