"""Fit the default step physics to aiconfigurator-core's measured step times.

The default pass model (`calc/physics/step_split.py`) is

    t = max(weights / (HBM x decode_mbu),
            dense FLOPs / mfu(T) + routed FLOPs x (1 + s_ep (EP - 1)) / mfu_e(T k / E))
        + max(KV bytes / (HBM x kv_mbu), attention FLOPs / (peak x attention_mfu))
        + allreduce_time_scale x all-reduce bytes time + all-reduces x allreduce_latency_us
        + alltoall_time_scale x all-to-all time + step_overhead_ms (+ prefill_overhead_ms)

with mfu(t) = MFU x t / (t + saturation_tokens) / (1 + mfu_tp_slope log2 TP) (MFU: prefill_mfu
for passes carrying prompt tokens, decode_mfu otherwise; mfu_e the same at the tokens each
routed expert receives, saturating at expert_saturation_tokens). This script fits its
constants per GPU x engine x model family (dense, MoE) x weight format (bf16, fp8, fp4) to the
database's prefill, decode and mixed steps on the grid of `physics_vs_silicon.py`: coordinate
descent over fixed grids of values from a few fixed starting points (deterministic: the same
database gives the same table), minimising |log error| + 2 log error^2 (the median and the tail
both count) with each phase weighted equally. It writes the table
with its source and residuals (`calc/step_fit.json`), which the calculator reads as its
default physics (`catalog/step_fit.py`):

    python benchmarks/fit_step_physics.py                      # all GPUs and engines
    python benchmarks/fit_step_physics.py --gpu h200 --engine vllm --out -   # one, to stdout

The features each row's time is assembled from are read off the calculator's own engine
(weights, KV and FLOPs at unit efficiency, its all-reduce and all-to-all terms), and
`tests/test_step_fit.py` checks that `predict` here equals the calculator's pass with the
fitted constants, so the residuals shipped are the calculator's.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT / "skill", ROOT / "benchmarks"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import physics_vs_silicon as pvs  # noqa: E402
from disagg_decider.calc.physics import model_costs, silicon  # noqa: E402
from disagg_decider.catalog import (  # noqa: E402
    get_gpu,
    get_model,
    step_fit,
)
from disagg_decider.workload import Efficiency  # noqa: E402

TABLE = step_fit.TABLE_PATH


def _geo(lo: float, hi: float, n: int, digits: int = 4) -> np.ndarray:
    return np.round(np.geomspace(lo, hi, n), digits)


# The values each constant may take (coordinate descent picks the best on each in turn).
GRIDS: dict[str, np.ndarray] = {
    "decode_mbu": np.round(np.arange(0.30, 1.0001, 0.02), 2),
    "kv_mbu": _geo(0.02, 1.0, 50, 3),
    "prefill_mfu": _geo(0.02, 1.0, 50, 3),
    "decode_mfu": _geo(0.02, 1.0, 50, 3),
    "saturation_tokens": np.array([0.0, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 2048]),
    "expert_saturation_tokens": np.array([0.0, 4, 8, 16, 32, 64, 128, 256, 512]),
    "attention_mfu": _geo(0.002, 1.0, 60),
    "allreduce_time_scale": np.concatenate([[0.0], _geo(0.25, 16, 25, 3)]),
    "alltoall_time_scale": np.concatenate([[0.0], _geo(0.25, 32, 22, 3)]),
    "mfu_tp_slope": np.round(np.arange(0.0, 1.0001, 0.05), 2),
    "expert_parallel_slope": np.round(np.arange(0.0, 2.0001, 0.025), 3),
    "allreduce_latency_us": np.array([0.0, 2, 4, 8, 12, 16, 24, 32, 48, 64]),
    "step_overhead_ms": np.round(np.arange(0.0, 8.0001, 0.25), 2),
    "prefill_overhead_ms": np.round(np.arange(0.0, 10.0001, 0.5), 2),
}
MOE_ONLY = ("expert_saturation_tokens", "alltoall_time_scale", "expert_parallel_slope")
SWEEPS = 8
MODEL = __doc__.split("\n\n")[1].strip()
# Where coordinate descent starts: the plain roofline's defaults, the new terms neutral.
START = {
    **{n: getattr(Efficiency(), n) for n in GRIDS if getattr(Efficiency(), n) is not None},
    "kv_mbu": 0.7,
    "attention_mfu": 0.45,
    "expert_saturation_tokens": 0.0,
    "alltoall_time_scale": 1.0,
    "expert_parallel_slope": 0.0,
}
STARTS = (
    START,
    # Slow GEMMs that scale poorly with TP and EP (MoE formats the engines run slowly).
    {
        **START,
        "prefill_mfu": 0.3,
        "decode_mfu": 0.3,
        "mfu_tp_slope": 0.2,
        "expert_parallel_slope": 0.3,
    },
    # Slow attention (MLA) and a low KV bandwidth share.
    {**START, "attention_mfu": 0.1, "kv_mbu": 0.3},
    # GEMMs far from saturation until thousands of tokens, EP costing more per rank.
    {
        **START,
        "prefill_mfu": 0.5,
        "decode_mfu": 0.5,
        "saturation_tokens": 1024.0,
        "expert_parallel_slope": 0.3,
    },
    # Both, with expert parallelism costing more per rank.
    {
        **START,
        "prefill_mfu": 0.2,
        "decode_mfu": 0.2,
        "expert_parallel_slope": 0.5,
        "attention_mfu": 0.2,
        "kv_mbu": 0.5,
    },
)
UNIT = Efficiency(
    decode_mbu=1.0,
    kv_mbu=1.0,
    prefill_mfu=1.0,
    decode_mfu=1.0,
    saturation_tokens=0.0,
    attention_mfu=1.0,
    allreduce_latency_us=1.0,
    step_overhead_ms=0.0,
    prefill_overhead_ms=0.0,
)


def pass_shape(row: dict) -> tuple[float, float, float, float]:
    """(decode batch, decode context, prompt tokens, prompt start) of a row's pass, as
    `physics_vs_silicon.ours_ms` prices it (one prompt slice per attention-DP rank)."""
    dp = row["_layout"][1]
    if row["phase"] == "prefill":
        c, start = dp * row["tokens"], 0.0
        return 0.0, 0.0, float(c), start - (dp - 1) * row["tokens"] / 2.0
    if row["phase"] == "decode":
        return float(row["batch"]), float(row["context"]), 0.0, 0.0
    c, start = dp * row["tokens"], (row["context"] - row["tokens"]) / 2.0
    return (
        float(row["batch"]),
        float(row["context"]),
        float(c),
        start - (dp - 1) * row["tokens"] / 2.0,
    )


def features(row: dict, cache: dict) -> list[float]:
    """A row's pass at unit efficiency, term by term, read off the calculator's engine."""
    model, gpu = get_model(row["model"]), get_gpu(row["gpu"])
    lay = row["_layout"]
    key = (row["model"], row["gpu"], lay, row["_dtype"])
    if key not in cache:
        cache[key] = pvs.our_engine(model, gpu, row["_dtype"], lay, None, UNIT)
    e = cache[key]
    b, context, c, start = pass_shape(row)
    tokens = b + c
    k = e.split_constants
    weights = model_costs.weight_bytes_read(model, e.weights_dtype, tokens) + e.extra_weight_bytes
    attention = b * model_costs.attention_flops(model, 1.0, context) + model_costs.attention_flops(
        model, c, start
    )
    a2a = 0.0
    if model.moe is not None and lay[2] > 1:
        per_token, fixed = e.prefill_alltoall if c > 0 else e.decode_alltoall
        a2a = float(per_token) * tokens + float(fixed)
    return [
        float(weights * e.ms_per_byte),  # weights
        float(b * e.kv_bytes_held(context) * e.kv_ms_per_byte),  # kv
        float(tokens * k.dense_flops_per_token * e.ms_per_flop),  # dense
        float(tokens * k.routed_flops_per_token * e.ms_per_flop),  # routed
        float(attention * e.ms_per_flop),  # attention
        float(e.allreduce_coefficients[0] * tokens),  # allreduce
        float(e.allreduce_coefficients[1] * 1e3),  # all-reduces per pass (ms per us of latency)
        a2a,  # alltoall
        tokens,
        tokens * k.routed_share,  # tokens per expert
        float(np.log2(lay[0])),  # log2 TP
        float(lay[2] - 1),  # EP - 1
    ]


FEATURES = (
    "weights",
    "kv",
    "dense",
    "routed",
    "attention",
    "allreduce",
    "allreduces",
    "alltoall",
    "tokens",
    "expert_tokens",
    "log2_tp",
    "ep_minus_1",
)


def arrays(rows: list[dict]) -> dict[str, np.ndarray]:
    cache: dict = {}
    values = np.array([features(r, cache) for r in rows], dtype=float).reshape(-1, len(FEATURES))
    out = {name: values[:, i] for i, name in enumerate(FEATURES)}
    out["prompt"] = np.array([r["phase"] != "decode" for r in rows])
    out["prefill"] = np.array([r["phase"] == "prefill" for r in rows])
    out["silicon"] = np.array([r["silicon_ms"] for r in rows], dtype=float)
    phases = np.array([r["phase"] for r in rows])
    weight = np.zeros(len(rows))
    for phase in set(phases):  # each phase counts equally, however many points it has
        weight[phases == phase] = 1.0 / np.sum(phases == phase)
    out["weight"] = weight
    return out


def predict(c: dict[str, float], p: dict[str, np.ndarray]) -> np.ndarray:
    """`step_split.pass_ms` on the features (plus a prefill's fixed overhead)."""
    mfu = np.where(p["prompt"], c["prefill_mfu"], c["decode_mfu"])
    mfu = mfu / (1.0 + c["mfu_tp_slope"] * p["log2_tp"])
    compute = p["dense"] * (p["tokens"] + c["saturation_tokens"]) / p["tokens"]
    if "expert_saturation_tokens" in c:
        routed = p["routed"] * (1.0 + c["expert_parallel_slope"] * p["ep_minus_1"])
        share = p["expert_tokens"]
        compute = compute + routed * (share + c["expert_saturation_tokens"]) / np.maximum(
            share, 1e-30
        )
    compute = compute / mfu
    attention = np.maximum(p["kv"] / c["kv_mbu"], p["attention"] / c["attention_mfu"])
    comm = c["allreduce_time_scale"] * p["allreduce"]
    comm = comm + p["allreduces"] * c["allreduce_latency_us"] / 1e3
    comm = comm + c.get("alltoall_time_scale", 1.0) * p["alltoall"]
    t = np.maximum(p["weights"] / c["decode_mbu"], compute) + attention + comm
    return t + c["step_overhead_ms"] + np.where(p["prefill"], c["prefill_overhead_ms"], 0.0)


def loss(c: dict[str, float], p: dict[str, np.ndarray]) -> float:
    r = np.abs(np.log(predict(c, p) / p["silicon"]))
    return float(np.sum((r + 2.0 * r * r) * p["weight"]))


def descend(c: dict[str, float], p: dict[str, np.ndarray]) -> dict[str, float]:
    """Coordinate descent from `c` over `GRIDS`; ties go to the first value."""
    c = dict(c)
    for _ in range(SWEEPS):
        for name in c:
            values = GRIDS[name]
            losses = [loss({**c, name: float(v)}, p) for v in values]
            c[name] = float(values[int(np.argmin(losses))])
    return c


def fit(p: dict[str, np.ndarray], moe: bool) -> dict[str, float]:
    """The best of coordinate descents from each of `STARTS` (one descent can settle where
    lowering one MFU fits a few layouts that another constant would fit better)."""
    names = [n for n in GRIDS if moe or n not in MOE_ONLY]
    best, best_loss = {}, np.inf
    for start in STARTS:
        c = descend({n: start[n] for n in names}, p)
        if loss(c, p) < best_loss:
            best, best_loss = c, loss(c, p)
    return best


def residuals(c: dict[str, float], p: dict[str, np.ndarray], phases: np.ndarray) -> dict:
    err = (predict(c, p) / p["silicon"] - 1.0) * 100.0
    out = {}
    for phase in ("prefill", "decode", "mixed"):
        e = err[phases == phase]
        if len(e):
            out[phase] = {
                "n": len(e),
                "median_signed_pct": round(float(np.median(e)), 1),
                "median_abs_pct": round(float(np.median(np.abs(e))), 1),
                "p90_abs_pct": round(float(np.percentile(np.abs(e), 90)), 1),
            }
    return out


def entry_key(row: dict) -> tuple[str, str, str, str]:
    """(gpu, engine, family, format) of the table entry a row belongs to."""
    fmt = step_fit.weight_format(row["_dtype"])
    return row["gpu"], row["engine"], pvs.family_of(row["model"]), fmt


def fit_table(gpus, engines, log=lambda s: None) -> list[dict]:
    grid = replace(pvs.FULL, gpus=tuple(gpus), engines=tuple(engines))
    rows, _ = pvs.run(grid, "roofline", log)
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault(entry_key(r), []).append(r)
    fits = []
    for gpu in gpus:
        for engine in engines:
            for family in ("dense", "moe"):
                for fmt in ("bf16", "fp8", "fp4"):
                    chosen = by.get((gpu, engine, family, fmt))
                    if not chosen:
                        continue
                    p = arrays(chosen)
                    c = fit(p, family == "moe")
                    phases = np.array([r["phase"] for r in chosen])
                    fits.append(
                        {
                            "gpu": gpu,
                            "engine": engine,
                            "family": family,
                            "format": fmt,
                            "models": sorted({r["model"] for r in chosen}),
                            "n": len(chosen),
                            "constants": c,
                            "residuals": residuals(c, p, phases),
                        }
                    )
                    log(f"{gpu} {engine} {family} {fmt}: {c}")
    return fits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="append", help="fit these GPUs only (repeatable)")
    ap.add_argument("--engine", action="append", help="fit these engines only (repeatable)")
    ap.add_argument("--out", default=str(TABLE), help="where to write the table; - for stdout")
    args = ap.parse_args(argv)
    if not pvs.silicon_installed():
        return 2
    gpus = tuple(args.gpu or pvs.GPUS)
    engines = tuple(args.engine or pvs.ENGINES)
    unknown = [g for g in gpus if g not in pvs.GPUS] + [e for e in engines if e not in pvs.ENGINES]
    if unknown:
        print(
            f"error: not on the grid: {', '.join(unknown)} "
            f"(GPUs {pvs.GPUS}, engines {pvs.ENGINES})",
            file=sys.stderr,
        )
        return 2
    table = {
        "source": f"aiconfigurator-core {silicon.TESTED_VERSION} (PyPI), "
        "benchmarks/fit_step_physics.py on the grid of benchmarks/physics_vs_silicon.py",
        "model": MODEL,
        "fallbacks": {
            "gpus": {g: {"as": to, "why": why} for g, (to, why) in step_fit.GPU_FALLBACK.items()},
            "formats": "a format with no entry for its family takes the family's bf16 entry",
        },
        "fits": fit_table(gpus, engines, log=lambda s: print(s, file=sys.stderr)),
    }
    text = json.dumps(table, indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
