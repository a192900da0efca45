"""The calculator's step times against aiconfigurator-core's measured-kernel estimates.

The calculator and its simulator share one step model, so their agreement says nothing about
whether its step times are right. aiconfigurator-core (the `silicon` extra) composes a forward
pass from operation timings measured per GPU and serving engine; this script prices the same
passes both ways over a grid the database covers:

- prefill: one prompt of 128-16K tokens (on each attention rank of a DP layout);
- decode: one step of a batch of 1-512 sequences at 128-32K tokens of context;
- mixed: a chunk of a prompt plus a decode batch (chunked prefill).

Models x GPUs x engines x layouts (TP 1-8; TP and DP-attention + EP for MoE models), at each
model's shipped weight format (DeepSeek-V3 FP8, gpt-oss-120b MXFP4 experts, the rest BF16).
Points whose KV cache does not fit the layout are skipped; points the database refuses are
counted. It prints the signed and absolute error (median, p90) per model family x phase x GPU
x engine, the worst rows, and writes every row to a CSV.

    python benchmarks/physics_vs_silicon.py                    # full grid (a few minutes)
    python benchmarks/physics_vs_silicon.py --quick            # a CI-sized grid
    python benchmarks/physics_vs_silicon.py --step-source silicon --format json
    python benchmarks/physics_vs_silicon.py --step-source roofline # the plain roofline's
                                                               # class defaults (0.45/0.7)

The default step source is what a workload that sets no `efficiency.*` gets: the constants
`fit_step_physics.py` fitted per GPU x engine x family x format (`calc/step_fit.json`).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "skill") not in sys.path:
    sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.calc.physics import silicon, silicon_steps  # noqa: E402
from disagg_decider.calc.physics.parallel import label  # noqa: E402
from disagg_decider.calc.physics.step import Engine, iteration_ms  # noqa: E402
from disagg_decider.calc.replicas.decode import decode_step_ms  # noqa: E402
from disagg_decider.catalog import (  # noqa: E402
    get_gpu,
    get_model,
    step_fit,
)
from disagg_decider.workload import Efficiency  # noqa: E402

# (catalog model, weight dtype priced): each at the format its checkpoint ships in.
MODELS = (
    ("llama-3.1-8b", "bf16"),
    ("llama-3.3-70b", "bf16"),
    ("qwen3-32b", "bf16"),
    ("llama-3.1-405b", "bf16"),
    ("qwen3-30b-a3b", "bf16"),
    ("qwen3-235b-a22b", "bf16"),
    ("gpt-oss-120b", "fp4"),
    ("deepseek-v3", "fp8"),
)
GPUS = ("h100", "h200", "b200", "gb200")
ENGINES = silicon.ENGINES
PREFILL_TOKENS = (128, 512, 2048, 4096, 8192, 16384)
DECODE_BATCHES = (1, 8, 32, 128, 512)
CONTEXTS = (128, 2048, 8192, 32768)
MIXED = tuple((k, b, p) for k in (512, 2048) for b in (8, 64) for p in (2048, 8192))  # chunk,b,P

QUICK_MODELS = (("llama-3.3-70b", "bf16"), ("qwen3-235b-a22b", "bf16"))
QUICK_GPUS = ("h200",)
QUICK_ENGINES = ("vllm",)
QUICK_PREFILL = (512, 4096)
QUICK_BATCHES = (1, 32, 256)
QUICK_CONTEXTS = (2048, 8192)
QUICK_MIXED = ((512, 32, 4096),)

FIELDS = (
    "model",
    "gpu",
    "engine",
    "layout",
    "phase",
    "batch",
    "context",
    "tokens",
    "ours_ms",
    "silicon_ms",
)


@dataclass(frozen=True)
class Grid:
    models: tuple[tuple[str, str], ...]
    gpus: tuple[str, ...]
    engines: tuple[str, ...]
    prefill: tuple[int, ...]
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    mixed: tuple[tuple[int, int, int], ...]


FULL = Grid(MODELS, GPUS, ENGINES, PREFILL_TOKENS, DECODE_BATCHES, CONTEXTS, MIXED)
QUICK = Grid(
    QUICK_MODELS,
    QUICK_GPUS,
    QUICK_ENGINES,
    QUICK_PREFILL,
    QUICK_BATCHES,
    QUICK_CONTEXTS,
    QUICK_MIXED,
)


def layouts(moe: bool) -> list[tuple[int, int, int]]:
    """(tp, dp, ep): TP 1-8; a MoE model also runs DP attention + EP 4 and 8."""
    out = [(t, 1, 1) for t in (1, 2, 4, 8)]
    if moe:
        out += [(1, n, n) for n in (4, 8)]
    return out


def our_engine(model, gpu, dtype: str, layout, steps, eff: Efficiency | None = None) -> Engine:
    """The calculator's engine for a layout, as `layout_choices.engine_for` builds it."""
    tp, dp, ep = layout
    kv = "fp8" if dtype in ("fp8", "fp4") else "bf16"
    return Engine(
        model,
        gpu,
        dtype,
        kv,
        tp,
        eff or Efficiency(),
        dp=dp,
        ep=ep,
        domain_gpus=max(8, gpu.scaleup_domain_gpus),
        rdma_gb_per_s=gpu.scaleout_gbps / 8.0 * 0.8,
        steps=steps,
    )


def prompts_pass_ms(engine: Engine, decode_batch, context, prompts: int, tokens, start) -> float:
    """One pass carrying `prompts` prompt slices of `tokens` each after `start` earlier tokens
    (one per attention rank), as one roofline pass: the slices' causal attention work is that
    of `prompts * tokens` new tokens after `start - (prompts - 1) * tokens / 2`."""
    shifted = start - (prompts - 1) * tokens / 2.0
    return float(iteration_ms(engine, decode_batch, context, prompts * tokens, shifted))


def kv_fits(engine: Engine, sequences: float, context: float) -> bool:
    return bool(engine.kv_bytes_held(context) * sequences <= engine.kv_capacity_bytes())


def ours_ms(engine: Engine, phase: str, batch: float, context: float, tokens: float) -> float:
    """The calculator's time for a grid point (`batch` is the replica's decode batch; prefill and
    mixed passes carry `tokens` prompt tokens on each attention rank)."""
    dp = int(engine.dp)
    if phase == "prefill":
        return prompts_pass_ms(engine, 0.0, 0.0, dp, tokens, 0.0) + engine.prefill_overhead_ms
    if phase == "decode":
        return float(np.ravel(decode_step_ms(engine, float(batch), float(context)))[0])
    return prompts_pass_ms(engine, float(batch), context, dp, tokens, (context - tokens) / 2.0)


def points_for(engine: Engine, h, grid: Grid, base: dict) -> tuple[list[dict], int]:
    """Rows of one layout (ours and the database's), and how many points the database refused."""
    rows, refused = [], 0
    dp = int(engine.dp)

    def add(phase, batch, context, tokens, silicon_fn):
        nonlocal refused
        try:
            ref = silicon_fn()
        except silicon.Refused:
            refused += 1
            return
        ours = ours_ms(engine, phase, batch, context, tokens)
        rows.append(
            {
                **base,
                "phase": phase,
                "batch": batch,
                "context": context,
                "tokens": tokens,
                "ours_ms": round(ours, 4),
                "silicon_ms": round(ref, 4),
            }
        )

    for n in grid.prefill:
        if kv_fits(engine, dp, n):
            add("prefill", dp, 0, n, lambda n=n: silicon.prefill_ms(h, n))
    per_rank = sorted({max(1, round(b / dp)) for b in grid.batches})
    for b in per_rank:
        for c in grid.contexts:
            if kv_fits(engine, b * dp, c):
                add("decode", b * dp, c, 0, lambda b=b, c=c: silicon.decode_ms(h, b, c))
    for k, batch, p in grid.mixed:
        b = max(1, round(batch / dp))
        if kv_fits(engine, (b + 1) * dp, p):
            add("mixed", b * dp, p, k, lambda k=k, b=b, p=p: silicon.mixed_ms(h, k, b, p))
    return rows, refused


def count_points(engine: Engine, grid: Grid) -> int:
    """Points of a layout the grid asks for (KV permitting): each refused layout counts them."""
    dp = int(engine.dp)
    n = sum(kv_fits(engine, dp, t) for t in grid.prefill)
    per_rank = sorted({max(1, round(b / dp)) for b in grid.batches})
    n += sum(kv_fits(engine, b * dp, c) for b in per_rank for c in grid.contexts)
    n += sum(kv_fits(engine, (max(1, round(b / dp)) + 1) * dp, p) for _, b, p in grid.mixed)
    return n


def default_efficiency(gpu_id: str, engine: str, moe: bool, dtype: str) -> Efficiency:
    """What a workload setting no `efficiency.*` is priced with (`workload.resolve`): the
    fitted table's entry for its GPU x engine x family x format."""
    fit = step_fit.fitted(gpu_id, engine, moe, dtype)
    return Efficiency(**fit.constants) if fit else Efficiency()


def roofline_efficiency(gpu_id: str, engine: str, moe: bool, dtype: str) -> Efficiency:
    """The plain roofline's class defaults (prefill MFU 0.45, MBU 0.7, ...)."""
    return Efficiency()


def run(grid: Grid, step_source: str, log):
    """(rows, refused points) over the grid; `step_source` default (the fitted table), roofline
    (the class defaults) or silicon (measured steps, the fitted table where not covered)."""
    efficiency = roofline_efficiency if step_source == "roofline" else default_efficiency
    rows, refused = [], 0
    for engine_name in grid.engines:
        for gpu_id in grid.gpus:
            gpu = get_gpu(gpu_id)
            for model_id, dtype in grid.models:
                model = get_model(model_id)
                key = silicon.Key(
                    model_id, gpu_id, engine_name, dtype, "fp8" if dtype != "bf16" else "bf16"
                )
                moe = model.moe is not None
                steps = silicon_steps.steps_for(key, moe) if step_source == "silicon" else None
                eff = efficiency(gpu_id, engine_name, moe, dtype)
                for lay in layouts(moe):
                    engine = our_engine(model, gpu, dtype, lay, steps, eff)
                    if not engine.fits():
                        continue
                    base = {
                        "model": model_id,
                        "gpu": gpu_id,
                        "engine": engine_name,
                        "layout": label(*lay),
                        "_layout": lay,
                        "_dtype": dtype,
                    }
                    try:
                        h = silicon.handle(key, *lay, moe)
                    except silicon.Refused as exc:
                        n = count_points(engine, grid)
                        refused += n
                        log(
                            f"  refused {n:3d} points: {model_id} {gpu_id} {engine_name} "
                            f"{base['layout']}: {str(exc)[:120]}"
                        )
                        continue
                    got, missed = points_for(engine, h, grid, base)
                    rows += got
                    refused += missed
    return rows, refused


def family_of(model_id: str) -> str:
    return "moe" if get_model(model_id).moe is not None else "dense"


def groups(rows: list[dict]) -> list[dict]:
    """Signed and absolute error (%) per family x phase x GPU x engine."""
    by: dict[tuple, list[float]] = {}
    for r in rows:
        key = (family_of(r["model"]), r["phase"], r["gpu"], r["engine"])
        by.setdefault(key, []).append((r["ours_ms"] - r["silicon_ms"]) / r["silicon_ms"] * 100)
    out = []
    for (family, phase, gpu, engine), errors in sorted(by.items()):
        e = np.asarray(errors)
        out.append(
            {
                "family": family,
                "phase": phase,
                "gpu": gpu,
                "engine": engine,
                "n": len(e),
                "median_signed_pct": round(float(np.median(e)), 1),
                "median_abs_pct": round(float(np.median(np.abs(e))), 1),
                "p90_abs_pct": round(float(np.percentile(np.abs(e), 90)), 1),
            }
        )
    return out


def rollup(rows: list[dict]) -> list[dict]:
    """The same errors per family x phase x GPU, engines pooled."""
    pooled = [{**r, "engine": "all"} for r in rows]
    return groups(pooled)


def print_table(title: str, gs: list[dict]) -> None:
    print(f"\n{title}")
    print(
        f"{'family':6} {'phase':8} {'gpu':6} {'engine':7} {'n':>5} "
        f"{'med signed':>10} {'med |e|':>8} {'p90 |e|':>8}"
    )
    for g in gs:
        print(
            f"{g['family']:6} {g['phase']:8} {g['gpu']:6} {g['engine']:7} {g['n']:5d} "
            f"{g['median_signed_pct']:+9.1f}% {g['median_abs_pct']:7.1f}% {g['p90_abs_pct']:7.1f}%"
        )


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def silicon_installed() -> bool:
    """Whether aiconfigurator-core is there; says how to install it where not."""
    if silicon.installed():
        return True
    print(
        "error: needs aiconfigurator-core: pip install 'disagg-decider[silicon]'", file=sys.stderr
    )
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small grid (one GPU and engine)")
    ap.add_argument(
        "--step-source",
        choices=("default", "roofline", "silicon"),
        default="default",
        help="default: the fitted table (calc/step_fit.json); roofline: the class defaults",
    )
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--csv", type=Path, default=Path("physics_vs_silicon.csv"))
    ap.add_argument("--force", action="store_true", help="overwrite an existing --csv file")
    ap.add_argument("--worst", type=int, default=12, help="worst rows to print")
    args = ap.parse_args(argv)
    if not silicon_installed():
        return 2
    if args.csv.exists() and not args.force:
        print(f"error: --csv {args.csv} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    log = (lambda s: print(s, file=sys.stderr)) if args.format == "json" else print
    t0 = time.process_time()
    rows, refused = run(QUICK if args.quick else FULL, args.step_source, log)
    write_csv(args.csv, rows)
    gs = groups(rows)
    if args.format == "json":
        out = {
            "points": len(rows),
            "refused": refused,
            "step_source": args.step_source,
            "groups": gs,
        }
        print(json.dumps(out, indent=1))
        return 0
    print_table(
        f"step source {args.step_source}: ours vs aiconfigurator-core "
        f"{silicon.TESTED_VERSION} (error = ours / silicon - 1)",
        gs,
    )
    print_table("engines pooled", rollup(rows))
    worst = sorted(rows, key=lambda r: -abs(r["ours_ms"] / r["silicon_ms"] - 1))[: args.worst]
    print(f"\nworst {len(worst)} rows:")
    for r in worst:
        err = (r["ours_ms"] / r["silicon_ms"] - 1) * 100
        print(
            f"  {r['model']} {r['gpu']} {r['engine']} {r['layout']} {r['phase']} "
            f"batch {r['batch']} context {r['context']} tokens {r['tokens']}: "
            f"ours {r['ours_ms']:.1f} ms, silicon {r['silicon_ms']:.1f} ms ({err:+.0f}%)"
        )
    print(
        f"\n{len(rows)} points, {refused} refused by the database; rows in {args.csv}; "
        f"{time.process_time() - t0:.0f} s CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
