"""Python-level calls per decision: a cost figure a shared machine does not disturb.

Run from the repository root (or give another checkout's root, to compare two versions):

    python benchmarks/decide_calls.py [--root PATH] [--workloads 256]

A decision's CPU is mostly numpy's fixed cost per call on small arrays and the Python around
it (0.5-0.9 us a call), so the number of calls a decision makes follows its CPU time, and is
the same on every run: cProfile counts them (`pstats.Stats.total_calls`) over

  - batched: `decide_many` on a seeded mix (`workload_mix.py`, seed 7), per decision;
  - one by one: `decide` on each example; the median over the examples, min and max.

CPU-time figures (which a loaded machine stretches by 20-40%) are `decide_cpu.py`'s.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
from collections.abc import Callable
from pathlib import Path


def calls(fn: Callable[[], object]) -> int:
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    return pstats.Stats(profile).total_calls


def arguments(description: str) -> argparse.Namespace:
    """--root (the checkout counted, resolved) and --workloads (the batch's size)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--workloads", type=int, default=256, help="batch size of the mix")
    args = parser.parse_args()
    args.root = args.root.resolve()
    return args


def warmed(description: str) -> tuple:
    """The command line's checkout imported and warmed: (root, decide, decide_many, the mix,
    the examples by name). Tables and caches are built here, outside the counts."""
    args = arguments(description)
    root = args.root
    sys.path[:0] = [str(root / "skill"), str(root / "benchmarks")]
    from disagg_decider.decide import decide, decide_many
    from disagg_decider.workload import load_workload
    from workload_mix import workload_mix

    mix = workload_mix(args.workloads)
    examples = {p.stem: load_workload(p) for p in sorted((root / "examples").glob("*.yaml"))}
    decide_many(mix[:64])
    for w in examples.values():
        decide(w)
    return root, decide, decide_many, mix, examples


def main() -> None:
    root, decide, decide_many, mix, examples = warmed(__doc__.splitlines()[0])
    show(root, calls, decide, decide_many, mix, examples, "Python-level calls per decision")


def show(root, count, decide, decide_many, mix, examples, what: str) -> None:
    """`count` (a function's calls while it runs) batched per decision and per example."""
    batched = count(lambda: decide_many(mix)) / len(mix)
    one = {name: count(lambda w=w: decide(w)) for name, w in examples.items()}
    print(f"{root}")
    print(f"batched: {batched:,.0f} {what} ({len(mix)} workloads)")
    for name, n in one.items():
        print(f"  {name:<44} {n:>9,}")
    print(
        f"one by one: median over the {len(one)} examples {statistics.median(one.values()):,.0f}"
        f" (min {min(one.values()):,}, max {max(one.values()):,})"
    )


if __name__ == "__main__":
    main()
