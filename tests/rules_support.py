"""Helpers shared by the rulebook tests: run the real CLI, write small rule files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_decide(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`python -m disagg_decider ARGS` as a user runs it (exit codes included)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    return subprocess.run(
        [sys.executable, "-m", "disagg_decider", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def rule(rule_id: str = "USR001", **fields) -> dict:
    """A valid rule as YAML data; `fields` replace its parts."""
    base = {
        "id": rule_id,
        "name": "user-rule",
        "title": "A user rule",
        "category": "operations",
        "when": {"metric": "requests_per_second", "op": ">=", "param": "busy_rps"},
        "veto": {"pushes": "colocate"},
        "rationale": "Written by a test.",
        "references": [{"title": "test", "url": "https://example.org"}],
        "examples": {
            "fires": [{"requests_per_second": 10}],
            "silent": [{"requests_per_second": 0.1}],
        },
    }
    base.update(fields)
    return base


def rule_file(path: Path, rules: list[dict], parameters: dict | None = None) -> Path:
    params = {
        "busy_rps": {"value": 1, "unit": "req/s", "doc": "a test threshold", "source": "test"}
    }
    data = {"rulebook": "user", "parameters": params if parameters is None else parameters}
    data["rules"] = rules
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
