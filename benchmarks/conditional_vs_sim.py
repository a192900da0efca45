"""The conditional layout: calculator against simulator on seeded mixed workloads (issue 14).

Each workload is two request classes (a short chat-like class beside a long RAG/agent-like
class, shares, lengths, outputs, hit rates, rate and targets drawn from a seed) on a model and
cluster drawn from a small set. For every workload whose verdict's layout is conditional, the
simulator runs exactly the calculator's conditional pools and threshold (Dynamo's
`isl_bounding` router) on requests drawn per class, and its goodput (99% of steady-state
requests within both p99 targets, by bisection over the rate) is divided into the
calculator's. It also reports how often the conditional layout beats both other modes in the
simulator, each mode on the verdict's own pools (all sized on the whole cluster: the rate asked
for is beyond every cluster here), and the two modes' own calc/sim goodput ratios on this mixed
traffic (colocated prices the mix as one log-normal with class-aware chunk and KV-read
terms, always-disaggregated class by class,
`calc/replicas/mixed_members.py`; rule DSG019 quotes these figures). The first
workload is examples/mixed-chat-rag-llm-d.yaml.

    python benchmarks/conditional_vs_sim.py                # 20 workloads
    python benchmarks/conditional_vs_sim.py --workloads 8 --requests 2000
    python benchmarks/conditional_vs_sim.py --workloads 60 --chunk-tokens 1024
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "skill") not in sys.path:
    sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.errors import UserError  # noqa: E402
from disagg_decider.sim import conditional as sim_conditional  # noqa: E402
from disagg_decider.sim import run  # noqa: E402
from disagg_decider.workload import Workload, load_workload, resolve  # noqa: E402

EXAMPLE = ROOT / "examples" / "mixed-chat-rag-llm-d.yaml"

SETUPS = [  # (model, weights, gpu, gpus, network)
    ("qwen3-32b", "fp8", "h200", 16, "ib-ndr-400"),
    ("llama-3.1-8b", "bf16", "h100", 8, "ib-ndr-400"),
    ("llama-3.3-70b", "fp8", "h200", 16, "ib-ndr-400"),
    ("qwen3-32b", "fp8", "h100", 16, "roce-200"),
]


def workload(seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    model, weights, gpu, gpus, network = SETUPS[seed % len(SETUPS)]
    short_p50 = float(rng.uniform(200, 1200))
    long_p50 = float(rng.uniform(6000, 24000))
    share_long = float(rng.uniform(0.1, 0.45))
    return Workload.model_validate(
        {
            "name": f"mix-{seed}",
            "model": model,
            "weights_dtype": weights,
            "engine": "vllm",
            "traffic": {
                # Beyond any cluster here: every mode is then sized on the whole cluster (the
                # pools of its max rate), as its goodput is and the conditional layout's are.
                "requests_per_second": 1000.0,
                "classes": [
                    {
                        "share": 1.0 - share_long,
                        "prompt_tokens": {"p50": short_p50, "p99": short_p50 * 3},
                        "output_tokens": {"p50": float(rng.uniform(100, 400)), "p99": 900},
                        "prefix_cache_hit_rate": float(rng.uniform(0.0, 0.3)),
                    },
                    {
                        "share": share_long,
                        "prompt_tokens": {"p50": long_p50, "p99": long_p50 * 1.5},
                        "output_tokens": {"p50": float(rng.uniform(150, 500)), "p99": 1200},
                        "prefix_cache_hit_rate": float(rng.uniform(0.0, 0.5)),
                    },
                ],
            },
            "slo": {"ttft_ms": float(rng.choice([1500, 2000, 3000])), "tpot_ms": 25.0},
            "cluster": {"gpu": gpu, "gpus": gpus, "network": network},
        }
    )


def _with_chunks(w: Workload, chunks: list[int]) -> Workload:
    efficiency = type(w.efficiency).model_validate(
        {**w.efficiency.model_dump(), "chunk_tokens": chunks}
    )
    return w.model_copy(update={"efficiency": efficiency})


def _mode_goodputs(r, v, base) -> dict[str, float | None]:
    """Each mode's simulated goodput on the verdict's own pools (None: the mode is infeasible)."""
    setup = run.setup(r, v)
    return {
        m: run.goodput(setup, m, base, 0.99, max(getattr(v, m).max_rate_per_s, 0.1))
        if getattr(v, m).feasible
        else None
        for m in ("colocated", "disaggregated")
    }


def _quantiles(values: list[float]) -> str:
    q = np.percentile(values, [10, 50, 90])
    spread = f"p10 {q[0]:.2f}, p90 {q[2]:.2f}, range {min(values):.2f}-{max(values):.2f}"
    return f"median {q[1]:.2f} ({spread})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=20)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument(
        "--chunk-tokens",
        type=int,
        nargs="+",
        help="pin the colocated chunk sizes tried (efficiency.chunk_tokens), e.g. 1024: the "
        "colocated TPOT tail where it binds most",
    )
    args = parser.parse_args()
    ratios, wins, rows = [], 0, []
    mode_ratios: dict[str, list[float]] = {"colocated": [], "disaggregated": []}
    started = time.time()
    workloads = [load_workload(EXAMPLE)] + [workload(seed) for seed in range(args.workloads)]
    if args.chunk_tokens:
        workloads = [_with_chunks(w, args.chunk_tokens) for w in workloads]
    for seed, w in enumerate(workloads):
        r, v = resolve(w), decide(w)
        base = run.synthetic_requests(r, args.requests, seed=seed)
        try:
            others = _mode_goodputs(r, v, base)
        except UserError as e:
            rows.append(f"{w.name}: simulator could not bracket goodput ({e})")
            continue
        for m, sim_mode in others.items():
            if sim_mode:
                mode_ratios[m].append(getattr(v, m).max_rate_per_s / sim_mode)
        modes = ", ".join(
            f"{m} -" if g is None else f"{m} calc {getattr(v, m).max_rate_per_s:.2f} sim {g:.2f}"
            for m, g in others.items()
        )
        k = v.conditional
        if k is None or k.layout != "conditional":
            rows.append(f"{w.name}: layout {k.layout if k else '-'}; {modes}")
            continue
        try:
            sim = sim_conditional.goodput(
                r, sim_conditional.config_of(r, v), base, 0.99, k.max_rate_per_s
            )
        except UserError as e:
            rows.append(f"{w.name}: simulator could not bracket goodput ({e})")
            continue
        ratio = k.max_rate_per_s / sim if sim > 0 else float("inf")
        ratios.append(ratio)
        beats = sim > max(g or 0.0 for g in others.values())
        wins += beats
        rows.append(
            f"{w.name}: T={k.threshold_tokens} share {k.share_to_prefill:.0%} "
            f"calc {k.max_rate_per_s:.2f} sim {sim:.2f} req/s (calc/sim {ratio:.2f}); "
            f"{modes}; conditional best in sim: {beats}"
        )
    print("\n".join(rows))
    if ratios:
        print(
            f"\nconditional layouts simulated: {len(ratios)} of {len(workloads)}; "
            f"calc/sim goodput {_quantiles(ratios)}; best of three in the simulator: {wins}"
        )
    for m, values in mode_ratios.items():
        if values:
            n = len(values)
            print(f"{m} mode on mixed traffic: calc/sim goodput {_quantiles(values)} ({n} runs)")
    pinned = f" --chunk-tokens {' '.join(map(str, args.chunk_tokens))}" if args.chunk_tokens else ""
    print(
        f"({time.time() - started:.0f} s; python benchmarks/conditional_vs_sim.py "
        f"--workloads {args.workloads} --requests {args.requests}{pinned})"
    )


if __name__ == "__main__":
    main()
