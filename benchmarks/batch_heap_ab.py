"""Batched decisions per CPU-second with and without `decide batch`'s heap setting, alternated.

Run from the repository root:

    python benchmarks/batch_heap_ab.py [--rounds 5] [--workloads 256]

Each round runs two fresh processes, one plain and one with `heap.keep_heap_grown()` (glibc's
top pad, set by `decide batch` before it forks its workers), each timing `decide_many` on the
seeded mix (`workload_mix.py`) 4 times in process CPU time after a warm-up, and reporting the
best of the 4. Alternating the two spreads the machine's drift over both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_ONE = """
import sys, time
sys.path.insert(0, "skill"); sys.path.insert(0, "benchmarks")
from disagg_decider.heap import keep_heap_grown
if sys.argv[1] == "grown":
    assert keep_heap_grown(), "the setting is glibc's (or MALLOC_TOP_PAD_ is set)"
from disagg_decider.decide import decide_many
from workload_mix import workload_mix
mix = workload_mix(int(sys.argv[2]))
decide_many(mix[:64])
best = 0.0
for _ in range(4):
    start = time.process_time()
    decide_many(mix)
    best = max(best, len(mix) / (time.process_time() - start))
print(best)
"""


def one(mode: str, workloads: int) -> float:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TOP_PAD_"}
    out = subprocess.run(
        [sys.executable, "-c", _ONE, mode, str(workloads)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workloads", type=int, default=256)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {"plain": [], "grown": []}
    for r in range(args.rounds):
        for mode in runs:
            runs[mode].append(one(mode, args.workloads))
        print(f"round {r + 1}: plain {runs['plain'][-1]:.0f}, grown {runs['grown'][-1]:.0f}")
    for mode, values in runs.items():
        shown = ", ".join(f"{v:.0f}" for v in values)
        print(f"{mode}: {shown} decisions per CPU-second; median {statistics.median(values):.0f}")
    command = f"python benchmarks/batch_heap_ab.py --rounds {args.rounds}"
    print(f"{os.cpu_count()} CPUs; command: {command}")


if __name__ == "__main__":
    main()
