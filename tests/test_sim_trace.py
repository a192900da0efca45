"""Traces: Azure CSV and Mooncake JSONL parse, summarize, become workloads; bad ones are
refused with the line named and exit code 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from disagg_decider.errors import UserError
from disagg_decider.sim import trace

ROOT = Path(__file__).resolve().parents[1]
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2500000,879,125
2023-11-16 18:15:56.0000000,91,16
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    return subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args], capture_output=True, text=True, env=env
    )


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_azure_trace_parses_seven_digit_timestamps(tmp_path: Path) -> None:
    t = trace.load(_write(tmp_path, "a.csv", AZURE))
    assert t.kind == "azure"
    assert t.prompt.tolist() == [374, 396, 879, 91]
    assert t.arrival_ms[1] == pytest.approx(4314.579, abs=1e-3)
    s = trace.summarize(t)
    assert s.requests == 4
    assert s.mean_rate_per_s == pytest.approx(3 / 9.31941, rel=1e-4)
    assert s.prompt["p50"] == pytest.approx(385.0)


def test_mooncake_prefix_hits_from_hash_ids(tmp_path: Path) -> None:
    lines = [
        {"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]},
        {"timestamp": 500, "input_length": 1200, "output_length": 20, "hash_ids": [1, 2, 9]},
        {"timestamp": 1500, "input_length": 600, "output_length": 5, "hash_ids": [7, 1]},
    ]
    path = _write(tmp_path, "m.jsonl", "\n".join(json.dumps(x) for x in lines))
    t = trace.load(path)
    assert t.kind == "mooncake"
    assert t.cached.tolist() == [0, 1024, 0]  # two leading blocks of 512 seen before
    assert t.arrival_ms.tolist() == [0.0, 500.0, 1500.0]
    s = trace.summarize(t)
    assert s.prefix_hit_rate == pytest.approx(1024 / 3300)
    assert s.interarrival_cv == pytest.approx(0.25 / 0.75)  # gaps 0.5 s and 1 s


@pytest.mark.parametrize(
    "name, text, fragment",
    [
        ("a.csv", "TIMESTAMP,ContextTokens\n1,2\n", "line 1: missing column(s) GeneratedTokens"),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,5,6\n2,-3,6\n",
            "line 3: ContextTokens is -3",
        ),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n5,5,6\n2,3,6\n",
            "line 3: timestamp goes back",
        ),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,5,6\n2,abc,6\n",
            "line 3: ContextTokens 'abc' is not a number",
        ),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,6\n",
            "line 2: TIMESTAMP 'yesterday'",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5}\n',
            "line 1: missing field(s) output_length",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
            '{"timestamp": 1, "input_length": 5, "output_length": -2}\n',
            "line 2: output_length is -2",
        ),
        (
            "m.jsonl",
            '{"timestamp": 9, "input_length": 5, "output_length": 1}\n'
            '{"timestamp": 1, "input_length": 5, "output_length": 2}\n',
            "line 2: timestamp goes back",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{oops\n',
            "line 2: not valid JSON",
        ),
    ],
)
def test_bad_traces_name_the_line(tmp_path: Path, name: str, text: str, fragment: str) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        trace.load(path)


def test_cli_bad_trace_exits_2_with_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,5,6\n2,5,-1\n")
    proc = _cli("trace", "summarize", str(path))
    assert proc.returncode == 2
    assert "line 3" in proc.stderr and "GeneratedTokens" in proc.stderr
    assert "Traceback" not in proc.stderr
    sim = _cli(
        "simulate", "-w", str(ROOT / "examples/chat-short-colocate.yaml"), "--trace", str(path)
    )
    assert sim.returncode == 2 and "line 3" in sim.stderr


def test_summarize_writes_a_valid_workload_and_refuses_overwrite(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.csv", AZURE)
    out = tmp_path / "w.yaml"
    args = [
        "trace",
        "summarize",
        str(path),
        "--write-workload",
        str(out),
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "-f",
        "json",
    ]
    proc = _cli(*args)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    data = yaml.safe_load(out.read_text())
    assert data["traffic"]["prompt_tokens"]["p50"] == round(summary["prompt"]["p50"])
    assert data["traffic"]["requests_per_second"] == pytest.approx(
        summary["mean_rate_per_s"], rel=1e-3
    )
    assert _cli("--workload", str(out), "-f", "json").returncode == 0
    out.write_text("mine")
    again = _cli(*args)
    assert again.returncode == 2 and "--force" in again.stderr
    assert out.read_text() == "mine"
    assert _cli(*args, "--force").returncode == 0


def test_summarize_unknown_model_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.csv", AZURE)
    proc = _cli(
        "trace",
        "summarize",
        str(path),
        "--write-workload",
        str(tmp_path / "w.yaml"),
        "--model",
        "llama-9",
        "--gpu",
        "h100",
    )
    assert proc.returncode == 2 and "unknown model" in proc.stderr
    assert not (tmp_path / "w.yaml").exists()


def test_a_directory_is_not_a_trace(tmp_path):
    with pytest.raises(UserError, match="is a directory"):
        trace.load(tmp_path)
