"""Decisions per CPU-second: batched (`decide_many`) and one at a time (`decide`), per example.

Run from the repository root:

    python benchmarks/decide_cpu.py [--workloads 256] [--repeats 3] [--calls 5]
    python benchmarks/decide_cpu.py --step-source silicon   # measured step tables (warm)
    python benchmarks/decide_cpu.py --batch-heap            # with `decide batch`'s heap setting

`benchmarks/decide_speed.py` reports wall time, start-up and MCP figures, which move with the
machine's load. This script times the calculator's two paths in process CPU time
(`time.process_time`), which a shared machine disturbs far less, so a before/after comparison
can be run on a busy box (still: caches and frequency scaling are shared; give ranges).

  - batched: full decisions over a seeded mix of workloads around the examples
    (`benchmarks/workload_mix.py`, seed 7), after one warm-up on 64 of them;
  - one by one: each example decided `--calls` times; its median CPU ms per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.decide import decide, decide_many  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402
from workload_mix import workload_mix  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def cpu_s(fn, *args) -> float:
    start = time.process_time()
    fn(*args)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=256, help="batch size of the mix")
    parser.add_argument("--repeats", type=int, default=3, help="batched runs")
    parser.add_argument("--calls", type=int, default=5, help="calls per example, one by one")
    parser.add_argument(
        "--step-source",
        choices=("default", "silicon"),
        default="default",
        help="every workload's step_source; silicon builds its tables in the warm-up calls",
    )
    parser.add_argument(
        "--batch-heap",
        action="store_true",
        help="keep the C heap grown as `decide batch` does (heap.keep_heap_grown; glibc)",
    )
    args = parser.parse_args()
    if args.batch_heap:
        from disagg_decider.heap import keep_heap_grown

        print(f"heap kept grown (decide batch's setting): {keep_heap_grown()}")

    def sourced(w):
        return w.model_copy(update={"step_source": args.step_source})

    mix = [sourced(w) for w in workload_mix(args.workloads)]
    first = cpu_s(decide_many, mix[:64])
    rates = [len(mix) / cpu_s(decide_many, mix) for _ in range(args.repeats)]

    per_example = {}
    for path in EXAMPLES:
        w = sourced(load_workload(path))
        first += cpu_s(decide, w)
        per_example[path.stem] = statistics.median(
            cpu_s(decide, w) * 1e3 for _ in range(args.calls)
        )

    print(f"python {sys.version.split()[0]}; CPU time of this process")
    print(f"step source {args.step_source}; warm-up calls {first:.1f} CPU-s (tables built there)")
    print(
        f"batched: {len(mix)} workloads, {args.repeats} runs: "
        f"{statistics.median(rates):.0f} decisions per CPU-second "
        f"(min {min(rates):.0f}, max {max(rates):.0f}); issue 27's target at least 450"
    )
    print(f"one by one: median CPU ms per call over {args.calls} calls")
    for name, ms in per_example.items():
        print(f"  {name:44s} {ms:7.2f}")
    values = list(per_example.values())
    print(
        f"  median over the {len(values)} examples {statistics.median(values):.2f} ms "
        f"(min {min(values):.2f}, max {max(values):.2f}); issue 27's target at most 8 ms"
    )
    load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, 1-min load average {load_1m:.1f} at the end")
    print("command: python benchmarks/decide_cpu.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
