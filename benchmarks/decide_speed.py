"""How fast is a verdict? Decisions per second in-process, and `decide` as a process.

Run from the repository root:

    python benchmarks/decide_speed.py [--seconds 3] [--runs 10]

Reports, on one core (the process is pinned to CPU 0 where the OS allows):
  - calculator only (`calc.compare.analyze`) per second,
  - full decisions (`decide.decide`: calculator + rulebook + Verdict) per second,
    and the share rule evaluation costs,
  - the wall time of `decide --workload examples/... --format json` as a fresh process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.calc.compare import analyze  # noqa: E402
from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.workload import load_workload, resolve  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def per_second(fn, items, seconds: float) -> float:
    """Calls per second, cycling through `items`, after one warm-up pass."""
    for item in items:
        fn(item)
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for item in items:
            fn(item)
        done += len(items)
    return done / (time.perf_counter() - start)


def process_wall_s(path: Path, runs: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    cmd = [sys.executable, "-m", "disagg_decider", "--workload", str(path), "--format", "json"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})

    workloads = [load_workload(p) for p in EXAMPLES]
    resolved = [resolve(w) for w in workloads]
    calc_rate = per_second(analyze, resolved, args.seconds)
    full_rate = per_second(decide, workloads, args.seconds)
    wall = process_wall_s(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml", args.runs)

    print(f"examples: {len(EXAMPLES)} workloads, cycled; one core; python {sys.version.split()[0]}")
    print(f"calculator only (analyze):        {calc_rate:8.0f} per second")
    print(f"full decision (decide -> Verdict): {full_rate:8.0f} per second")
    print(f"rules + verdict overhead:          {100 * (1 - full_rate / calc_rate):8.1f} %")
    print(
        f"`decide --workload --format json` process wall time: median "
        f"{statistics.median(wall):.3f} s, max {max(wall):.3f} s over {len(wall)} runs"
    )
    print("command: python benchmarks/decide_speed.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
