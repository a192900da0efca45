"""`decide deploy` end to end: the configs carry `decide --format json`'s sizing, and nothing a
user has is overwritten without --force."""

from __future__ import annotations

import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.deploy_helpers import EXAMPLES, run_cli

EXAMPLE_NAMES = [p.name for p in EXAMPLES]


def _decide_json(name: str) -> dict:
    proc = run_cli("--workload", f"examples/{name}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _pools_from_dynamo(out: Path) -> dict[str, tuple[int, int]]:
    doc = yaml.safe_load((out / "dynamo-graph.yaml").read_text())
    pools = {}
    for c in doc["spec"]["components"]:
        if c["type"] not in ("prefill", "decode", "worker"):
            continue
        main = c["podTemplate"]["spec"]["containers"][0]
        nodes = c.get("multinode", {}).get("nodeCount", 1)
        gpus = int(main["resources"]["limits"]["nvidia.com/gpu"]) * nodes
        assert _engine_gpus(main["args"]) == gpus  # the engine's world == GPU limit x nodes
        pools[{"worker": "colocated"}.get(c["type"], c["type"])] = (c["replicas"], gpus)
    return pools


def _engine_gpus(args: list[str]) -> int:
    """GPUs one engine replica runs on, read off its flags: SGLang's --tp and TensorRT-LLM's
    --tensor-parallel-size count them all; vLLM's is per DP rank (x --data-parallel-size)."""

    def value(flag: str) -> int:
        return int(args[args.index(flag) + 1]) if flag in args else 1

    if "--tp" in args:
        return value("--tp")
    if "--enable-attention-dp" in args:
        return value("--tensor-parallel-size")
    return value("--tensor-parallel-size") * value("--data-parallel-size")


def _pools_from_llmd(out: Path, disaggregated: bool) -> dict[str, tuple[int, int]]:
    values = yaml.safe_load((out / "modelservice-values.yaml").read_text())
    if not disaggregated:
        assert values["prefill"] == {"create": False}
        d = values["decode"]
        return {"colocated": (d["replicas"], _llmd_gpus(d["parallelism"]))}
    return {
        role: (values[role]["replicas"], _llmd_gpus(values[role]["parallelism"]))
        for role in ("prefill", "decode")
    }


def _llmd_gpus(parallelism: dict[str, int]) -> int:
    """GPUs per replica in the chart's terms: tensor per DP rank x DP ranks."""
    return parallelism["tensor"] * parallelism.get("data", 1)


def _pools_from_k8s(out: Path) -> dict[str, tuple[int, int]]:
    pools = {}
    for path in sorted((out / "k8s").glob("*.yaml")):
        if path.stem == "router":
            continue
        docs = yaml.safe_load_all(path.read_text())
        dep = next(d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet"))
        if dep["kind"] == "LeaderWorkerSet":  # one pod per node of a replica
            group = dep["spec"]["leaderWorkerTemplate"]
            pods, template = group["size"], group["workerTemplate"]
        else:
            pods, template = 1, dep["spec"]["template"]
        container = template["spec"]["containers"][0]
        gpus = int(container["resources"]["limits"]["nvidia.com/gpu"]) * pods
        args = container["args"]
        if container["command"][:2] == ["/bin/sh", "-c"]:
            args = shlex.split(args[0])
        assert _engine_gpus(args) == gpus
        pools[path.stem] = (dep["spec"]["replicas"], gpus)
    return pools


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_replicas_and_tp_equal_decide_json_sizing(name: str, tmp_path: Path) -> None:
    """Replicas and GPUs per replica (TP x DP; a multi-node replica's pods added up) in every
    target's files equal the verdict's sizing."""
    verdict = _decide_json(name)
    s = verdict["sizing"]
    k = verdict["conditional"]
    if verdict["disaggregate"] and k["layout"] == "conditional":  # the layout deployed
        expected = {
            "prefill": (k["prefill_replicas"], k["prefill_tp"]),
            "decode": (k["decode_replicas"], k["decode_tp"]),
        }
    elif verdict["disaggregate"]:
        expected = {
            r: (s[f"{r}_replicas"], s[f"{r}_tp"] * s[f"{r}_dp"]) for r in ("prefill", "decode")
        }
    else:
        expected = {"colocated": (s["colocated_replicas"], s["colocated_tp"] * s["colocated_dp"])}
    readers = {
        "dynamo": _pools_from_dynamo,
        "llm-d": lambda out: _pools_from_llmd(out, verdict["disaggregate"]),
        "vllm": _pools_from_k8s,
        "sglang": _pools_from_k8s,
    }
    with ThreadPoolExecutor(max_workers=len(readers)) as pool:
        procs = dict(
            zip(
                readers,
                pool.map(
                    lambda t: run_cli(
                        "deploy", "-w", f"examples/{name}", "-t", t, "-o", str(tmp_path / t)
                    ),
                    readers,
                ),
                strict=True,
            )
        )
    for target, read in readers.items():
        out = tmp_path / target
        proc = procs[target]
        if proc.returncode == 2 and target == "sglang" and "equal TP" in proc.stderr:
            # A legitimate refusal on a valid verdict: SGLang needs equal P/D TP.
            tps = (expected["prefill"][1], expected["decode"][1])
            assert verdict["disaggregate"] and tps[0] != tps[1]
            continue
        if proc.returncode == 2 and "spans" in proc.stderr:
            # Multi-node SGLang replicas on llm-d (its LeaderWorkerSet path runs vLLM's hybrid
            # data parallelism): refused, naming the targets that run them.
            widest = max(g for _, g in expected.values())
            assert widest > 8 and target == "llm-d", target
            assert "--target dynamo or --target sglang" in proc.stderr
            continue
        assert proc.returncode == 0, (target, proc.stderr)
        assert read(out) == expected, target
        readme = (out / "README.md").read_text()
        assert f"**Decision: {verdict['decision']}.**" in readme


def test_threshold_in_configs_equals_the_verdicts(tmp_path: Path) -> None:
    name = "k8s-native-shop-llm-d.yaml"
    verdict = _decide_json(name)
    assert verdict["disaggregate"]
    threshold = verdict["conditional_disagg_threshold_tokens"]
    assert (
        run_cli(
            "deploy", "-w", f"examples/{name}", "-t", "llm-d", "-o", str(tmp_path / "l")
        ).returncode
        == 0
    )
    epp = yaml.safe_load((tmp_path / "l" / "epp-config.yaml").read_text())
    decider = next(p for p in epp["plugins"] if p["type"] == "prefix-based-pd-decider")
    assert decider["parameters"]["nonCachedTokens"] == threshold
    assert (
        run_cli(
            "deploy", "-w", f"examples/{name}", "-t", "dynamo", "-o", str(tmp_path / "d")
        ).returncode
        == 0
    )
    graph = yaml.safe_load((tmp_path / "d" / "dynamo-graph.yaml").read_text())
    frontend = next(c for c in graph["spec"]["components"] if c["type"] == "frontend")
    args = frontend["podTemplate"]["spec"]["containers"][0]["args"]
    config = json.loads(args[args.index("--router-conditional-disagg-config") + 1])
    assert config["eff_isl_threshold"] == threshold


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ("deploy", "-w", "examples/rag-8k-h200-rdma-dynamo.yaml", "-t", "vllm", "-o", str(out))
    assert run_cli(*args).returncode == 0
    # One file the user edited, one the user deleted: a refused run touches neither.
    (out / "README.md").write_text("my notes\n")
    (out / "launch.sh").unlink()
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert "README.md" in proc.stderr and "--force" in proc.stderr
    assert (out / "README.md").read_text() == "my notes\n"
    assert not (out / "launch.sh").exists()  # nothing was written at all
    proc = run_cli(*args, "--force")
    assert proc.returncode == 0, proc.stderr
    assert (out / "README.md").read_text() != "my notes\n"
    assert (out / "launch.sh").exists()


def test_unknown_target_exits_2_listing_valid_ones(tmp_path: Path) -> None:
    proc = run_cli(
        "deploy", "-w", "examples/chat-short-colocate.yaml", "-t", "kserve", "-o", str(tmp_path)
    )
    assert proc.returncode == 2
    for valid in ("dynamo", "llm-d", "vllm", "sglang"):
        assert valid in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_workload_path_exits_2(tmp_path: Path) -> None:
    proc = run_cli("deploy", "-w", "examples/nope.yaml", "-t", "dynamo", "-o", str(tmp_path))
    assert proc.returncode == 2
    assert "nope.yaml" in proc.stderr and "Traceback" not in proc.stderr


def test_json_summary_lists_files(tmp_path: Path) -> None:
    proc = run_cli(
        "deploy",
        "-w",
        "examples/chat-short-colocate.yaml",
        "-t",
        "dynamo",
        "-o",
        str(tmp_path),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["layout"] == "colocated"
    assert sorted(Path(f).name for f in payload["files"]) == ["README.md", "dynamo-graph.yaml"]
