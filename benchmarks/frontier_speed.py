"""`decide frontier` per example, in CPU seconds of this process (one core).

Run from the repository root:

    python benchmarks/frontier_speed.py [--basis p99-under-load]

Each example's frontier (16 TPOT targets + its own, the default) is timed twice, first (the
figure that counts; the first example also pays imports) and again (caches warm), with
`time.process_time` (a shared machine disturbs CPU time far less than wall time).
The issue asks for at most 3 s per example on one core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.frontier_sweep import BASES, Sweep, frontier  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--basis", default="p99-under-load", choices=BASES)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
