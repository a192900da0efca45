"""`decide trace summarize --classes`: request classes from a trace by natural breaks in log
prompt length, written as a workload's `traffic` block (issue 14, "What to build" 1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from disagg_decider.sim import trace, trace_classes
from disagg_decider.workload import Traffic, parse_workload
from tests.hostile_support import RAG_TEXT, assert_user_error, run_decide

CHAT_SHARE = 0.7


def _lengths(n: int, seed: int, chat_share: float = CHAT_SHARE):
    """70% chat (~400 prompt / 150 output tokens), 30% RAG (~16K / 300): the issue's mix."""
    rng = np.random.default_rng(seed)
    chat = rng.random(n) < chat_share
    chat_prompt = rng.lognormal(np.log(400), 0.5, n)
    rag_prompt = rng.lognormal(np.log(16e3), 0.3, n)
    chat_out, rag_out = rng.lognormal(np.log(150), 0.4, n), rng.lognormal(np.log(300), 0.4, n)
    prompt, output = np.where(chat, chat_prompt, rag_prompt), np.where(chat, chat_out, rag_out)
    return chat, prompt.round().astype(int), np.maximum(output.round(), 1).astype(int)


def _azure(path: Path, prompt, output, gap_s: float = 0.05) -> Path:
    rows = [f"{i * gap_s:.3f},{p},{o}" for i, (p, o) in enumerate(zip(prompt, output, strict=True))]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    return path


def _mooncake(path: Path, chat, prompt, output, seed: int) -> Path:
    """RAG prompts draw one of five shared documents (block hashes repeat: prefix hits); chat
    turns are all new blocks."""
    rng = np.random.default_rng(seed)
    lines = []
    for i, (c, p, o) in enumerate(zip(chat, prompt, output, strict=True)):
        blocks = max(int(p + 511) // 512, 1)
        if c:
            hashes = [f"chat-{i}-{j}" for j in range(blocks)]
        else:
            doc = int(rng.integers(0, 5))
            hashes = [f"doc{doc}-{j}" for j in range(blocks - 1)] + [f"q-{i}"]
        record = {"timestamp": i * 50, "input_length": int(p), "output_length": int(o)}
        lines.append(json.dumps(record | {"hash_ids": hashes}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bimodal_trace_gives_two_classes_with_the_right_shares(tmp_path: Path) -> None:
    chat, prompt, output = _lengths(3000, seed=3)
    c = trace_classes.cluster(trace.load(_azure(tmp_path / "bi.csv", prompt, output)))
    assert c.chosen_by == "auto" and len(c.classes) == 2
    short, long = c.classes
    assert short.share == pytest.approx(chat.mean(), abs=0.005)  # the chat turns, no RAG
    assert abs(short.requests - int(chat.sum())) <= 10  # only where the modes' tails cross
    assert 300 < short.prompt_p50 < 500 and 12000 < long.prompt_p50 < 20000
    assert 120 < short.output_p50 < 180 and 250 < long.output_p50 < 350
    assert short.prompt_p99 < long.prompt_range[0]  # the break falls between the modes
    assert c.ashman_d[0] > trace_classes.MIN_ASHMAN_D
    assert short.prefix_cache_hit_rate is None  # Azure traces carry no block hashes


@pytest.mark.parametrize(
    "name, draw",
    [
        ("log-normal", lambda rng, n: rng.lognormal(6.0, 1.2, n)),
        ("log-uniform", lambda rng, n: np.exp(rng.uniform(3.0, 10.0, n))),
        ("constant", lambda rng, n: np.full(n, 512.0)),
    ],
)
def test_one_mode_stays_one_class(tmp_path: Path, name: str, draw) -> None:
    rng = np.random.default_rng(5)
    prompt = np.maximum(draw(rng, 2000).round(), 1).astype(int)
    path = _azure(tmp_path / f"{name}.csv", prompt, np.full(2000, 100))
    c = trace_classes.cluster(trace.load(path))
    assert len(c.classes) == 1 and c.classes[0].share == 1.0


def test_fixed_k_splits_at_the_natural_breaks_and_reports_weak_separation(tmp_path: Path) -> None:
    _, prompt, output = _lengths(3000, seed=4)
    c = trace_classes.cluster(trace.load(_azure(tmp_path / "bi.csv", prompt, output)), 3)
    assert c.chosen_by == "fixed" and len(c.classes) == 3
    d_chat_halves, d_chat_rag = c.ashman_d
    assert d_chat_halves < trace_classes.MIN_ASHMAN_D < d_chat_rag  # auto would not split chat
    p50s = [k.prompt_p50 for k in c.classes]
    assert p50s == sorted(p50s)


def test_mooncake_hash_ids_give_per_class_prefix_hit_rates(tmp_path: Path) -> None:
    chat, prompt, output = _lengths(2000, seed=6)
    path = _mooncake(tmp_path / "bi.jsonl", chat, prompt, output, seed=6)
    c = trace_classes.cluster(trace.load(path))
    assert len(c.classes) == 2
    short, long = c.classes
    assert short.prefix_cache_hit_rate == 0.0  # fresh blocks every chat turn
    assert long.prefix_cache_hit_rate > 0.8  # five shared documents, all but the first reads


def test_cli_prints_a_traffic_fragment_that_loads_as_a_workload(tmp_path, capsys) -> None:
    chat, prompt, output = _lengths(2000, seed=7)
    path = _mooncake(tmp_path / "bi.jsonl", chat, prompt, output, seed=7)
    result = run_decide(capsys, "trace", "summarize", str(path), "--classes", "auto")
    assert result.code == 0, result.stderr
    fragment = yaml.safe_load(result.stdout)
    traffic = fragment["traffic"]
    assert [round(k["share"], 2) for k in traffic["classes"]] == [
        round(chat.mean(), 2),
        round(1 - chat.mean(), 2),
    ]
    assert traffic["requests_per_second"] == pytest.approx(20.0, rel=0.01)
    Traffic.model_validate(traffic)
    data = yaml.safe_load(RAG_TEXT)
    data["traffic"] = traffic
    w = parse_workload(data, "merged")
    assert len(w.traffic.classes) == 2 and w.traffic.classes[1].prefix_cache_hit_rate > 0.8
    assert "Ashman's D" in result.stdout  # the criterion is stated in the fragment's header


def test_cli_out_is_written_safely_and_json_carries_the_classes(tmp_path, capsys) -> None:
    _, prompt, output = _lengths(1500, seed=8)
    path = _azure(tmp_path / "bi.csv", prompt, output)
    out = tmp_path / "traffic.yaml"
    args = ["trace", "summarize", str(path), "--classes", "2", "--out", str(out)]
    first = run_decide(capsys, *args, "--format", "json")
    assert first.code == 0, first.stderr
    payload = json.loads(first.stdout)
    assert payload["clustering"]["chosen_by"] == "fixed"
    assert len(payload["traffic"]["classes"]) == 2
    assert yaml.safe_load(out.read_text())["traffic"] == payload["traffic"]
    out.write_text("mine\n")
    assert_user_error(run_decide(capsys, *args), "already exists", "--force")
    assert out.read_text() == "mine\n"  # never overwritten without --force
    assert run_decide(capsys, *args, "--force").code == 0
    assert "classes" in yaml.safe_load(out.read_text())["traffic"]


def test_cli_write_workload_uses_the_classes(tmp_path, capsys) -> None:
    _, prompt, output = _lengths(1500, seed=9)
    path = _azure(tmp_path / "bi.csv", prompt, output)
    target = tmp_path / "mixed.yaml"
    args = ["trace", "summarize", str(path), "--classes", "auto", "--write-workload"]
    result = run_decide(capsys, *args, str(target), "--model", "llama-3.1-8b", "--gpu", "h100")
    assert result.code == 0, result.stderr
    w = parse_workload(yaml.safe_load(target.read_text()), str(target))
    assert len(w.traffic.classes) == 2


@pytest.mark.parametrize("value", ["0", "9", "two", "-1"])
def test_bad_classes_option_is_a_user_error(tmp_path, capsys, value: str) -> None:
    path = _azure(tmp_path / "t.csv", [100, 200, 300], [10, 10, 10])
    result = run_decide(capsys, "trace", "summarize", str(path), "--classes", value)
    assert_user_error(result, "--classes", "auto")


def test_out_without_classes_is_a_user_error(tmp_path, capsys) -> None:
    path = _azure(tmp_path / "t.csv", [100, 200, 300], [10, 10, 10])
    result = run_decide(capsys, "trace", "summarize", str(path), "--out", str(tmp_path / "x"))
    assert_user_error(result, "--out", "--classes")
    assert not (tmp_path / "x").exists()
