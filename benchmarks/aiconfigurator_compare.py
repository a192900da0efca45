"""Like-for-like with AIConfigurator: both tools' best output tokens/s per GPU, per mode.

`decide` runs with `slo.basis: static` (TTFT = a batch's prefill latency without queueing,
TPOT = the mean step, the batch maximising throughput per GPU), which is what AIConfigurator
sizes against (shared/reference/aiconfigurator.md section 7). AIConfigurator runs if its CLI is
found (`--aiconfigurator PATH`, or `aiconfigurator` on PATH; it is not a dependency of this
project: `pip install aiconfigurator` in a separate venv). Without it, the figures recorded from
an AIConfigurator 0.12.0 run on a CPU-only machine (2026-11-30, the commands printed below) are
shown and labelled "recorded, not run now".

For each mode the figure is AIConfigurator's best `tokens/s/gpu_cluster` (output tokens per
second per GPU of the whole budget, its verdict's measure) and decide's goodput per GPU times the
output length (its unit, the same measure).

    PYTHONPATH=skill python benchmarks/aiconfigurator_compare.py [--aiconfigurator PATH]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from disagg_decider.decide import decide
from disagg_decider.workload import load_workload_text


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # decide catalog id
    aic_model: str  # AIConfigurator --model-path (bundled config)
    gpu: str
    aic_system: str
    gpus: int
    isl: int
    osl: int
    ttft_ms: float
    tpot_ms: float
    # AIConfigurator 0.12.0 (vllm backend, perf DB 0.24.0, default SILICON mode), recorded
    # 2026-11-30 with the command `aic_command` prints: best tokens/s/gpu_cluster per mode.
    recorded_agg: float
    recorded_disagg: float


CASES = [
    Case("qwen3-32b chat", "qwen3-32b", "Qwen/Qwen3-32B", "h200", "h200_sxm", 8, 4000, 1000,
         2000, 30, 890.76, 901.95),
    Case("llama-70b RAG", "llama-3.1-70b", "meta-llama/Meta-Llama-3.1-70B", "h200", "h200_sxm",
         8, 8192, 512, 3000, 20, 89.0, 111.0),
    Case("llama-8b short", "llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", "h100", "h100_sxm",
         8, 1000, 200, 300, 15, 3835.0, 3782.0),
    Case("qwen3-32b long", "qwen3-32b", "Qwen/Qwen3-32B", "h100", "h100_sxm", 16, 16000, 500,
         4000, 25, 99.0, 109.0),
]  # fmt: skip


def aic_command(exe: str, case: Case, save_dir: Path) -> list[str]:
    return [
        exe, "cli", "default", "--model-path", case.aic_model, "--system", case.aic_system,
        "--total-gpus", str(case.gpus), "--backend", "vllm", "--isl", str(case.isl),
        "--osl", str(case.osl), "--ttft", f"{case.ttft_ms:g}", "--tpot", f"{case.tpot_ms:g}",
        "--save-dir", str(save_dir),
    ]  # fmt: skip


def run_aic(exe: str, case: Case) -> tuple[float, float]:
    """AIConfigurator's best tokens/s/gpu_cluster for agg and disagg (0 where none meets SLA)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            aic_command(exe, case, Path(tmp)), capture_output=True, text=True, timeout=600
        )
        best = {}
        for mode in ("agg", "disagg"):
            values = []
            for path in Path(tmp).glob(f"**/{mode}/best_config_topn.csv"):
                with path.open() as f:
                    values += [float(row["tokens/s/gpu_cluster"]) for row in csv.DictReader(f)]
            best[mode] = max(values, default=0.0)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"aiconfigurator failed ({proc.returncode}): {proc.stderr[-500:]}")
    return best["agg"], best["disagg"]


def run_decide(case: Case, basis: str = "static") -> tuple[float, float]:
    text = f"""
name: {case.name}
model: {case.model}
engine: vllm
traffic: {{prompt_tokens: {case.isl}, output_tokens: {case.osl}, requests_per_second: 1}}
slo: {{ttft_ms: {case.ttft_ms}, tpot_ms: {case.tpot_ms}, basis: {basis}}}
cluster: {{gpu: {case.gpu}, gpus: {case.gpus}, gpus_per_node: 8, network: ib-ndr-400}}
"""
    v = decide(load_workload_text(text, case.name))
    return v.colocated.goodput_per_gpu * case.osl, v.disaggregated.goodput_per_gpu * case.osl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiconfigurator", help="path to the aiconfigurator CLI")
    args = parser.parse_args()
    exe = args.aiconfigurator or shutil.which("aiconfigurator")
    print("AIConfigurator vs decide (slo.basis static): output tokens/s per GPU of the budget")
    print("  command: PYTHONPATH=skill python benchmarks/aiconfigurator_compare.py"
          + (f" --aiconfigurator {exe}" if exe else ""))  # fmt: skip
    if exe is None:
        print("  AIConfigurator not found: its figures below are RECORDED from an earlier run")
        print("  (aiconfigurator 0.12.0), not run now.")
    header = f"  {'case':<16} {'GPUs':>4} {'ISL/OSL':>10} {'TTFT/TPOT':>10} | "
    header += f"{'AIC agg':>8} {'decide':>8} {'ratio':>6} {'p99':>6} | "
    header += f"{'AIC dis':>8} {'decide':>8} {'ratio':>6} {'p99':>6}"
    print(header)
    for case in CASES:
        if exe is not None:
            aic_agg, aic_dis = run_aic(exe, case)
        else:
            aic_agg, aic_dis = case.recorded_agg, case.recorded_disagg
        ours_agg, ours_dis = run_decide(case)
        p99_agg, p99_dis = run_decide(case, "p99-under-load")
        print(
            f"  {case.name:<16} {case.gpus:>4} {f'{case.isl}/{case.osl}':>10} "
            f"{f'{case.ttft_ms:g}/{case.tpot_ms:g}':>10} | {aic_agg:>8.0f} {ours_agg:>8.0f} "
            f"{_ratio(ours_agg, aic_agg):>6} {p99_agg:>6.0f} | {aic_dis:>8.0f} {ours_dis:>8.0f} "
            f"{_ratio(ours_dis, aic_dis):>6} {p99_dis:>6.0f}"
        )
    print("  ratio = decide (static) / AIConfigurator; 0 = no configuration meets both targets")
    print("  p99 = decide on its default basis (p99 TTFT/TPOT under Poisson load), same physics")
    if exe is not None:
        print("  AIConfigurator commands:")
        for case in CASES:
            print("    " + " ".join(aic_command("aiconfigurator", case, Path("OUT"))))
    return 0


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs > 0 else "-"


if __name__ == "__main__":
    sys.exit(main())
