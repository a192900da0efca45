"""The batch path: `decide_many` must give, workload by workload, what `decide` gives alone.

Batching shares one search among workloads that share an engine, stacks their rows, prunes TP
degrees no member may use and cuts them into blocks; none of that may change an answer.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_decider.calc import compare
from disagg_decider.calc.queues.batch_edge import bisect_edge, boundary_index, interp_rows, value_at
from disagg_decider.calc.replicas import colocated_best
from disagg_decider.decide import decide, decide_file, decide_many
from disagg_decider.workload import load_workload, load_workload_text
from tests.conftest import EXAMPLES, RAG_EXAMPLE, edited_example, run_cli, traffic_workload


def _variants() -> list:
    """Examples plus variations along what a sweep changes, interleaving models and GPUs."""
    out = [load_workload(p) for p in EXAMPLES]
    changes = itertools.product(
        [{"traffic.requests_per_second": 0.5}, {"traffic.requests_per_second": 8}],
        [{"slo.tpot_ms": 15}, {"slo.ttft_ms": 800}],
        [{"cluster.gpus": 2}, {"cluster.gpus": 32, "cluster.network": "tcp-25"}],
        [{}, {"parallelism": {"prefill_tp": 2, "decode_tp": 4}}],
    )
    for i, parts in enumerate(changes):
        merged = {k: v for part in parts for k, v in part.items()}
        merged["model"] = ["llama-3.3-70b", "llama-3.1-8b", "qwen3-32b"][i % 3]
        if "parallelism" in merged and merged["cluster.gpus"] < 6:
            merged["parallelism"] = {"prefill_tp": 1, "decode_tp": 1}  # TP2 + TP4 needs 6 GPUs
        out.append(load_workload_text(yaml.safe_dump(edited_example(**merged))))
    return out


VARIANTS = _variants()


@pytest.fixture(scope="module")
def alone() -> list[dict]:
    return [decide(w).model_dump(mode="json") for w in VARIANTS]


def test_batch_equals_one_by_one(alone):
    batch = [v.model_dump(mode="json") for v in decide_many(VARIANTS)]
    for one, many in zip(alone, batch, strict=True):
        assert many == one, one["workload"]


def test_block_boundaries_and_order_do_not_matter(alone, monkeypatch):
    monkeypatch.setattr(compare, "BLOCK_WORKLOADS", 3)
    order = list(reversed(range(len(VARIANTS))))
    batch = decide_many([VARIANTS[i] for i in order])
    for i, verdict in zip(order, batch, strict=True):
        assert verdict.model_dump(mode="json") == alone[i], alone[i]["workload"]


def test_the_variants_cover_both_answers_and_several_engines():
    """The equality tests above mean something only if the batch mixes groups and verdicts."""
    decisions = {v.decision for v in decide_many(VARIANTS)}
    assert "colocate" in decisions and decisions & {"dynamo", "llm-d"}
    assert len({(w.model, w.cluster.gpu, w.engine) for w in VARIANTS}) >= 5


# --- the search helpers batching relies on ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.lists(st.floats(0.0, 2.0), min_size=15, max_size=15), min_size=1, max_size=8),
    start=st.floats(-1.0, 3.0),
)
def test_bisection_finds_the_full_grid_crossing(steps, start):
    """On falling slack (the frontier's assumption) bisection equals scanning every point."""
    slack = start - np.cumsum(np.array(steps), axis=1)  # (lines, 15), non-increasing
    values = np.cumsum(np.ones_like(slack) * 3.0, axis=1) ** 1.5
    edge = boundary_index(slack)
    expected = np.where(edge >= 0, value_at(values, np.maximum(edge, 0.0)), 0.0)

    def at(index):
        rows = np.arange(len(index))
        return slack[rows, index], (values[rows, index],)

    found = bisect_edge(at, slack.shape[1], (slack.shape[0],))
    np.testing.assert_allclose(found.value(0), expected, rtol=1e-12)
    assert ((found.lo >= 0) == (edge >= 0)).all()


@settings(max_examples=60, deadline=None)
@given(
    xs=st.lists(st.floats(0.0, 100.0), min_size=2, max_size=12, unique=True),
    x=st.floats(-10.0, 110.0),
)
def test_row_interpolation_matches_numpy(xs, x):
    xp = np.sort(np.array(xs))
    fp = np.sqrt(xp) * 3.0 + 1.0
    got = interp_rows(np.array([x, x]), np.stack([xp, xp]), np.stack([fp, fp]))
    np.testing.assert_allclose(got, np.interp(x, xp, fp), rtol=1e-12)


# --- `decide batch` ---------------------------------------------------------------------------


def test_batch_command_prints_what_decide_prints_per_file(tmp_path):
    proc = run_cli("batch", "examples", "--format", "jsonl")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [Path(x["file"]).name for x in lines] == [p.name for p in EXAMPLES]
    for line, path in zip(lines, EXAMPLES, strict=True):
        line.pop("file")
        assert line == decide_file(path).model_dump(mode="json"), path.name


def test_a_bad_file_is_its_own_error_row_and_the_batch_goes_on(tmp_path):
    """A fleet batch streams: a workload that cannot be read is that row's "error" (the file
    and field named), the others are decided, and the exit code (2) says something failed."""
    bad = tmp_path / "typo.yaml"
    bad.write_text(RAG_EXAMPLE.read_text().replace("requests_per_second", "request_per_second"))
    proc = run_cli("batch", str(RAG_EXAMPLE), str(bad), "--format", "json")
    assert proc.returncode == 2
    good, wrong = json.loads(proc.stdout)
    assert good["decision"] == "dynamo" and "error" not in good
    assert wrong["file"] == str(bad) and "requests_per_second" in wrong["error"]
    assert "typo.yaml" in proc.stderr and "1 of 2 workloads" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_batch_command_refuses_an_empty_folder_and_an_existing_out(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("batch", str(empty))
    assert proc.returncode == 2 and "no *.yaml" in proc.stderr
    taken = tmp_path / "verdicts.json"
    taken.write_text("mine")
    proc = run_cli("batch", str(RAG_EXAMPLE), "--format", "json", "--out", str(taken))
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert taken.read_text() == "mine"
    proc = run_cli("batch", str(RAG_EXAMPLE), "-f", "json", "-o", str(taken), "--force")
    assert proc.returncode == 0
    assert json.loads(taken.read_text())[0]["decision"] == "dynamo"


def test_bisection_finds_what_the_whole_grid_finds(alone, monkeypatch):
    """Small sets of colocated lines (a workload's decode workers) are evaluated at every
    batch, larger ones bisected (`colocated_best.WHOLE_GRID_POINTS`); forcing bisection on all of
    them changes nothing."""
    monkeypatch.setattr(colocated_best, "WHOLE_GRID_POINTS", 0)
    for one, many in zip(alone, decide_many(VARIANTS), strict=True):
        assert many.model_dump(mode="json") == one, one["workload"]


@settings(max_examples=8, deadline=None)
@given(
    changes=st.lists(
        st.fixed_dictionaries(
            {
                "model": st.sampled_from(["llama-3.1-8b", "llama-3.3-70b", "qwen3-32b"]),
                "traffic.requests_per_second": st.floats(0.1, 40),
                "traffic.prompt_tokens": st.sampled_from([128, 1024, 8192, 30000]),
                "traffic.prefix_cache_hit_rate": st.sampled_from([0.0, 0.5, 0.9]),
                "slo.tpot_ms": st.sampled_from([6, 12, 40]),
                "slo.ttft_ms": st.sampled_from([300, 2000, 10000]),
                "cluster.gpus": st.sampled_from([1, 2, 4, 8, 16, 64]),
                "cluster.network": st.sampled_from(["ib-ndr-400", "tcp-10", "nvlink"]),
            }
        ),
        min_size=6,
        max_size=12,
    )
)
def test_any_batch_equals_its_workloads_one_by_one(changes):
    """Generated batches, bisection forced, blocks of 5: still each workload's own verdict."""
    workloads = [load_workload_text(yaml.safe_dump(edited_example(**c))) for c in changes]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compare, "BLOCK_WORKLOADS", 5)
        patch.setattr(colocated_best, "WHOLE_GRID_POINTS", 0)
        batch = decide_many(workloads)
    for w, verdict in zip(workloads, batch, strict=True):
        assert verdict.model_dump(mode="json") == decide(w).model_dump(mode="json")


def _moe(gpus: int, prompt: tuple, output: tuple, rate: float, slo: tuple, cached: float):
    """Qwen3-30B-A3B on H100s: a MoE model whose layouts include DP attention."""
    data = traffic_workload("qwen3-30b-a3b", "h100", gpus, prompt, output, rate, slo, cached)
    return load_workload_text(json.dumps(data))


def test_a_block_of_dp_and_tp_only_rows_searches_the_tp_only_rows_alone():
    """Issue 24: a MoE workload on 16 GPUs (DP-attention layouts, a wider batch grid) blocked
    with one on 4 whose colocated load was re-searched read the block's grid with its own
    narrower batch grid (a ValueError); the answers must be each workload's alone."""
    ws = [
        _moe(4, (5110, 9108), (76, 147), 9.2378, (6618.0, 49.0), 0.0),
        _moe(16, (3307, 18838), (589, 879), 34.6515, (4817.0, 76.0), 0.3),
    ]
    batch = [v.model_dump(mode="json") for v in decide_many(ws)]
    for w, many in zip(ws, batch, strict=True):
        assert many == decide(w).model_dump(mode="json"), w.name
