"""Round trip: calibrate on half of a simulated sweep, predict the other half.

The sweep is run by the discrete-event simulator (`sim/colocated.py`, Poisson arrivals, prompt
and output lengths uniform on [0.8 L, L] as `vllm bench serve --dataset-name random` draws them)
with efficiency constants chosen here, written as `vllm bench serve --save-result --save-detailed`
files, and read back through `decide calibrate`'s reader. Even-numbered runs are the calibration
half, odd-numbered ones are predicted with the fitted constants (open-loop runs replayed on the
simulator, as the fit does) and, for contrast, by the mean-field model fitted alone and with the
shipped defaults.

    PYTHONPATH=skill python benchmarks/calibration_roundtrip.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from disagg_decider import catalog
from disagg_decider.calibrate import fit, readers, synthetic
from disagg_decider.workload import Efficiency

TRUE = Efficiency(prefill_mfu=0.55, decode_mbu=0.62, step_overhead_ms=2.5)
# (prompt tokens, output tokens, request rate): four lengths, three loads each, interleaved so
# each half spans every length and load.
SWEEP = [
    (512, 256, 3), (512, 256, 8), (512, 256, 14),
    (1024, 256, 2), (1024, 256, 6), (1024, 256, 10),
    (2048, 256, 1), (2048, 256, 3), (2048, 256, 5),
    (4096, 256, 0.5), (4096, 256, 1.5), (4096, 256, 2.5),
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requests", type=int, default=1000, help="requests per run (vllm bench serve's default)"
    )
    args = parser.parse_args()
    model, gpu = catalog.get_model("llama-3.1-8b"), catalog.get_gpu("h100")
    target = fit.Target(model, gpu, "vllm", 1, "bf16", "bf16", 8192, 256)
    engine = target.engine_with(TRUE)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (p, o, rate) in enumerate(SWEEP):
            run = synthetic.simulate_run(
                engine, rate, p, o, requests=args.requests, range_ratio=0.8, seed=i
            )
            paths.append(Path(tmp) / f"run{i:02d}.json")
            paths[-1].write_text(synthetic.vllm_json(run, detailed=True))
        runs, _ = readers.read_results(paths)
    calib, held_out = runs[0::2], runs[1::2]
    result = fit.fit(calib, target)
    predicted = fit.predict_runs(target, result.efficiency, held_out)
    default = fit.predict_runs(target, Efficiency(), held_out)
    seconds = time.perf_counter() - start
    # For contrast: the mean-field model alone, fitted and predicting without the simulator.
    closed = fit.fit(calib, target, simulate=False)
    closed_predicted = fit.predict_runs(target, closed.efficiency, held_out, simulate=False)

    print("Calibration round trip (simulated sweep, llama-3.1-8b on 1 x h100, vLLM-style runs)")
    script = "benchmarks/calibration_roundtrip.py"
    print(f"  command: PYTHONPATH=skill python {script} --requests {args.requests}")
    halves = f"calibrate on {len(calib)}, predict {len(held_out)}"
    print(f"  {len(SWEEP)} runs of {args.requests} requests; {halves}")
    print("  constants         simulated with   fitted on half (1 s.e.)   mean-field only")
    for name in fit.FITTED:
        fitted = result.fitted.get(name, float("nan"))
        se = result.uncertainty.get(name, float("nan"))
        true = getattr(TRUE, name)
        alone = closed.fitted.get(name, float("nan"))
        print(
            f"  {name:<17} {true:>14.3f} {fitted:>9.3f} ({fitted / true - 1:+.1%}, +/-{se:.1%})"
            f"   {alone:>6.3f} ({alone / true - 1:+.1%})"
        )
    for w in result.warnings:
        print(f"  warning: {w}")
    print()
    print("  held-out half: |predicted / measured - 1|, median / worst")
    print("  metric          calibrated      mean-field only   shipped defaults")
    for metric in ("ttft_ms", "tpot_ms", "all"):
        cells = [_fmt(_errors(r, metric)) for r in (predicted, closed_predicted, default)]
        print(f"  {metric:<15} {cells[0]:<15} {cells[1]:<17} {cells[2]}")
    print(f"  ({seconds:.1f} s: simulated sweep, fit and prediction with the simulator)")
    return 0


def _errors(residuals: list[fit.Residual], metric: str) -> list[float]:
    return [
        abs(r.error) if r.error is not None else float("inf")
        for r in residuals
        if metric == "all" or r.metric == metric
    ]


def _fmt(errors: list[float]) -> str:
    if not errors:
        return "-"
    return f"{statistics.median(errors):.1%} / {max(errors):.1%}"


if __name__ == "__main__":
    sys.exit(main())
