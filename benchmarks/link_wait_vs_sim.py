"""Splits over TCP at the team's rate: the calculator's p99 TTFT against the simulator's.

Run from the repository root:

    python benchmarks/link_wait_vs_sim.py [--workloads 400] [--requests 3000] [--seed 1]

KV transfers into one decode replica share its NICs and wait for each other
(`calc/replicas/ingress_queue.py`); over 25 Gb/s TCP a transfer takes hundreds of ms, so that wait
is a large part of the TTFT tail. For every workload of the seeded mix
(`benchmarks/workload_mix.py`, seed 17) on a TCP network whose always-disaggregated pools fit the
cluster, those pools are simulated at the workload's rate; reported: the calculator's p99 TTFT over
the simulator's (median, p10, p90, lowest: under 1 means the calculator reads the tail short) and
how many pools keep >= 99% of requests within both targets.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.decide import decide_many  # noqa: E402
from disagg_decider.sim import metrics, run  # noqa: E402
from disagg_decider.workload import resolve  # noqa: E402
from workload_mix import workload_mix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", type=int, default=400)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    mix = [w for w in workload_mix(args.workloads, 17) if w.cluster.network.startswith("tcp")]
    ratios, within = [], []
    for w, v in zip(mix, decide_many(mix), strict=True):
        d = v.disaggregated
        if not d.fits_cluster:
            continue
        r = resolve(w)
        requests = run.synthetic_requests(r, args.requests, seed=args.seed)
        outcome = run.simulate_mode(run.setup(r, v), "disaggregated", requests)
        ttft = metrics.ttft_ms(outcome, requests)
        steady = metrics.steady_window(len(ttft))
        ratios.append(d.ttft_p99_ms / np.percentile(ttft[steady], 99))
        within.append(
            metrics.attainment(outcome, requests, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]
        )
    if not ratios:
        print("no split over TCP fits its cluster in this mix")
        return
    q = np.asarray(ratios)
    a = np.asarray(within)
    print(
        f"{len(q)} splits over TCP sized for their rate: calc/sim p99 TTFT median "
        f"{np.median(q):.2f} (p10 {np.percentile(q, 10):.2f}, p90 {np.percentile(q, 90):.2f}, "
        f"lowest {q.min():.2f}); >= 99% of requests within both targets: {(a >= 0.99).sum()}, "
        f"worst {a.min():.1%}"
    )
    print(
        f"({time.perf_counter() - start:.0f} s; python benchmarks/link_wait_vs_sim.py "
        f"--workloads {args.workloads} --requests {args.requests} --seed {args.seed})"
    )


if __name__ == "__main__":
    main()
