"""Issue 29: costly valid input, YAML numbers, simulate and sweep flags.

Each case runs `decide` in a child process, measured by a wrapper process whose only child it
is (`resource.getrusage(RUSAGE_CHILDREN)`: CPU seconds and peak RSS of that child alone).
The bounds are generous (several times what the fixed code takes on a loaded 2-core box);
before the fix, 1,024 GPUs took 24 CPU-s and 1.1 GB, 100,000 GPUs and `--colocated-gpus
1000000` ran past a minute, and `--requests 100000000` reached 2.3 GB. (A budget of 256
replicas per pool then coarsened large clusters; since issue 27 a decision's cost does not
grow with the cluster and every valid cluster is searched whole.) The timeout only detects a
hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import LLAMA_8B_CONFIG, ROOT

CHAT = ROOT / "examples" / "chat-short-colocate.yaml"
HANG_S = 600

_WRAPPER = """
import json, os, resource, subprocess, sys
env = {**os.environ, "PYTHONPATH": sys.argv[1]}
p = subprocess.run([sys.executable, "-m", "disagg_decider", *sys.argv[3:]],
                   capture_output=True, text=True, env=env, timeout=float(sys.argv[2]))
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": p.returncode, "stdout": p.stdout[-400000:], "stderr": p.stderr[-4000:],
                  "cpu_s": u.ru_utime + u.ru_stime, "maxrss_mb": u.ru_maxrss / 1024}))
"""


def measured(*args: str, cwd: Path = ROOT) -> dict:
    """`decide ARGS` in a child process, with that child's CPU seconds and peak RSS (MB)."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(ROOT / "skill"), str(HANG_S), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=HANG_S + 30,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def user_error(result: dict, *fragments: str) -> None:
    assert result["code"] == 2, (result["code"], result["stderr"][:1500], result["stdout"][:300])
    assert "Traceback" not in result["stderr"]
    for fragment in fragments:
        assert fragment in result["stderr"], (fragment, result["stderr"][:1500])


def chat(tmp_path: Path, name: str = "w.yaml", **changes) -> Path:
    """The chat example with dotted-key changes, written as YAML."""
    data = yaml.safe_load(CHAT.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- a decision's cost independent of the cluster's size --------------------------------------
# Before issue 27 a budget of 256 replicas per pool coarsened 1,024 GPUs (replicas of at least
# 4 GPUs, with a warning) and refused 100,000; now every valid cluster is searched whole.


def _uncoarsened(verdict: dict) -> None:
    assert not any("cost budget" in w for w in verdict.get("warnings", [])), verdict["warnings"]


def test_1024_gpus_is_answered_whole_within_cpu_and_memory_bounds(tmp_path):
    res = measured("--workload", str(chat(tmp_path, **{"cluster.gpus": 1024})), "-f", "json")
    assert res["code"] == 0, res["stderr"]
    verdict = json.loads(res["stdout"])
    _uncoarsened(verdict)
    assert verdict["sizing"]["cluster_gpus"] == 1024
    assert res["cpu_s"] < 12, res["cpu_s"]
    assert res["maxrss_mb"] < 500, res["maxrss_mb"]


@pytest.mark.parametrize("gpus", [100_000, 1_000_000])
def test_the_largest_clusters_are_answered_within_bounds(tmp_path, gpus):
    res = measured("--workload", str(chat(tmp_path, **{"cluster.gpus": gpus})), "-f", "json")
    assert res["code"] == 0, res["stderr"]
    verdict = json.loads(res["stdout"])
    _uncoarsened(verdict)
    sizing = verdict["sizing"]
    assert sizing["cluster_gpus"] == gpus
    # Pools sized for the workload's rate, not the cluster.
    assert sizing["colocated_gpus"] <= 64, sizing
    assert res["cpu_s"] < 10, res["cpu_s"]
    assert res["maxrss_mb"] < 500, res["maxrss_mb"]


def test_a_small_pin_on_a_large_cluster_is_answered(tmp_path):
    path = chat(tmp_path, **{"cluster.gpus": 1024, "parallelism.colocated_tp": 1})
    res = measured("--workload", str(path), "-f", "json")
    assert res["code"] == 0, res["stderr"]
    verdict = json.loads(res["stdout"])
    assert verdict["sizing"]["colocated_tp"] == 1
    assert res["cpu_s"] < 10, res["cpu_s"]


def test_ten_million_token_prompts_on_1024_gpus_are_answered_within_bounds(tmp_path):
    config = dict(LLAMA_8B_CONFIG, max_position_embeddings=20_000_000)
    (tmp_path / "long.json").write_text(json.dumps(config))
    path = chat(
        tmp_path,
        model={"hf_config": "long.json"},
        kv_cache_dtype="fp8",
        **{
            "traffic.prompt_tokens": {"p50": 1_000_000, "p99": 10_000_000},
            "traffic.requests_per_second": 0.001,
            "slo.ttft_ms": 86_400_000,
            "slo.tpot_ms": 10_000,
            "cluster.gpu": "h200",
            "cluster.gpus": 1024,
        },
    )
    res = measured("--workload", str(path), "-f", "json")
    assert res["code"] == 0, res["stderr"]
    _uncoarsened(json.loads(res["stdout"]))
    assert res["cpu_s"] < 12, res["cpu_s"]
    assert res["maxrss_mb"] < 500, res["maxrss_mb"]


def test_decide_batch_prices_a_large_cluster_as_a_small_one(tmp_path):
    chat(tmp_path, "a.yaml")
    chat(tmp_path, "b.yaml", **{"cluster.gpus": 100_000})
    res = measured("batch", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "-f", "jsonl")
    assert res["code"] == 0, res["stderr"]
    rows = [json.loads(line) for line in res["stdout"].splitlines() if line.strip()]
    assert [r["sizing"]["cluster_gpus"] for r in rows] == [8, 100_000], rows
    for row in rows:
        _uncoarsened(row)
    assert res["cpu_s"] < 15, res["cpu_s"]


def test_the_mcp_tools_answer_for_the_largest_clusters():
    from disagg_decider.mcp_tools import decide_disaggregation, find_crossover
    from disagg_decider.workload import Workload

    data = yaml.safe_load(CHAT.read_text())
    start = time.process_time()
    for gpus in (1024, 100_000):
        data["cluster"]["gpus"] = gpus
        verdict = decide_disaggregation(Workload.model_validate(data))
        assert verdict.sizing.cluster_gpus == gpus
        assert not any("cost budget" in w for w in verdict.warnings)
        find_crossover(Workload.model_validate(data), steps=4)
    assert time.process_time() - start < 20


# --- YAML numbers: YAML 1.2 core schema decimals only ------------------------------------------


@pytest.mark.parametrize(
    "written",
    ['"8"', "'8'", "0x10", "0o10", "1_000", "1:30:00", "!!float 8", '!!float "8"', "!!str 8"],
)
def test_numbers_only_as_plain_yaml_1_2_numbers(tmp_path, written):
    text = CHAT.read_text().replace("  gpus: 8\n", f"  gpus: {written}\n")
    assert written in text
    path = tmp_path / "w.yaml"
    path.write_text(text)
    res = measured("--workload", str(path))
    user_error(res, str(path), "gpus")
    assert "unsupported YAML tag" in res["stderr"] or "cluster.gpus" in res["stderr"]
    assert "e.g. 8" in res["stderr"]  # what is valid
    assert res["cpu_s"] < 10, res["cpu_s"]


def test_yaml_1_2_numbers_still_read(tmp_path):
    from disagg_decider.yamlio import load_yaml_text

    got = load_yaml_text("a: 8\nb: 1e8\nc: .5\nd: -3\ne: 010\nf: 1.5E+3\n", "t")
    assert got == {"a": 8, "b": 1e8, "c": 0.5, "d": -3, "e": 10, "f": 1500.0}
    assert type(got["b"]) is float and type(got["e"]) is int


# --- simulate and sweep flags --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--requests", "100000000"], "--requests"),
        (["--rate", "1e308"], "--rate"),
        (["--rate", "nan"], "--rate"),
        (["--rate", "inf"], "--rate"),
        (["--cv", "1e308"], "--cv"),
        (["--cv", "nan"], "--cv"),
        (["--seed", "-1"], "--seed"),
        (["--jobs", "1000000"], "--jobs"),
        (["--colocated-gpus", "1000000"], "--colocated-gpus"),
        (["--prefill-gpus", "100000000"], "--prefill-gpus"),
        (["--decode-gpus", "100000000"], "--decode-gpus"),
        (["--requests", "1000000", "--colocated-gpus", "4096"], "request-replicas"),
    ],
)
def test_simulate_flags_out_of_range_are_refused_up_front(flags, named):
    res = measured("simulate", "--workload", str(CHAT), "-q", "-j", "1", *flags)
    user_error(res, named)
    assert res["cpu_s"] < 10, res["cpu_s"]
    assert res["maxrss_mb"] < 400, res["maxrss_mb"]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--prompt-tokens", "1:1e308"], "--prompt-tokens"),
        (["--prompt-tokens", "nan:nan"], "--prompt-tokens"),
        (["--prompt-tokens", "256:inf"], "--prompt-tokens"),
        (["--prompt-tokens", "256:nan"], "--prompt-tokens"),
        (["--prompt-tokens", "1e300:1e301"], "--prompt-tokens"),
        (["--simulate", "--requests", "100000000"], "--requests"),
        (["--simulate", "--steps", "64", "--requests", "100000"], "--steps"),
        (["--seed", "-5"], "--seed"),
    ],
)
def test_sweep_flags_out_of_range_are_refused_up_front(flags, named):
    res = measured("sweep", "--workload", str(CHAT), "-q", "-j", "1", *flags)
    user_error(res, named)
    assert res["cpu_s"] < 10, res["cpu_s"]
