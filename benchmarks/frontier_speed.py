"""`decide frontier` per example, in CPU seconds of this process (one core).

Run from the repository root:

    python benchmarks/frontier_speed.py [--basis p99-under-load]

Each example's frontier (16 TPOT targets + its own, the default) is timed twice, first (the
figure that counts; the first example also pays imports) and again (caches warm), with
`time.process_time` (a shared machine disturbs CPU time far less than wall time).
The issue asks for at most 3 s per example on one core.

`--process` times the command itself, `decide frontier -w EXAMPLE` in a fresh process
(imports included), as the CPU seconds of the child (`resource.getrusage(RUSAGE_CHILDREN)`).

`--band` instead times what `interactivity_band` adds to one decision: each example decided
with and without it (`decide_many(..., band=False)`), alternately in one process, median CPU
ms of `--calls` calls each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide_many  # noqa: E402
from disagg_decider.frontier_rows import BASES  # noqa: E402
from disagg_decider.frontier_sweep import Sweep, frontier  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--basis", default="p99-under-load", choices=BASES)
    parser.add_argument("--band", action="store_true", help="time the verdict's band instead")
    parser.add_argument("--process", action="store_true", help="time the command per example")
    parser.add_argument("--calls", type=int, default=9, help="--band: calls per example")
    args = parser.parse_args()
    if args.band:
        band_cost(args.calls)
        return
    if args.process:
        process_cost(args.basis)
        return
    sweep = Sweep(basis=args.basis)
    worst = 0.0
    print(f"decide frontier, basis {args.basis}, CPU seconds per example")
    for path in EXAMPLES:
        w = load_workload(path)
        if args.basis == "rate-matched" and w.cluster.heterogeneous:
            print(f"  {path.stem:<40} skipped (two GPU types)")
            continue
        start = time.process_time()
        frontier(w, path.parent, sweep)
        first = time.process_time() - start
        start = time.process_time()
        frontier(w, path.parent, sweep)
        again = time.process_time() - start
        worst = max(worst, first)
        print(f"  {path.stem:<40} first {first:6.2f} s, again {again:6.2f} s")
    print(
        f"  slowest {worst:.2f} s (target at most 3 s); {os.cpu_count()} CPUs, "
        f"1-min load {os.getloadavg()[0]:.1f}"
    )
    print(f"command: python benchmarks/frontier_speed.py --basis {args.basis}")


def process_cost(basis: str) -> None:
    """CPU seconds of `decide frontier` as a command, per example (fresh process each)."""
    import resource
    import subprocess

    print(f"decide frontier --basis {basis} as a command: CPU seconds (user + sys) per example")
    worst = 0.0
    for path in EXAMPLES:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cmd = [sys.executable, "-m", "disagg_decider", "frontier", "-w", str(path)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
        proc = subprocess.run([*cmd, "--basis", basis], capture_output=True, text=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        shown = f"{cpu:6.2f} s" if proc.returncode == 0 else f"exit {proc.returncode}"
        worst = max(worst, cpu if proc.returncode == 0 else 0.0)
        print(f"  {path.stem:<40} {shown}")
    print(f"  slowest {worst:.2f} s (target at most 3 s)")
    print(f"command: python benchmarks/frontier_speed.py --process --basis {basis}")


def band_cost(calls: int) -> None:
    """Median CPU ms of one decision with and without the band, per example."""
    import statistics

    print("one decision, median CPU ms: without the band, with it, ratio")
    ratios = []
    for path in EXAMPLES:
        w = load_workload(path)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(calls):
            for band in (False, True):
                start = time.process_time()
                decide_many([w], base_dir=path.parent, band=band)
                times[band].append((time.process_time() - start) * 1e3)
        off, on = (statistics.median(times[b]) for b in (False, True))
        ratios.append(on / off)
        print(f"  {path.stem:<40} {off:7.1f} {on:7.1f}  {on / off:.2f}x")
    print(f"  median ratio {statistics.median(ratios):.2f}x (max {max(ratios):.2f}x)")
    print(f"command: python benchmarks/frontier_speed.py --band --calls {calls}")


if __name__ == "__main__":
    main()
