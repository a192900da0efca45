"""CPU time of the conditional layout's overall-p99 pricing (issue 14e's lift, 17h's speed-up).

Run from the repository root:

    python benchmarks/overall_miss_cpu.py [--calls 6] [--workloads 128]

`benchmarks/decide_cpu.py` times whole decisions, in which this part is a few milliseconds
among fifteen and hard to see on a shared machine. This script times the part itself: the
process CPU time spent inside `conditional_rows.priced_rows` (the lift: the decode workers'
capacity search, `overall_ttft.lift`), `conditional_report.report_rows` and
`overall_ttft.overall_p99_ms`, per decision, over the examples decided one by one (`--calls`
rounds of all ten) and over a seeded mix decided in one batch (`benchmarks/workload_mix.py`,
seed 7, twice, after a warm-up on 64). Compare two trees by running it in each, interleaved.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.calc.modes import conditional, conditional_report, overall_ttft  # noqa: E402
from disagg_decider.decide import decide, decide_many  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402
from workload_mix import workload_mix  # noqa: E402

SPENT: dict[str, float] = {}


def timed(owner, name: str, label: str) -> None:
    """Replace `owner.name` by a wrapper adding its CPU time to SPENT[label]."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            SPENT[label] = SPENT.get(label, 0.0) + time.process_time() - start

    setattr(owner, name, wrapper)


def per_decision(run, decisions: int) -> str:
    SPENT.clear()
    start = time.process_time()
    run()
    total = time.process_time() - start
    parts = ", ".join(f"{k} {v / decisions * 1e3:.3f}" for k, v in SPENT.items())
    priced = sum(SPENT.values())
    return (
        f"{total / decisions * 1e3:.2f} ms a decision, of which the overall-p99 pricing "
        f"{priced / decisions * 1e3:.3f} ms ({parts})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6, help="rounds of the ten examples")
    parser.add_argument("--workloads", type=int, default=128, help="batch size of the mix")
    args = parser.parse_args()

    # `priced_rows` is called through conditional's own name, `report_rows` through
    # conditional_report's; the
    # overall p99 through overall_ttft's (disjoint: the report calls it after the p99s solve).
    # (`lift_rows` before issue 17h, for comparing against an older tree.)
    lift = "priced_rows" if hasattr(conditional, "priced_rows") else "lift_rows"
    timed(conditional, lift, "lift")
    timed(conditional_report, "report_rows", "report")
    timed(overall_ttft, "overall_p99_ms", "overall_p99")

    examples = [load_workload(p) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    for w in examples:
        decide(w)
    one = per_decision(
        lambda: [decide(w) for _ in range(args.calls) for w in examples],
        args.calls * len(examples),
    )
    mix = workload_mix(args.workloads)
    decide_many(mix[:64])
    batched = per_decision(lambda: [decide_many(mix) for _ in range(2)], 2 * len(mix))
    print(f"python {sys.version.split()[0]}; CPU time of this process")
    print(f"one by one ({args.calls} x {len(examples)} examples): {one}")
    print(f"batched ({args.workloads} workloads, 2 runs): {batched}")
    print("command: python benchmarks/overall_miss_cpu.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
