"""Pinned parallelism that cannot run is refused by name (calc/layouts/pins.py), exit 2 on the
CLI."""

from __future__ import annotations

import pytest
import yaml

from disagg_decider.decide import decide
from disagg_decider.errors import UserError
from disagg_decider.workload import load_workload
from tests.conftest import RAG_EXAMPLE, run_cli


def _rag(**changes) -> dict:
    data = load_workload(RAG_EXAMPLE).model_dump(mode="json", exclude_none=True)
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return data


def _refusal(**changes) -> str:
    w = load_workload(RAG_EXAMPLE).model_validate(_rag(**changes))
    with pytest.raises(UserError) as err:
        decide(w)
    return str(err.value)


def test_tp_larger_than_the_cluster() -> None:
    msg = _refusal(cluster__gpus=4, parallelism__colocated_tp=8)
    assert "colocated_tp=8" in msg and "cluster's 4" in msg


def test_tp_across_nodes_is_refused_unless_the_scaleup_domain_is_larger() -> None:
    msg = _refusal(parallelism__prefill_tp=16, parallelism__decode_tp=16, cluster__gpus=64)
    assert "scale-up domain" in msg and "8 GPUs per node" in msg
    # GB200 NVL72: 72 GPUs share NVLink, so TP16 over 4-GPU trays can run.
    ok = load_workload(RAG_EXAMPLE).model_validate(
        _rag(
            cluster__gpu="gb200",
            cluster__gpus=72,
            cluster__gpus_per_node=4,
            parallelism__colocated_tp=16,
        )
    )
    assert decide(ok).sizing.colocated_tp == 16


def test_tp_must_divide_the_attention_heads() -> None:
    msg = _refusal(parallelism__colocated_tp=3)
    assert "64 attention heads" in msg and "TP 3" in msg


def test_engine_pd_rules() -> None:
    msg = _refusal(parallelism__prefill_tp=8, parallelism__decode_tp=4)
    assert "decode TP >= prefill TP" in msg
    msg = _refusal(engine="sglang", parallelism__prefill_tp=2, parallelism__decode_tp=4)
    assert "SGLang" in msg and "equal" in msg
    msg = _refusal(parallelism__prefill_tp=8, parallelism__decode_tp=8, cluster__gpus=12)
    assert "16 GPUs, more than the cluster's 12" in msg


def test_cli_exits_2_naming_the_rule(tmp_path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text(yaml.safe_dump(_rag(parallelism__colocated_tp=8, cluster__gpus=4)))
    proc = run_cli("--workload", str(wl))
    assert proc.returncode == 2
    assert "colocated_tp=8" in proc.stderr and "Traceback" not in proc.stderr


def test_dp_ep_pins_are_checked_like_tp_pins() -> None:
    """Layout pins (issue 15) go through the same refusal: EP needs a MoE model, a replica
    wider than a node fills whole nodes over RDMA, and a pair must fit the cluster."""
    dense = _refusal(parallelism__decode={"dp": 8, "ep": 8})
    assert "parallelism.decode (DP8/EP8)" in dense and "not a mixture-of-experts" in dense
    w = load_workload(RAG_EXAMPLE).model_validate(
        _rag(
            model="deepseek-v3",
            weights_dtype="fp8",
            cluster__gpus=32,
            cluster__network="tcp-100",
            parallelism__decode={"dp": 12, "ep": 12},
            parallelism__prefill={"dp": 24, "ep": 24},
        )
    )
    with pytest.raises(UserError) as err:
        decide(w)
    msg = str(err.value)
    assert "whole domains" in msg and "RDMA" in msg and "36 GPUs" in msg
