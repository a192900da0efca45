"""MoE models on H200 with and without wide expert parallelism: the issue-15 table.

Run from the repository root:

    python benchmarks/moe_layouts.py

DeepSeek-V3 and Qwen3-235B-A22B (FP8 weights, FP8 KV, SGLang, 400 Gb/s InfiniBand) on 16
and 32 H200 at 4,000-token prompts and 1,000-token outputs, p99 TTFT 2 s, TPOT 30 ms. For each,
the verdict's layouts with every layout the calculator prices (TP, DP-attention + EP, TP x EP
hybrids), and the same search restricted to tensor parallelism
(`parallelism.expert_parallel: false`). Goodput is requests per second per GPU of the cluster
within both SLOs.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.workload import Workload  # noqa: E402

MODELS = ("deepseek-v3", "qwen3-235b-a22b")
CLUSTERS = (16, 32)


def workload(model: str, gpus: int, expert_parallel: bool) -> Workload:
    return Workload.model_validate(
        {
            "name": f"{model}-{gpus}xh200",
            "model": model,
            "weights_dtype": "fp8",
            "engine": "sglang",
            "traffic": {
                "prompt_tokens": 4000,
                "output_tokens": 1000,
                "requests_per_second": 1000,  # above capacity: sized to the whole cluster
            },
            "slo": {"ttft_ms": 2000, "tpot_ms": 30},
            "cluster": {"gpu": "h200", "gpus": gpus, "network": "ib-ndr-400"},
            "parallelism": {"expert_parallel": expert_parallel},
        }
    )


def row(model: str, gpus: int, expert_parallel: bool) -> str:
    v = decide(workload(model, gpus, expert_parallel))
    c, d = v.colocated, v.disaggregated
    gain = "n/a" if v.metrics.gain is None else f"{v.metrics.gain:.2f}x"
    colo = f"{c.replicas} x {c.layout}" if c.feasible else "none meets SLO"
    split = (
        f"{d.prefill_layout} x {d.prefill_replicas} + {d.decode_layout} x {d.decode_replicas}"
        if d.feasible
        else "none meets SLO"
    )
    search = "TP + EP" if expert_parallel else "TP only"
    return (
        f"| {model} | {gpus} | {search} | {v.decision} | {colo} | {c.goodput_per_gpu:.3f} | "
        f"{split} | {d.goodput_per_gpu:.3f} | {gain} |"
    )


def main() -> None:
    print(
        "| model | H200 | layouts searched | verdict | colocated | req/s/GPU | "
        "disaggregated (prefill + decode) | req/s/GPU | gain |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for gpus in CLUSTERS:
            for expert_parallel in (True, False):
                print(row(model, gpus, expert_parallel))
    print("\ncommand: python benchmarks/moe_layouts.py")


if __name__ == "__main__":
    main()
