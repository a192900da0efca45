"""Shared helpers: paths, running the CLI as a user would, loading workloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`decide ...` in a fresh process, importing this checkout's code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    return subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=120,
    )


def decide_json(path: Path, *extra: str) -> dict:
    proc = run_cli("--workload", str(path), "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def rag_yaml() -> str:
    return (ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml").read_text()
