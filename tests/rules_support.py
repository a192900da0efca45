"""Helpers shared by the rulebook tests: run the real CLI, write small rule files."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import ROOT, run_cli

EXAMPLES_DIR = ROOT / "examples"


def run_decide(*args: str | Path):
    """`decide ARGS` in a fresh process, exit codes included; paths are welcome."""
    return run_cli(*map(str, args))


def rule(rule_id: str = "USR001", **fields) -> dict:
    """A valid rule as YAML data (a colocate veto at >= busy_rps); `fields` replace parts."""
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
    """Write a rule file; by default it defines `busy_rps` = 1 req/s."""
    params = {
        "busy_rps": {"value": 1, "unit": "req/s", "doc": "a test threshold", "source": "test"}
    }
    data = {"rulebook": "user", "parameters": params if parameters is None else parameters}
    data["rules"] = rules
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
