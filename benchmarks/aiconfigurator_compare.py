"""Like-for-like with AIConfigurator: both tools' best output tokens/s per GPU, per mode.

`decide` runs with `slo.basis: static` (TTFT = a batch's prefill latency without queueing,
TPOT = the mean step, the batch maximising throughput per GPU), which is what AIConfigurator
sizes against (shared/reference/aiconfigurator.md section 7). AIConfigurator runs if its CLI is
found (`--aiconfigurator PATH`, or `aiconfigurator` on PATH; it is not a dependency of this
project: `pip install aiconfigurator` in a separate venv). Without it, the figures recorded from
an AIConfigurator 0.12.0 run on a CPU-only machine (2026-11-30, the commands printed below) are
shown and labelled "recorded, not run now"; the MoE cases (Qwen3-235B-A22B-FP8, DeepSeek-V3,
gpt-oss-120b, on H200) were recorded 2026-12-02 the same way. A direction line per case says
which mode each tool puts ahead, and the totals count agreement on dense and MoE cases apart.

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

from disagg_decider.catalog import get_model
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
    # with the command `aic_command` prints (`recorded_on`): best tokens/s/gpu_cluster per mode.
    recorded_agg: float
    recorded_disagg: float
    recorded_on: str = "2026-11-30"
    # decide's weight / KV formats where the checkpoint AIConfigurator reads differs from the
    # catalog's native one (Qwen3-235B-A22B-FP8: block-FP8 weights, BF16 KV, as its log says).
    weights_dtype: str | None = None
    kv_cache_dtype: str | None = None

    @property
    def moe(self) -> bool:
        return get_model(self.model).moe is not None


CASES = [
    Case("qwen3-32b chat", "qwen3-32b", "Qwen/Qwen3-32B", "h200", "h200_sxm", 8, 4000, 1000,
         2000, 30, 890.76, 901.95),
    Case("llama-70b RAG", "llama-3.1-70b", "meta-llama/Meta-Llama-3.1-70B", "h200", "h200_sxm",
         8, 8192, 512, 3000, 20, 89.0, 111.0),
    Case("llama-8b short", "llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", "h100", "h100_sxm",
         8, 1000, 200, 300, 15, 3835.0, 3782.0),
    Case("qwen3-32b long", "qwen3-32b", "Qwen/Qwen3-32B", "h100", "h100_sxm", 16, 16000, 500,
         4000, 25, 99.0, 109.0),
    # MoE, recorded 2026-12-02 (1.5 to 3.5 min each on a busy 2-core machine).
    Case("qwen3-235b fp8 chat", "qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B-FP8", "h200", "h200_sxm",
         16, 4000, 1000, 2000, 30, 139.619, 124.948, "2026-12-02", "fp8_block", "bf16"),
    Case("deepseek-v3 chat", "deepseek-v3", "deepseek-ai/DeepSeek-V3", "h200", "h200_sxm", 16,
         4000, 1000, 2000, 30, 103.097, 61.640, "2026-12-02"),
    Case("gpt-oss-120b RAG", "gpt-oss-120b", "openai/gpt-oss-120b", "h200", "h200_sxm", 8, 8192,
         1024, 2000, 20, 1685.599, 1856.369, "2026-12-02"),
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
    formats = "".join(
        f"{key}: {value}\n"
        for key, value in (
            ("weights_dtype", case.weights_dtype),
            ("kv_cache_dtype", case.kv_cache_dtype),
        )
        if value is not None
    )
    text = f"""
name: {case.name}
model: {case.model}
engine: vllm
{formats}traffic: {{prompt_tokens: {case.isl}, output_tokens: {case.osl}, requests_per_second: 1}}
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
        print("  AIConfigurator not found: its figures below are RECORDED from earlier runs")
        print("  (aiconfigurator 0.12.0, dates per case below), not run now.")
    header = f"  {'case':<20} {'GPUs':>4} {'ISL/OSL':>10} {'TTFT/TPOT':>10} | "
    header += f"{'AIC agg':>8} {'decide':>8} {'ratio':>6} {'p99':>6} | "
    header += f"{'AIC dis':>8} {'decide':>8} {'ratio':>6} {'p99':>6} | direction"
    print(header)
    agree = {False: [0, 0], True: [0, 0]}  # moe -> [agreeing, cases]
    for case in CASES:
        if exe is not None:
            aic_agg, aic_dis = run_aic(exe, case)
        else:
            aic_agg, aic_dis = case.recorded_agg, case.recorded_disagg
        ours_agg, ours_dis = run_decide(case)
        p99_agg, p99_dis = run_decide(case, "p99-under-load")
        same = _winner(aic_agg, aic_dis) == _winner(ours_agg, ours_dis)
        agree[case.moe][0] += same
        agree[case.moe][1] += 1
        print(
            f"  {case.name:<20} {case.gpus:>4} {f'{case.isl}/{case.osl}':>10} "
            f"{f'{case.ttft_ms:g}/{case.tpot_ms:g}':>10} | {aic_agg:>8.0f} {ours_agg:>8.0f} "
            f"{_ratio(ours_agg, aic_agg):>6} {p99_agg:>6.0f} | {aic_dis:>8.0f} {ours_dis:>8.0f} "
            f"{_ratio(ours_dis, aic_dis):>6} {p99_dis:>6.0f} | "
            f"AIC {_winner(aic_agg, aic_dis)}, decide {_winner(ours_agg, ours_dis)}"
            + ("" if exe is not None else f" (recorded {case.recorded_on})")
        )
    print("  ratio = decide (static) / AIConfigurator; 0 = no configuration meets both targets")
    print("  p99 = decide on its default basis (p99 TTFT/TPOT under Poisson load), same physics")
    for moe, label in ((False, "dense"), (True, "MoE")):
        agreeing, cases = agree[moe]
        print(f"  direction (which mode wins) agrees on {agreeing} of {cases} {label} cases")
    if exe is not None:
        print("  AIConfigurator commands:")
        for case in CASES:
            print("    " + " ".join(aic_command("aiconfigurator", case, Path("OUT"))))
    return 0


def _winner(colocated: float, disaggregated: float) -> str:
    """Which mode a tool puts ahead ('none' where neither meets the targets)."""
    if max(colocated, disaggregated) <= 0:
        return "none"
    return "split" if disaggregated > colocated else "colocate"


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs > 0 else "-"


if __name__ == "__main__":
    sys.exit(main())
