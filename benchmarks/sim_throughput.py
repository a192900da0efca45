"""Simulated requests per second of wall time, both modes, on a 16-GPU example.

Run: python benchmarks/sim_throughput.py [--requests 100000] [--workload FILE] [--repeat 3]
(from the repository root, with `skill` on PYTHONPATH or the package installed).

Builds the workload's verdict, the verdict's pools, N synthetic requests at the workload's
rate, then times each mode's simulation alone (best of --repeat, and the range of wall-clock and
of CPU-time rates over the repeats: on a shared machine the CPU time moves less with the load),
one process, one core; then
both modes scored as `decide simulate` runs them, one after the other (`--jobs 1`) and in two
worker processes (`--jobs 2`), best of --repeat each, interleaved.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.sim import run  # noqa: E402
from disagg_decider.workload import load_workload, resolve  # noqa: E402

DEFAULT = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", type=Path, default=DEFAULT)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    w = load_workload(args.workload)
    r = resolve(w, args.workload.parent)
    s = run.setup(r, decide(w, base_dir=args.workload.parent))
    requests = run.synthetic_requests(r, args.requests, args.seed)
    print(f"workload {w.name}: {w.cluster.gpus} x {w.cluster.gpu}, {w.model}")
    print(
        f"{args.requests:,} requests at {w.traffic.requests_per_second:g} req/s, seed {args.seed}"
    )
    print(f"python {platform.python_version()} on {platform.machine()}, best of {args.repeat}")
    if hasattr(os, "getloadavg"):
        print(f"1-min load average {os.getloadavg()[0]:.1f} at the start ({os.cpu_count()} CPUs)")
    for mode in ("colocated", "disaggregated"):
        walls, cpus = [], []
        for _ in range(args.repeat):
            start, cpu = time.perf_counter(), time.process_time()
            outcome = run.simulate_mode(s, mode, requests)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
        rates = sorted(args.requests / t for t in walls)
        cpu_rates = sorted(args.requests / t for t in cpus)
        print(
            f"  {mode:<14} {outcome.layout:<60} {rates[-1]:>10,.0f} requests/s "
            f"({min(walls):.2f} s; wall {rates[0]:,.0f}-{rates[-1]:,.0f}/s, "
            f"CPU time {cpu_rates[0]:,.0f}-{cpu_rates[-1]:,.0f}/s over the repeats)"
        )
    both = {1: float("inf"), 2: float("inf")}
    for _ in range(args.repeat):
        for jobs in both:
            start = time.perf_counter()
            run.simulate_both(s, requests, jobs=jobs)
            both[jobs] = min(both[jobs], time.perf_counter() - start)
    for jobs, best in both.items():
        print(
            f"  both modes, --jobs {jobs}: {best:.2f} s, {2 * args.requests / best:>10,.0f} "
            f"simulated requests/s over the two modes ({os.cpu_count()} CPUs)"
        )
    cmd = f"python benchmarks/sim_throughput.py --requests {args.requests} --repeat {args.repeat}"
    if args.workload != DEFAULT:
        cmd += f" --workload {args.workload}"
    print(f"reproduce: {cmd}")


if __name__ == "__main__":
    main()
