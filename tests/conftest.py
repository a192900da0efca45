"""Shared helpers: paths, running the CLI as a user would, loading workloads."""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
RAG_EXAMPLE = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"
DELETE = object()  # as a value for `edited_example`: remove that field

# Llama 3.1 8B's Hugging Face config.json (the fields the catalog reads), for hf_config tests.
LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}


# The fewest fields a workload needs: every default left to the verdict (tests of assumptions,
# labels and limits start from it).
MINIMAL_WORKLOAD = {
    "name": "minimal",
    "model": "llama-3.1-8b",
    "traffic": {
        "prompt_tokens": {"p50": 2000, "p99": 6000},
        "output_tokens": {"p50": 300, "p99": 900},
        "requests_per_second": 5,
    },
    "slo": {"ttft_ms": 1000, "tpot_ms": 40},
    "cluster": {"gpu": "h100", "gpus": 8},
}


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`decide ...` in a fresh process, importing this checkout's code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    return subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=120,
    )


def run_python(
    code: str, *args: str, timeout_s: float, unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """`python -c CODE ARGS` in a fresh process from the repository root, this checkout's
    package and `tests` importable; `unset` names environment variables left out. For what
    must happen in a process of its own: a possible hang under a timeout, process-wide state."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["PYTHONPATH"] = f"{ROOT / 'skill'}{os.pathsep}{ROOT}"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def decide_json(path: Path, *extra: str) -> dict:
    proc = run_cli("--workload", str(path), "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@functools.cache
def _example_data(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def edited_example(example: Path = RAG_EXAMPLE, **changes: Any) -> dict:
    """An example workload as YAML data (a fresh copy) with `changes` applied.

    A dotted key names a nested field (`**{"slo.ttft_ms": 5}`); the value DELETE removes it.
    """
    data = copy.deepcopy(_example_data(example))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = data
        for p in parents:
            node = node[p]
        if value is DELETE:
            del node[leaf]
        else:
            node[leaf] = value
    return data


def traffic_workload(
    model: str,
    gpu: str,
    gpus: int,
    prompt: tuple,
    output: tuple,
    rate: float,
    slo: tuple,
    cached: float = 0.0,
    network: str = "ib-ndr-400",
    **fields: Any,
) -> dict:
    """A workload's data from its traffic in one line: (p50, p99) prompt and output tokens,
    requests per second, (TTFT, TPOT) p99 targets in ms; `fields` adds top-level fields."""
    return {
        "name": f"{model}-{gpu}x{gpus}",
        "model": model,
        "traffic": {
            "prompt_tokens": {"p50": prompt[0], "p99": prompt[1]},
            "output_tokens": {"p50": output[0], "p99": output[1]},
            "requests_per_second": rate,
            "prefix_cache_hit_rate": cached,
        },
        "slo": {"ttft_ms": slo[0], "tpot_ms": slo[1]},
        "cluster": {"gpu": gpu, "gpus": gpus, "gpus_per_node": 8, "network": network},
        **fields,
    }


def at_max_rate(workload, mode: str):
    """The workload at (just under) the calculator's max rate for `mode`, and its verdict: the
    pools that rate belongs to (`sim.run.at_max_rate`)."""
    from disagg_decider.decide import decide
    from disagg_decider.sim.run import at_max_rate as sized_at_max_rate

    return sized_at_max_rate(workload, decide(workload), mode)


# Property tests: a bounded profile for CI (the default) and a large one on demand,
# `HYPOTHESIS_PROFILE=large python -m pytest tests/test_verdict_invariants.py`.
# A test that sets max_examples itself keeps its own count.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.register_profile(
    "large",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
