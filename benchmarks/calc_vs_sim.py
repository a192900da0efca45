"""The calculator against its own simulator on a seeded set of varied workloads.

Calculator and simulator share every step time, KV size and transfer time, so they can only
disagree on queueing, batching and memory. For each workload this script takes the
calculator's best layout of each mode on the whole cluster (its pools at its max rate), and
the simulator measures, on exactly those pools:

- goodput: the highest rate at which 99% of the requests arriving in steady state (warm-up and
  drain excluded, `sim.metrics.steady_window`) meet both p99 SLOs, by bisection over the rate;
- TTFT and TPOT p99 of steady-state requests at the calculator's max rate.

It prints winner agreement (the mode with more goodput per GPU), calculator / simulator goodput
per mode (median, 10th and 90th percentile, worst) and the p99 latency ratios.

    python benchmarks/calc_vs_sim.py            # 40 workloads (about 10-20 min on one core)
    python benchmarks/calc_vs_sim.py --quick    # 8 workloads, the test suite's regression set
    python benchmarks/calc_vs_sim.py --jobs 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "skill") not in sys.path:
    sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.catalog import get_model  # noqa: E402
from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.errors import UserError  # noqa: E402
from disagg_decider.sim import metrics, run  # noqa: E402
from disagg_decider.sim.goodput import max_rate, replay_at  # noqa: E402
from disagg_decider.workload import Workload, resolve, with_rate  # noqa: E402

ATTAINMENT = 0.99
SEED = 2026
# (model, weights dtype, GPUs it is served on): every catalog family.
MODELS = (
    ("llama-3.1-8b", "bf16", ("h100", "a100-80g", "l40s", "h200")),
    ("llama-3.3-70b", "fp8", ("h100", "h200", "b200")),
    ("llama-3.3-70b", "bf16", ("h200", "b200", "mi300x")),
    ("qwen3-32b", "fp8", ("h100", "h200", "b200")),
    ("mixtral-8x7b", "bf16", ("h100", "a100-80g", "h200")),
    ("gpt-oss-120b", "fp8", ("h100", "h200", "b200")),
    ("qwen3-235b-a22b", "fp8", ("h200", "b200")),
    ("deepseek-v3", "fp8", ("h200", "b200")),
    ("llama-3.1-405b", "fp8", ("h200", "b200")),
    ("opt-13b", "bf16", ("a100-80g", "h100")),
)
QUICK = 8
LATENCY_REQUESTS = 40_000
# Requests per decode seat of the pools: the steady window (70% of the arrivals,
# `metrics.steady_window`) must pass through every seat many times, or a pool of thousands of
# seats (DP8/EP8 replicas with 4,096 each) is never filled and its goodput reads far above the
# calculator's. Bounded so the 40-workload run stays a few minutes.
REQUESTS_PER_SEAT = 12 / 0.7
MAX_REQUESTS = 200_000


def workloads(count: int, seed: int = SEED) -> list[Workload]:
    """`count` varied workloads, the same for the same seed; models cycle through `MODELS`."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        model, dtype, gpus = MODELS[k % len(MODELS)]
        gpu = gpus[int(rng.integers(len(gpus)))]
        prompt = round(float(np.exp(rng.uniform(np.log(256), np.log(16384)))))
        spread = float(rng.uniform(1.0, 3.0))
        output = round(float(np.exp(rng.uniform(np.log(64), np.log(2048)))))
        # Prompts and outputs stay inside the model's context (the simulator would clip them).
        context = get_model(model).max_context_tokens
        output = min(output, context // 8)
        prompt = min(prompt, int((context - 2 * output) / spread))
        big = model in ("deepseek-v3", "llama-3.1-405b", "qwen3-235b-a22b")
        cluster = int(rng.choice([16, 24, 32] if big else [8, 16, 24, 32]))
        data = {
            "name": f"w{k:02d}-{model}-{gpu}",
            "model": model,
            "weights_dtype": dtype,
            "kv_cache_dtype": "fp8" if dtype == "fp8" else dtype,
            "engine": "vllm",
            "traffic": {
                "prompt_tokens": {"p50": prompt, "p99": max(round(prompt * spread), prompt)},
                "output_tokens": {"p50": output, "p99": output * 2},
                "requests_per_second": 1.0,
            },
            "slo": {
                "ttft_ms": float(round(np.exp(rng.uniform(np.log(300), np.log(5000))))),
                "tpot_ms": float(round(rng.uniform(10, 60))),
            },
            "cluster": {"gpu": gpu, "gpus": cluster, "gpus_per_node": 8, "network": "ib-ndr-400"},
            "ops": {"maturity": "high"},
        }
        w = Workload.model_validate(data)
        # A workload no mode can serve compares nothing: draw its SLOs again (a few times).
        for _ in range(8):
            v = decide(w)
            if v.colocated.max_rate_per_s or v.disaggregated.max_rate_per_s:
                break
            data["slo"] = {
                "ttft_ms": float(round(np.exp(rng.uniform(np.log(300), np.log(5000))))),
                "tpot_ms": float(round(rng.uniform(10, 60))),
            }
            w = Workload.model_validate(data)
        out.append(w)
    return out


@dataclass
class Row:
    name: str
    calc_winner: str
    sim_winner: str
    calc_colocated: float  # req/s on the cluster
    sim_colocated: float
    calc_disaggregated: float
    sim_disaggregated: float
    ttft_ratio_colocated: float  # calculator / simulator p99 at the calculator's max rate
    ttft_ratio_disaggregated: float
    tpot_ratio_colocated: float
    tpot_ratio_disaggregated: float
    layouts: str
    seconds: float


def request_count(w: Workload, rate: float, seats: int = 0, lo: int = 2000, hi: int = 12000) -> int:
    """Enough requests that the steady window spans many request lifetimes at this rate, and
    passes through each of the pools' `seats` (decode sequences they hold at once) many times.

    The lifetimes alone are capped at `hi`; the seats raise that cap up to `MAX_REQUESTS`, so
    pools of a few hundred seats keep the runs they had.
    """
    life_s = (w.slo.ttft_ms + w.traffic.output_tokens.p99 * w.slo.tpot_ms) / 1e3
    by_seats = seats * REQUESTS_PER_SEAT
    cap = max(hi, min(by_seats, MAX_REQUESTS))
    return int(min(max(lo, rate * life_s * 12 / 0.7, by_seats), cap))


def seats_of(s, mode: str) -> int:
    """Decode sequences the simulated pools hold at once (`max_batch` per replica)."""
    if mode == "colocated":
        return s.colocated.replicas * s.colocated.max_batch
    return s.disaggregated.decode_replicas * s.disaggregated.max_batch


def _steady_attainment(w: Workload, s, mode: str, base, rate: float) -> float:
    """Share of steady-state requests meeting both SLOs when `base` is replayed at `rate`."""
    replayed = replay_at(base, rate)
    outcome = run.simulate_mode(s, mode, replayed)
    return metrics.attainment(outcome, replayed, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]


def compare_one(w: Workload) -> Row:
    """Calculator and simulator on one workload, each mode on the calculator's pools."""
    start = time.perf_counter()
    r = resolve(w)
    first = decide(w)
    calc = {
        "colocated": first.colocated.max_rate_per_s,
        "disaggregated": first.disaggregated.max_rate_per_s,
    }
    sim, ttft, tpot, layouts = {}, {}, {}, []
    for mode in ("colocated", "disaggregated"):
        top = calc[mode] or 0.0
        if top <= 0:
            sim[mode], ttft[mode], tpot[mode] = 0.0, math.nan, math.nan
            continue
        # Size the pools for (just under) the calculator's max rate: its layout on the cluster.
        w_top = with_rate(w, top * 0.999)
        v = decide(w_top)
        s = run.setup(resolve(w_top), v)
        # p99 latencies near a pool's saturation need long runs (waits correlate over many
        # requests): one long run at the calculator's max rate, shorter ones for the bisection.
        seats = seats_of(s, mode)
        n_long = max(LATENCY_REQUESTS, min(int(seats * REQUESTS_PER_SEAT), MAX_REQUESTS))
        long = run.synthetic_requests(r, n_long, SEED, rate_per_s=1.0)
        at = replay_at(long, top)
        out = run.simulate_mode(s, mode, at)
        window = metrics.steady_window(n_long)
        sim_ttft = np.percentile(metrics.ttft_ms(out, at)[window], 99)
        t = metrics.tpot_ms(out, at)[window]
        sim_tpot = np.percentile(t[at.output[window] > 1], 99)
        result = getattr(v, mode)
        ttft[mode] = (result.ttft_p99_ms or math.nan) / sim_ttft
        tpot[mode] = (result.tpot_p99_ms or math.nan) / sim_tpot

        n = request_count(w, top, seats)
        base = run.synthetic_requests(r, n, SEED, rate_per_s=1.0)
        try:
            sim[mode] = max_rate(
                partial(_steady_attainment, w, s, mode, base), ATTAINMENT, top, 0.02
            )
        except UserError:  # nothing failed up to 2^20 x the calculator's rate: say so, loudly
            sim[mode] = math.inf
        layouts.append(s.colocated.layout() if mode == "colocated" else s.disaggregated.layout())
    calc_winner = "disaggregated" if calc["disaggregated"] > calc["colocated"] else "colocated"
    sim_winner = "disaggregated" if sim["disaggregated"] > sim["colocated"] else "colocated"
    return Row(
        name=w.name,
        calc_winner=calc_winner,
        sim_winner=sim_winner,
        calc_colocated=calc["colocated"],
        sim_colocated=sim["colocated"],
        calc_disaggregated=calc["disaggregated"],
        sim_disaggregated=sim["disaggregated"],
        ttft_ratio_colocated=ttft["colocated"],
        ttft_ratio_disaggregated=ttft["disaggregated"],
        tpot_ratio_colocated=tpot["colocated"],
        tpot_ratio_disaggregated=tpot["disaggregated"],
        layouts=" | ".join(layouts),
        seconds=time.perf_counter() - start,
    )


def goodput_ratios(rows: list[Row], mode: str) -> np.ndarray:
    """calc / sim goodput where either side serves something (both 0 agree: ratio 1)."""
    out = []
    for row in rows:
        c, s = getattr(row, f"calc_{mode}"), getattr(row, f"sim_{mode}")
        if c <= 0 and s <= 0:
            continue
        out.append(c / s if s > 0 else math.inf)
    return np.array(out)


def summary(rows: list[Row]) -> dict:
    agree = sum(r.calc_winner == r.sim_winner for r in rows)
    out: dict = {"workloads": len(rows), "winner_agreement": agree}
    for mode in ("colocated", "disaggregated"):
        g = goodput_ratios(rows, mode)
        ttft = np.array([getattr(r, f"ttft_ratio_{mode}") for r in rows])
        tpot = np.array([getattr(r, f"tpot_ratio_{mode}") for r in rows])
        ttft, tpot = ttft[np.isfinite(ttft)], tpot[np.isfinite(tpot)]
        worst = g[np.argmax(np.abs(np.log(g)))] if len(g) else math.nan
        out[mode] = {
            "goodput_ratio_median": float(np.median(g)) if len(g) else math.nan,
            "goodput_ratio_p10": float(np.percentile(g, 10)) if len(g) else math.nan,
            "goodput_ratio_p90": float(np.percentile(g, 90)) if len(g) else math.nan,
            "goodput_ratio_worst": float(worst),
            "goodput_within_0.8_1.25": float(np.mean((g >= 0.8) & (g <= 1.25)))
            if len(g)
            else math.nan,
            "ttft_p99_ratio_median": float(np.median(ttft)) if len(ttft) else math.nan,
            "tpot_p99_ratio_median": float(np.median(tpot)) if len(tpot) else math.nan,
        }
    return out


def run_all(ws: list[Workload], jobs: int = 1) -> list[Row]:
    if jobs <= 1:
        return [compare_one(w) for w in ws]
    from multiprocessing import get_context

    with get_context("spawn").Pool(jobs) as pool:
        return pool.map(compare_one, ws, chunksize=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=40, help="workloads (default 40)")
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK} workloads only")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--json", type=Path, help="write rows and summary here")
    args = parser.parse_args(argv)
    ws = workloads(QUICK if args.quick else args.count, args.seed)
    start = time.perf_counter()
    rows = run_all(ws, args.jobs)
    print(
        f"{'workload':<34} {'winner c/s':<8} {'colo c/s req/s':>18} {'disagg c/s req/s':>18}"
        f" {'TTFT c/s':>10} {'TPOT c/s':>10}"
    )
    for r in rows:
        win = f"{r.calc_winner[0]}/{r.sim_winner[0]}"
        print(
            f"{r.name:<34} {win:<8} {r.calc_colocated:>8.2f}/{r.sim_colocated:<8.2f}"
            f" {r.calc_disaggregated:>8.2f}/{r.sim_disaggregated:<8.2f}"
            f" {r.ttft_ratio_colocated:>4.2f}/{r.ttft_ratio_disaggregated:<5.2f}"
            f" {r.tpot_ratio_colocated:>4.2f}/{r.tpot_ratio_disaggregated:<5.2f}"
        )
    s = summary(rows)
    print(f"\nwinner agreement: {s['winner_agreement']}/{s['workloads']}")
    for mode in ("colocated", "disaggregated"):
        m = s[mode]
        print(
            f"{mode:<14} calc/sim goodput median {m['goodput_ratio_median']:.2f}"
            f" (p10 {m['goodput_ratio_p10']:.2f}, p90 {m['goodput_ratio_p90']:.2f},"
            f" worst {m['goodput_ratio_worst']:.2f}; {m['goodput_within_0.8_1.25']:.0%} within"
            f" 0.8-1.25); p99 ratio at calc max rate TTFT {m['ttft_p99_ratio_median']:.2f},"
            f" TPOT {m['tpot_p99_ratio_median']:.2f}"
        )
    cmd = "python benchmarks/calc_vs_sim.py" + (
        " --quick" if args.quick else f" --count {args.count}"
    )
    print(f"{time.perf_counter() - start:.0f} s; command: {cmd} --seed {args.seed}")
    if args.json:
        args.json.write_text(
            json.dumps({"summary": s, "rows": [asdict(r) for r in rows]}, indent=1)
        )


if __name__ == "__main__":
    main()
