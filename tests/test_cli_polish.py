"""First-hour polish: what a new user types and reads in the first hour reads right."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from disagg_decider import catalog
from disagg_decider.render.tables import attention_kind
from tests.conftest import ROOT


def decide_at(columns: int, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("kind", ["models", "gpus", "links"])
@pytest.mark.parametrize("columns", [80, 200])
def test_catalog_never_truncates_ids_and_lists_aliases(kind: str, columns: int) -> None:
    proc = decide_at(columns, "catalog", kind)
    assert proc.returncode == 0, proc.stderr
    table = {"models": catalog.models, "gpus": catalog.gpus, "links": catalog.links}[kind]()
    lines = proc.stdout.splitlines()
    words = {w.strip(",;:") for line in lines for w in line.split()}
    for key, record in table.items():
        assert record.id in words, record.id  # every id whole, on some line
        if key != record.id:  # an alias, listed whole beside its id
            assert any(line.strip().startswith(f"{record.id}:") and key in line for line in lines)
    assert "…" not in proc.stdout


def test_rules_list_cuts_titles_at_80_columns_never_ids_and_json_keeps_them_whole() -> None:
    proc = decide_at(80, "rules", "list")
    assert proc.returncode == 0
    assert "DSG012" in proc.stdout and "DSG013" in proc.stdout
    rows = json.loads(decide_at(80, "rules", "list", "--json").stdout)
    assert any(len(r["title"]) > 30 and r["title"] not in proc.stdout for r in rows)
    assert all(r["title"] in decide_at(200, "rules", "list").stdout for r in rows)


def test_deploy_help_shows_the_choices() -> None:
    text = decide_at(120, "deploy", "--help").stdout
    assert "dynamo|llm-d|vllm|sglang" in text
    assert "auto|disaggregated|colocated" in text
    assert "v1beta1|v1alpha1" in text


def test_mcp_help_advertises_no_subcommands() -> None:
    text = decide_at(120, "mcp", "--help").stdout
    assert text.startswith("Usage: decide mcp [OPTIONS]\n")
    assert "COMMAND" not in text


def test_options_before_a_subcommand_are_not_silently_ignored() -> None:
    proc = decide_at(120, "-w", "examples/chat-short-colocate.yaml", "catalog", "links")
    assert proc.returncode == 2
    assert "--workload before `catalog` would be ignored" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_workload_file_as_a_command_suggests_the_option() -> None:
    proc = decide_at(120, "examples/chat-short-colocate.yaml")
    assert proc.returncode == 2
    assert "decide --workload examples/chat-short-colocate.yaml" in proc.stderr


def test_opt_13b_is_multi_head_attention() -> None:
    opt = catalog.get_model("opt-13b")
    assert opt.kv_heads == opt.heads
    assert attention_kind(opt).startswith("MHA")
    assert attention_kind(catalog.get_model("llama-3.3-70b")).startswith("GQA")
    out = decide_at(200, "catalog", "models").stdout
    assert next(line for line in out.splitlines() if "opt-13b" in line).rstrip().endswith("MHA")


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_command_modules_share_helpers_without_importing_each_other() -> None:
    pkg = ROOT / "skill" / "disagg_decider"
    assert "disagg_decider.cli" not in _imports(pkg / "deploy" / "cli.py")
    assert "disagg_decider.cli_common" in _imports(pkg / "deploy" / "cli.py")
    for sub in ("render/cli.py", "sim/cli.py", "rules/cli.py", "mcp_cli.py"):
        assert "disagg_decider.cli" not in _imports(pkg / sub), sub
