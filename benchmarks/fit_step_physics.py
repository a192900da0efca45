"""Fit the roofline's efficiency constants to aiconfigurator-core's measured step times.

The default physics (`calc/step.py`) prices a pass as the longer of its memory time (bytes over
HBM bandwidth x MBU) and its compute time (FLOPs over peak x MFU, MFU scaled by tokens / (tokens
+ saturation_tokens)), plus tensor- and expert-parallel communication, a per-step overhead and,
for a prefill, a fixed prefill overhead. This script keeps that model and fits its six
constants (decode_mbu, prefill_mfu, decode_mfu, saturation_tokens, step_overhead_ms,
prefill_overhead_ms) per GPU x engine x model family (dense, MoE) to the database's prefill,
decode and mixed steps on the grid of `physics_vs_silicon.py`, by coordinate descent over fixed
grids of values (deterministic: the same database gives the same table), minimising the mean
squared log error. It writes the table with its source and residuals:

    python benchmarks/fit_step_physics.py                      # all GPUs and engines
    python benchmarks/fit_step_physics.py --gpu h200 --engine vllm --out -   # one, to stdout

The table is not the default physics (yet): `physics_vs_silicon.py --step-source fitted` prices
the grid with it, and `tests/test_step_fit.py` checks that it reproduces from this script.
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
from disagg_decider.calc import silicon  # noqa: E402
from disagg_decider.catalog import get_gpu, get_model  # noqa: E402
from disagg_decider.workload import Efficiency  # noqa: E402

TABLE = ROOT / "skill" / "disagg_decider" / "calc" / "step_fit.json"
TINY = 1e-6  # an efficiency that makes one term dominate the pass, to read it off

# The values each constant may take (coordinate descent picks the best on each in turn).
GRIDS: dict[str, np.ndarray] = {
    "decode_mbu": np.round(np.arange(0.30, 1.0001, 0.02), 2),
    "prefill_mfu": np.round(np.arange(0.10, 1.0001, 0.02), 2),
    "decode_mfu": np.round(np.arange(0.10, 1.0001, 0.02), 2),
    "saturation_tokens": np.array([0.0, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 2048]),
    "step_overhead_ms": np.round(np.arange(0.0, 6.0001, 0.25), 2),
    "prefill_overhead_ms": np.round(np.arange(0.0, 10.0001, 0.5), 2),
}
SWEEPS = 6
MODEL = (
    "t = max(bytes / (HBM x decode_mbu), FLOPs / (peak x mfu x T / (T + saturation_tokens))) "
    "+ all-reduce and all-to-all time + step_overhead_ms (+ prefill_overhead_ms for a prefill); "
    "mfu = prefill_mfu for passes with prompt tokens, decode_mfu otherwise; T = tokens in the pass"
)


def _unit(**update) -> Efficiency:
    base = {
        "decode_mbu": 1.0,
        "prefill_mfu": 1.0,
        "decode_mfu": 1.0,
        "saturation_tokens": 0.0,
        "step_overhead_ms": 0.0,
        "prefill_overhead_ms": 0.0,
    }
    return Efficiency(**{**base, **update})


UNIT, MEMORY, COMPUTE = _unit(), _unit(decode_mbu=TINY), _unit(prefill_mfu=TINY, decode_mfu=TINY)


def parts(row: dict) -> tuple[float, float, float, float]:
    """(memory ms at MBU 1, compute ms at MFU 1, communication ms, tokens) of a row's pass,
    read off the calculator itself by making one term dominate at a time."""
    model, gpu = get_model(row["model"]), get_gpu(row["gpu"])
    lay = row["_layout"]

    def t(eff: Efficiency) -> float:
        engine = pvs.our_engine(model, gpu, row["_dtype"], lay, None, eff)
        return pvs.ours_ms(engine, row["phase"], row["batch"], row["context"], row["tokens"])

    memory, compute = t(MEMORY) * TINY, t(COMPUTE) * TINY
    comm = max(t(UNIT) - max(memory, compute), 0.0)
    dp = lay[1]
    prompt = row["tokens"] * dp if row["phase"] != "decode" else 0.0
    return memory, compute, comm, float(row["batch"] if row["phase"] != "prefill" else 0) + prompt


def predict(c: dict[str, float], p: dict[str, np.ndarray]) -> np.ndarray:
    mfu = np.where(p["prompt"], c["prefill_mfu"], c["decode_mfu"])
    mfu = mfu * p["tokens"] / (p["tokens"] + c["saturation_tokens"])
    t = np.maximum(p["memory"] / c["decode_mbu"], p["compute"] / mfu) + p["comm"]
    return t + c["step_overhead_ms"] + np.where(p["prefill"], c["prefill_overhead_ms"], 0.0)


def loss(c: dict[str, float], p: dict[str, np.ndarray]) -> float:
    return float(np.mean(np.log(predict(c, p) / p["silicon"]) ** 2))


def fit(p: dict[str, np.ndarray]) -> dict[str, float]:
    """Coordinate descent from the defaults over `GRIDS`; ties go to the first value."""
    defaults = Efficiency()
    c = {name: float(getattr(defaults, name)) for name in GRIDS}
    for _ in range(SWEEPS):
        for name, values in GRIDS.items():
            losses = [loss({**c, name: float(v)}, p) for v in values]
            c[name] = float(values[int(np.argmin(losses))])
    return c


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


def arrays(rows: list[dict]) -> dict[str, np.ndarray]:
    values = np.array([parts(r) for r in rows], dtype=float).reshape(-1, 4)
    return {
        "memory": values[:, 0],
        "compute": values[:, 1],
        "comm": values[:, 2],
        "tokens": values[:, 3],
        "prompt": np.array([r["phase"] != "decode" for r in rows]),
        "prefill": np.array([r["phase"] == "prefill" for r in rows]),
        "silicon": np.array([r["silicon_ms"] for r in rows], dtype=float),
    }


def fit_table(gpus, engines, log=lambda s: None) -> list[dict]:
    grid = replace(pvs.FULL, gpus=tuple(gpus), engines=tuple(engines))
    rows, _ = pvs.run(grid, "default", log)
    fits = []
    for gpu in gpus:
        for engine in engines:
            for family in ("dense", "moe"):
                chosen = [
                    r
                    for r in rows
                    if r["gpu"] == gpu
                    and r["engine"] == engine
                    and pvs.family_of(r["model"]) == family
                ]
                if not chosen:
                    continue
                p = arrays(chosen)
                c = fit(p)
                phases = np.array([r["phase"] for r in chosen])
                fits.append(
                    {
                        "gpu": gpu,
                        "engine": engine,
                        "family": family,
                        "n": len(chosen),
                        "constants": c,
                        "residuals": residuals(c, p, phases),
                    }
                )
                log(f"{gpu} {engine} {family}: {c}")
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
