"""Two checkouts' decision CPU, alternated in fresh processes: a before/after on a busy machine.

Run from the repository root, with the other checkout (an export of the base commit):

    python benchmarks/decide_cpu_ab.py --before /tmp/base-export [--rounds 3]

Each round runs one fresh process per checkout (before, then after), each timing in process
CPU time (`time.process_time`), after a warm-up:

  - batched: `decide_many` on the seeded 256-workload mix (`workload_mix.py`), 4 times; the
    best of the 4 as decisions per CPU-second;
  - one by one: each example decided 7 times; the least CPU ms per example, then the median
    over the examples.

On a shared machine the least of several runs is the figure least stretched by other jobs
(`decide_cpu.py` reports medians); alternating the checkouts spreads drift over both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# Runs inside a fresh process; argv[1] is the checkout's root.
CHILD = """
import json, statistics, sys, time
from pathlib import Path
root = Path(sys.argv[1])
sys.path[:0] = [str(root / "skill"), str(root / "benchmarks")]
from disagg_decider.decide import decide, decide_many
from disagg_decider.workload import load_workload
from workload_mix import workload_mix
mix = workload_mix(256)
examples = [load_workload(p) for p in sorted((root / "examples").glob("*.yaml"))]
decide_many(mix[:64])
for w in examples:
    decide(w)
def cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start
batched = [cpu(lambda: decide_many(mix)) for _ in range(4)]
least = [min(cpu(lambda w=w: decide(w)) for _ in range(7)) for w in examples]
print(json.dumps({"per_cpu_s": len(mix) / min(batched),
                  "one_ms": statistics.median(least) * 1e3}))
"""


def run(root: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(root)], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--after", type=Path, default=HERE, help="default: this checkout")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name in ("before", "after"):
            results[name].append(run(getattr(args, name).resolve()))
    for name, rows in results.items():
        rates = [r["per_cpu_s"] for r in rows]
        ms = [r["one_ms"] for r in rows]
        print(
            f"{name}: batched {', '.join(f'{x:.0f}' for x in rates)} decisions per CPU-second "
            f"(best of 4 per round); one decision {', '.join(f'{x:.1f}' for x in ms)} ms CPU "
            f"(median over the examples of the least of 7); medians {statistics.median(rates):.0f}"
            f" and {statistics.median(ms):.1f}"
        )


if __name__ == "__main__":
    main()
