"""Layouts that would not run are refused, with the reason; risky ones carry a warning."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from disagg_decider.deploy.bundle import build
from disagg_decider.deploy.plan import Pool, make_plan
from disagg_decider.deploy.plan_checks import check
from disagg_decider.errors import UserError
from disagg_decider.workload import load_workload
from tests.deploy_helpers import ROOT, example, pinned, run_cli

RAG = "rag-8k-h200-rdma-dynamo.yaml"


def _with_sizing(w_v, **sizing):
    """A real verdict with its sizing edited: one `decide` would now refuse
    (calc/layouts/pins.py)."""
    w, v = w_v
    return w, v.model_copy(update={"sizing": v.sizing.model_copy(update=sizing)})


def test_vllm_nixl_refuses_prefill_tp_above_decode_tp() -> None:
    w, v = _with_sizing(
        pinned(RAG, prefill_tp=4, decode_tp=4), prefill_tp=8, decode_tp=4, prefill_gpus=8
    )
    assert (v.sizing.prefill_tp, v.sizing.decode_tp) == (8, 4)
    for target in ("vllm", "dynamo", "llm-d"):
        with pytest.raises(UserError, match=r"decode TP >= prefill TP.*NixlConnector"):
            build(w, v, target, layout="disaggregated")


def test_vllm_refusal_through_the_cli_writes_nothing(tmp_path: Path) -> None:
    data = load_workload(ROOT / "examples" / RAG).model_dump(mode="json")
    data["parallelism"] = {"prefill_tp": 8, "decode_tp": 4}
    wl = tmp_path / "w.yaml"
    wl.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    proc = run_cli(
        "deploy", "-w", str(wl), "-t", "vllm", "-o", str(out), "--layout", "disaggregated"
    )
    assert proc.returncode == 2  # `decide` refuses the pin before deploy sees it
    assert "prefill_tp=8 > decode_tp=4" in proc.stderr
    assert "decode TP >= prefill TP" in proc.stderr
    assert not out.exists()


def test_sglang_refuses_unequal_tp_and_vllm_accepts_fan_out() -> None:
    w, v = pinned(RAG, prefill_tp=4, decode_tp=8)
    with pytest.raises(UserError, match="SGLang needs equal TP"):
        build(w, v, "sglang", layout="disaggregated")
    # decode TP > prefill TP is exactly what NIXL supports: vLLM emits it.
    files = build(w, v, "vllm", layout="disaggregated").files
    assert "--tensor-parallel-size 8" in files["launch.sh"]


def test_sglang_with_equal_tp_is_emitted() -> None:
    w, v = pinned(RAG, prefill_tp=4, decode_tp=4)
    assert v.sizing.prefill_tp == v.sizing.decode_tp
    files = build(w, v, "sglang").files
    assert "--disaggregation-mode prefill" in files["launch.sh"]
    assert "--disaggregation-transfer-backend nixl" in files["launch.sh"]


def _plan_with(pools: tuple[Pool, ...], **changes):
    w, v = example(RAG)
    plan = make_plan(w, v, "vllm")
    return dataclasses.replace(plan, pools=pools, **changes)


def test_a_replica_wider_than_a_node_fills_whole_nodes_with_whole_dp_ranks() -> None:
    """TP across nodes (TP16 on 8-GPU nodes) or a replica of 12 GPUs cannot be split into
    per-node pods; DP16/EP16 (two pods of 8 DP ranks) can, on the targets that run them."""
    tp16 = _plan_with(
        (Pool("prefill", 1, 16, None, 4096), Pool("decode", 1, 16, 8, 128)),
        cluster_gpus=64,
    )
    errors, _ = check(tp16)
    assert sum("must fill whole nodes with whole DP ranks" in e for e in errors) == 2
    prefill = Pool("prefill", 1, 8, None, 4096, dp=8, ep=8)
    dp12 = _plan_with(
        (prefill, Pool("decode", 1, 12, 8, 128, dp=12, ep=12, nodes=2)), cluster_gpus=64
    )
    assert any("whole nodes" in e for e in check(dp12)[0])
    dp16 = (prefill, Pool("decode", 1, 16, 8, 128, dp=16, ep=16, nodes=2))
    for target, engine in (
        ("dynamo", "vllm"),
        ("dynamo", "sglang"),
        ("llm-d", "vllm"),
        ("vllm", "vllm"),
        ("sglang", "sglang"),
    ):
        plan = _plan_with(dp16, cluster_gpus=64, target=target, engine=engine)
        assert check(plan)[0] == [], (target, engine)
    plan = _plan_with(dp16, cluster_gpus=64, target="llm-d", engine="sglang")
    errors = check(plan)[0]
    assert any(
        "SGLang serves HTTP from node 0 only" in e and "DP16/EP16" in e and "--target dynamo" in e
        for e in errors
    )


def test_pools_must_fit_the_cluster() -> None:
    plan = _plan_with((Pool("prefill", 4, 4, None, 4096), Pool("decode", 2, 4, 8, 128)))
    errors, _ = check(plan)
    assert any("need 24 GPUs" in e and "cluster.gpus is 16" in e for e in errors)
    fits = _plan_with((Pool("prefill", 2, 4, None, 4096), Pool("decode", 2, 4, 8, 128)))
    assert check(fits)[0] == []


def test_cluster_refusal_from_a_real_verdict() -> None:
    """A real TP4/TP4 verdict with its prefill pool grown to 4 replicas needs 20 of 16 GPUs."""
    w, v = pinned(RAG, prefill_tp=4, decode_tp=4)
    grown = v.sizing.model_copy(update={"prefill_replicas": 4, "prefill_gpus": 16})
    v = v.model_copy(update={"sizing": grown})
    with pytest.raises(UserError, match="need 20 GPUs"):
        build(w, v, "dynamo", layout="disaggregated")


def test_decode_pool_without_a_feasible_batch_is_refused() -> None:
    w, v = pinned(RAG, prefill_tp=2, decode_tp=2)
    assert v.sizing.decode_max_batch == 0  # the calculator: TP2 decode cannot meet 10 ms TPOT
    with pytest.raises(UserError, match=r"no disaggregated layout meets p99 TPOT 10 ms \(best"):
        build(w, v, "vllm", layout="disaggregated")


def test_no_rdma_warns_for_disaggregated_layouts() -> None:
    w, v = example("tcp-25gbe-colocate.yaml")
    bundle = build(w, v, "dynamo", layout="disaggregated")
    assert any("without RDMA" in x for x in bundle.warnings)
    assert "without RDMA" in bundle.files["README.md"]
    assert any("overrides the verdict" in x for x in bundle.warnings)


def test_colocated_layout_skips_pd_constraints() -> None:
    """A colocated verdict with unrunnable P/D sizing still deploys its colocated pool."""
    w, v = _with_sizing(example("chat-short-colocate.yaml"), prefill_tp=8, decode_tp=4)
    assert not v.disaggregate
    files = build(w, v, "vllm").files
    assert "k8s/colocated.yaml" in files and "k8s/prefill.yaml" not in files


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("target", ["vllm", "sglang"])
@pytest.mark.parametrize("name", [RAG, "chat-short-colocate.yaml"])
def test_launch_scripts_are_valid_bash(tmp_path: Path, target: str, name: str) -> None:
    # SGLang needs equal TP on both sides: pinned, since the unpinned RAG split is TP2 -> TP8.
    w, v = pinned(name, prefill_tp=4, decode_tp=4) if name == RAG else example(name)
    script = tmp_path / "launch.sh"
    script.write_text(build(w, v, target).files["launch.sh"])
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    usage = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert usage.returncode == 2 and "Usage:" in usage.stdout


def test_emitters_read_sizing_from_the_verdict_only() -> None:
    """A verdict with other sizing gives other configs: nothing is re-derived on the way."""
    w, v = pinned(RAG, prefill_tp=4, decode_tp=4)
    more = v.sizing.prefill_replicas + 2
    bumped = v.model_copy(update={"sizing": v.sizing.model_copy(update={"prefill_replicas": more})})
    with pytest.raises(UserError, match="GPUs"):  # two more TP4 replicas overflow 16 GPUs
        build(w, bumped, "dynamo", layout="disaggregated")
    bumped = bumped.model_copy(
        update={"sizing": bumped.sizing.model_copy(update={"prefill_replicas": 1})}
    )
    doc = yaml.safe_load(
        build(w, bumped, "dynamo", layout="disaggregated").files["dynamo-graph.yaml"]
    )
    prefill = next(c for c in doc["spec"]["components"] if c["type"] == "prefill")
    assert prefill["replicas"] == 1
