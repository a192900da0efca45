"""The pools a verdict tells a team to deploy, simulated at the team's own rate.

Run from the repository root:

    python benchmarks/rate_sizing_vs_sim.py [--workloads 200] [--requests 4000] [--seed 1]
    python benchmarks/rate_sizing_vs_sim.py --hostile 80 [--hostile-seed 24]

`calc_vs_sim.py` checks each mode's goodput on the whole cluster; this checks the other half of a
verdict: the layout sized for the workload's rate (the colocated layout and the split's pair on the
fewest GPUs, `calc/layouts/rate_layout.py`; the conditional layout,
`calc/modes/conditional_sizing.py`). For every workload of the seeded mix
(`benchmarks/workload_mix.py`, seed 17) whose mode fits its cluster, that mode's pools are simulated
on `--requests` synthetic requests at the workload's rate, and the share of steady-state requests
within both p99 targets is recorded (the SLO asks for 99%). Reported per mode: how many pools were
simulated, how many reach 99%, 98% and 95%, the median and the worst, and the worst few by name; and
the same for the pools that are the verdict's plan (the mode it deploys), the others being what a
mode would run where the verdict chose another (a split over TCP the rulebook vetoes, say).

`--hostile N` adds N independently drawn workloads the seeded mix does not reach (issue 24):
prompt tails from p99/p50 = 1 up to 8 on NVLink GPUs, and mixture-of-experts models on GPUs
without NVLink (L40S: every all-to-all of expert parallelism leaves the GPU), each at a rate
drawn between 20% and 90% of the most its cluster carries (`hostile_mix.py`). Each of their
plans is listed with its share, and the summary gives the lowest share and how many plans
reach 99% (the issue asks every plan >= 97% and >= 95% of them >= 99%).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.decide import decide_many  # noqa: E402
from disagg_decider.sim import conditional as sim_conditional  # noqa: E402
from disagg_decider.sim import metrics, run  # noqa: E402
from disagg_decider.workload import resolve  # noqa: E402
from hostile_mix import hostile_mix  # noqa: E402
from workload_mix import workload_mix  # noqa: E402

MODES = ("colocated", "disaggregated", "conditional")


def attained(r, v, mode: str, requests) -> float | None:
    """Steady-state share of requests within both targets on the verdict's pools for `mode`;
    None where that mode does not carry the rate on the cluster (nothing sized to check)."""
    w = r.workload
    if mode == "conditional":
        k = v.conditional
        if (
            k is None
            or k.layout != "conditional"
            or k.max_rate_per_s < w.traffic.requests_per_second
        ):
            return None
        cfg = sim_conditional.config_of(r, v)
        outcome = sim_conditional.simulate(
            run.engine(r, cfg.prefill_tp), run.engine(r, cfg.decode_tp), requests, cfg
        )
    else:
        if not getattr(v, mode).fits_cluster:
            return None
        outcome = run.simulate_mode(run.setup(r, v), mode, requests)
    return metrics.attainment(outcome, requests, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]


def _at_least(values: list[float], share: float) -> int:
    return sum(v >= share for v in values)


def plan_mode(v) -> str:
    """The mode whose pools the verdict deploys."""
    if v.decision == "colocate":
        return "colocated"
    dynamo_splits = v.decision == "dynamo" and v.dynamo_layout == "disaggregated"
    return "conditional" if v.layout == "conditional" and not dynamo_splits else "disaggregated"


def report(label: str, found: list[tuple[float, str]]) -> None:
    if not found:
        print(f"{label}: no pools")
        return
    values = sorted(s for s, _ in found)
    worst = ", ".join(f"{n} {s:.1%}" for s, n in sorted(found)[:3])
    print(
        f"{label}: {len(values)} pools sized for their rate; within both targets for >= 99% "
        f"of requests: {_at_least(values, 0.99)}, >= 98%: {_at_least(values, 0.98)}, >= 95%: "
        f"{_at_least(values, 0.95)}; median {statistics.median(values):.2%}, worst "
        f"{values[0]:.1%} ({worst})"
    )


def layout_of(v, mode: str) -> str:
    """The verdict's pools for `mode`, as a team reads them."""
    if mode == "colocated":
        c = v.colocated
        return f"{c.replicas} x {c.layout}, chunk {c.chunk_tokens}"
    if mode == "disaggregated":
        d = v.disaggregated
        prefill = f"{d.prefill_replicas}P x {d.prefill_layout}"
        return f"{prefill} + {d.decode_replicas}D x {d.decode_layout}"
    k = v.conditional
    return f"T={k.threshold_tokens}"


def hostile(count: int, seed: int, requests: int, request_seed: int) -> list[tuple[float, str]]:
    """Every pool the verdicts size on `hostile_mix`, one line each; returns the plans' shares."""
    plans: list[tuple[float, str]] = []
    mix = hostile_mix(count, seed)
    print(f"{len(mix)} hostile workloads (hostile_mix seed {seed}); * marks the verdict's plan")
    for w, v in zip(mix, decide_many(mix), strict=True):
        r = resolve(w)
        t = w.traffic
        spread = t.prompt_tokens.p99 / t.prompt_tokens.p50
        reqs = run.synthetic_requests(r, requests, seed=request_seed)
        for mode in MODES:
            share = attained(r, v, mode, reqs)
            if share is None:
                continue
            plan = mode == plan_mode(v) and v.feasible
            if plan:
                plans.append((share, f"{w.name} ({mode})"))
            print(
                f"{'*' if plan else ' '} {share:7.2%}  {w.name:<46} {mode:<13} "
                f"{t.requests_per_second:8.3f} req/s  prompt {t.prompt_tokens.p50:.0f} x"
                f"{spread:.1f}  {layout_of(v, mode)}"
            )
    return plans


def summarise_plans(plans: list[tuple[float, str]]) -> None:
    """The issue's two bars: every plan >= 97%, and >= 95% of plans >= 99%."""
    if not plans:
        print("hostile plans: none")
        return
    values = [s for s, _ in plans]
    worst = min(plans)
    print(
        f"hostile plans: {len(values)}; lowest share within both targets {worst[0]:.2%} "
        f"({worst[1]}); >= 97%: {_at_least(values, 0.97)}; >= 99%: "
        f"{_at_least(values, 0.99)} ({_at_least(values, 0.99) / len(values):.1%} of plans)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=200, help="workloads of the seeded mix")
    parser.add_argument("--requests", type=int, default=4000, help="simulated requests per pool")
    parser.add_argument("--seed", type=int, default=1, help="seed of the simulated requests")
    parser.add_argument(
        "--hostile", type=int, default=0, help="also N drawn wide-tail and PCIe-MoE workloads"
    )
    parser.add_argument("--hostile-seed", type=int, default=24, help="seed of hostile_mix")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.hostile:
        plans = hostile(args.hostile, args.hostile_seed, args.requests, args.seed)
        summarise_plans(plans)
    mix = workload_mix(args.workloads, 17) if args.workloads else []
    verdicts = decide_many(mix)
    shares: dict[str, list[tuple[float, str]]] = {m: [] for m in MODES}
    plans: list[tuple[float, str]] = []
    for w, v in zip(mix, verdicts, strict=True):
        r = resolve(w)
        requests = run.synthetic_requests(r, args.requests, seed=args.seed)
        for mode in MODES:
            share = attained(r, v, mode, requests)
            if share is not None:
                shares[mode].append((share, w.name))
                if mode == plan_mode(v) and v.feasible:
                    plans.append((share, f"{w.name} ({mode})"))
    for mode, found in shares.items():
        report(mode, found)
    report("the verdicts' plans", plans)
    extra = f" --hostile {args.hostile} --hostile-seed {args.hostile_seed}" if args.hostile else ""
    print(
        f"({time.perf_counter() - started:.0f} s; python benchmarks/rate_sizing_vs_sim.py "
        f"--workloads {args.workloads} --requests {args.requests} --seed {args.seed}{extra})"
    )


if __name__ == "__main__":
    main()
