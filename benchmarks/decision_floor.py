"""What one decision costs that no faster arithmetic can remove: its fixed cost per call.

Run from the repository root:

    python benchmarks/decision_floor.py [--copies 1,2,4,8,16] [--repeats 5]

Issue 27 asks for one decision in at most 8 ms of CPU. This script measures how far that is
from the decision's own floor. Each example is decided together with k - 1 near copies of
itself (the request rate moved by 0.1% per copy, so no two rows are the same), in one
`decide_many` call, for each k of `--copies`. The least CPU time of `--repeats` runs is fitted
by least squares to

    cpu_ms(k) = fixed_ms + k * per_workload_ms

- `per_workload_ms` is what each workload adds: the arithmetic on its rows, and the Python
  work done per workload (its verdict, its labels).
- `fixed_ms` is what the call costs however many workloads share it: the chain of numpy
  operations and Python calls the search, the bisections and the conditional walk make, each
  paid once per call. A faster kernel or a smaller array does not move it; only fewer
  operations do.

One decision is `fixed_ms + per_workload_ms`. The report gives both per example, their median
over the examples, the Python-level calls of one decision (as `cProfile` counts them) and
the fixed cost per call, and says how much of the fixed cost would have to go for one
decision to reach 8 ms with the per-workload cost unchanged.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide_many  # noqa: E402
from disagg_decider.workload import Workload, load_workload, parse_workload  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
TARGET_MS = 8.0


def near_copies(path: Path, k: int) -> list[Workload]:
    """The example's workload and k - 1 copies at request rates 0.1%, 0.2%, ... higher."""
    data = yaml.safe_load(path.read_text())
    rate = data["traffic"]["requests_per_second"]
    out = [load_workload(path)]
    for i in range(1, k):
        data["traffic"]["requests_per_second"] = rate * (1 + 0.001 * i)
        out.append(parse_workload(data, str(path)))
    return out


def least_cpu_ms(workloads: list[Workload], base_dir: Path, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        decide_many(workloads, base_dir=base_dir)
        best = min(best, time.process_time() - start)
    return best * 1000


def fit(ks: list[int], cpu_ms: list[float]) -> tuple[float, float]:
    """Least-squares (fixed_ms, per_workload_ms) of cpu_ms = fixed + k * per_workload."""
    mean_k, mean_c = statistics.fmean(ks), statistics.fmean(cpu_ms)
    slope = sum((k - mean_k) * (c - mean_c) for k, c in zip(ks, cpu_ms, strict=True)) / sum(
        (k - mean_k) ** 2 for k in ks
    )
    return mean_c - slope * mean_k, slope


def calls_of_one(workload: Workload, base_dir: Path) -> int:
    profile = cProfile.Profile()
    profile.enable()
    decide_many([workload], base_dir=base_dir)
    profile.disable()
    return sum(row[1] for row in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="1,2,4,8,16", help="comma-separated k values")
    parser.add_argument("--repeats", type=int, default=5, help="runs per k; the least is kept")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = parser.parse_args()
    ks = [int(k) for k in args.copies.split(",")]
    if len(ks) < 2 or min(ks) < 1:
        parser.error("--copies needs at least two counts, each >= 1")
    rows = []
    for path in EXAMPLES:
        workload = load_workload(path)
        decide_many(near_copies(path, 2), base_dir=path.parent)  # warm caches
        cpu_ms = [least_cpu_ms(near_copies(path, k), path.parent, args.repeats) for k in ks]
        fixed_ms, per_workload_ms = fit(ks, cpu_ms)
        calls = calls_of_one(workload, path.parent)
        rows.append(
            {
                "example": path.stem,
                "cpu_ms_by_copies": dict(zip(ks, (round(c, 2) for c in cpu_ms), strict=True)),
                "fixed_ms": round(fixed_ms, 2),
                "per_workload_ms": round(per_workload_ms, 2),
                "one_decision_ms": round(fixed_ms + per_workload_ms, 2),
                "calls_one_decision": calls,
                "fixed_us_per_call": round(fixed_ms * 1000 / calls, 3),
            }
        )
    summary = {
        key: round(statistics.median(r[key] for r in rows), 2)
        for key in ("fixed_ms", "per_workload_ms", "one_decision_ms", "calls_one_decision")
    }
    room_ms = TARGET_MS - summary["per_workload_ms"]
    summary["fixed_cut_needed_for_8ms"] = round(1 - room_ms / summary["fixed_ms"], 3)
    if args.json:
        print(json.dumps({"examples": rows, "median": summary}, indent=2))
        return
    print(f"copies {ks}, least of {args.repeats} runs each, CPU ms of one decide_many call")
    for r in rows:
        print(
            f"  {r['example']:40s} fixed {r['fixed_ms']:7.2f}  per workload "
            f"{r['per_workload_ms']:6.2f}  one {r['one_decision_ms']:7.2f} ms  "
            f"{r['calls_one_decision']:6d} calls ({r['fixed_us_per_call']:.2f} us fixed per call)"
        )
    print(
        f"median over the examples: fixed {summary['fixed_ms']} ms, per workload "
        f"{summary['per_workload_ms']} ms, one decision {summary['one_decision_ms']} ms, "
        f"{summary['calls_one_decision']:.0f} calls"
    )
    print(
        f"to reach {TARGET_MS:g} ms with the per-workload cost unchanged, the fixed cost must "
        f"fall by {summary['fixed_cut_needed_for_8ms']:.0%}"
    )


if __name__ == "__main__":
    main()
