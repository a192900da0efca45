"""GPU microbenchmark: dense bf16/fp8 matmul TFLOP/s and HBM bandwidth, as a calibration file.

For teams with a GPU: measures what this GPU's tensor cores and HBM actually deliver with
torch, compares them with the catalog's datasheet figures, and writes a calibration file whose
`prefill_mfu` is the measured share of peak bf16 (or fp8) FLOP/s and whose `decode_mbu` is the
measured share of HBM bandwidth. These are ceilings from isolated kernels: a serving engine
reaches less, so prefer `decide calibrate` on serving runs when you have them; the file says so.
Skipped cleanly (exit 0) without torch or without a CUDA GPU.

    PYTHONPATH=skill python benchmarks/gpu_microbench.py --gpu h100 --model llama-3.1-8b \
        --out gpu-calibration.yaml [--force]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from disagg_decider import catalog
from disagg_decider.calibrate.file import (
    Calibration,
    Constants,
    DataFile,
    Entry,
    dump_calibration,
)
from disagg_decider.workload import Efficiency


def measure(size: int = 8192, bytes_gb: float = 4.0, repeats: int = 20) -> dict[str, float]:
    """bf16 (and fp8 where torch supports it) matmul TFLOP/s and copy bandwidth in GB/s."""
    import torch

    dev = torch.device("cuda")
    out: dict[str, float] = {}

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / repeats

    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    out["bf16_tflops"] = 2 * size**3 / timed(lambda: a @ b) / 1e12
    if hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
        try:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
            one = torch.tensor(1.0, device=dev)
            fp8 = timed(
                lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            )
            out["fp8_tflops"] = 2 * size**3 / fp8 / 1e12
        except RuntimeError:
            pass  # this GPU or torch build has no fp8 GEMM
    n = int(bytes_gb * 1e9 / 2)
    src = torch.empty(n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    seconds = timed(lambda: dst.copy_(src))
    out["hbm_gb_per_s"] = 2 * n * 2 / seconds / 1e9  # read + write
    return out


def calibration_from(
    measured: dict[str, float], gpu_id: str, model_id: str, tp: int, engine: str, weights_dtype: str
) -> Calibration:
    """Measured ceilings as a calibration entry (shares of the catalog's datasheet peaks)."""
    gpu = catalog.get_gpu(gpu_id)
    peak = (
        gpu.fp8_dense_tflops
        if weights_dtype == "fp8" and gpu.fp8_dense_tflops
        else gpu.bf16_dense_tflops
    )
    flops = measured.get(
        "fp8_tflops" if weights_dtype == "fp8" else "bf16_tflops", measured["bf16_tflops"]
    )
    mfu = min(flops / peak, 1.0)
    mbu = min(measured["hbm_gb_per_s"] / (gpu.hbm_tb_per_s * 1e3), 1.0)
    default = Efficiency()
    entry = Entry(
        model=catalog.get_model(model_id).id,
        gpu=gpu.id,
        engine=engine,
        tp=tp,
        weights_dtype=weights_dtype,
        chunk_tokens=max(default.chunk_tokens),
        max_batch=default.max_decode_batch,
        efficiency=Constants(
            prefill_mfu=round(mfu, 4),
            decode_mbu=round(mbu, 4),
            step_overhead_ms=default.step_overhead_ms,
        ),
        fitted=["prefill_mfu", "decode_mbu"],
        held={"step_overhead_ms": "not measured by a kernel microbenchmark: default kept"},
        residuals={},
        warnings=[
            "microbenchmark ceilings (isolated dense GEMM and copy kernels): serving engines "
            "reach less; `decide calibrate` on serving runs gives the constants to trust",
            "measured: " + ", ".join(f"{k} {v:.1f}" for k, v in measured.items()),
        ],
        data=[DataFile(file="gpu_microbench.py", sha256="-", format="microbench", runs=1)],
        points=[],
    )
    return Calibration(entries=[entry])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", required=True, help="catalog GPU id of this GPU")
    parser.add_argument("--model", required=True, help="catalog model id the file applies to")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--engine", default="vllm", choices=["vllm", "sglang", "trtllm"])
    parser.add_argument("--weights-dtype", default="bf16", choices=["bf16", "fp8"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (pip install torch on a machine with a GPU)")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA GPU visible to torch")
        return 0
    if args.out.exists() and not args.force:
        print(f"error: {args.out}: already exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    measured = measure()
    name = torch.cuda.get_device_name()
    print(
        f"GPU microbenchmark on {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in measured.items())
    )
    print(
        f"  command: PYTHONPATH=skill python benchmarks/gpu_microbench.py --gpu {args.gpu} "
        f"--model {args.model} --out {args.out}"
    )
    cal = calibration_from(measured, args.gpu, args.model, args.tp, args.engine, args.weights_dtype)
    args.out.write_text(dump_calibration(cal), encoding="utf-8")
    print(f"  wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
