"""Python-level calls a decision spends in the conditional layout's search (issue 27).

Run from the repository root (or give another checkout's root, to compare two versions):

    python benchmarks/conditional_calls.py [--root PATH] [--workloads 256]

Counts, as `decide_calls.py` does (cProfile's `total_calls`, the same on every run), only
the calls made inside `conditional.evaluate_many_later` and the function it returns (the
threshold search, the settling, the lift onto the overall TTFT target, the sizing for the
rate and the report): per decision over a seeded batch (`workload_mix.py`, seed 7), and per
example decided alone.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
from collections.abc import Callable
from pathlib import Path


def counting(fn: Callable, total: list[int]) -> Callable:
    """`fn` with the calls made inside it (and inside any function it returns) added up."""

    def inner(*args, **kwargs):
        profile = cProfile.Profile()
        profile.enable()
        try:
            out = fn(*args, **kwargs)
        finally:
            profile.disable()
        total[0] += pstats.Stats(profile).total_calls
        return counting(out, total) if callable(out) else out

    return inner


def region_calls(root: Path, workloads: int) -> tuple[float, dict[str, int]]:
    """(calls per decision in the batch, calls per example decided alone)."""
    sys.path[:0] = [str(root / "skill"), str(root / "benchmarks")]
    from disagg_decider.calc.modes import conditional
    from disagg_decider.decide import decide, decide_many
    from disagg_decider.workload import load_workload
    from workload_mix import workload_mix

    mix = workload_mix(workloads)
    examples = {p.stem: load_workload(p) for p in sorted((root / "examples").glob("*.yaml"))}
    decide_many(mix[:64])  # warm: tables and caches built outside the counts
    for w in examples.values():
        decide(w)
    total = [0]
    original = conditional.evaluate_many_later
    conditional.evaluate_many_later = counting(original, total)
    try:
        decide_many(mix)
        batched = total[0] / len(mix)
        one = {}
        for name, w in examples.items():
            total[0] = 0
            decide(w)
            one[name] = total[0]
    finally:
        conditional.evaluate_many_later = original
    return batched, one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--workloads", type=int, default=256, help="batch size of the mix")
    args = parser.parse_args()
    root = args.root.resolve()
    batched, one = region_calls(root, args.workloads)
    searched = [n for n in one.values() if n > 0]
    print(f"{root}")
    print(f"batched: {batched:,.0f} calls per decision in the conditional search")
    for name, n in one.items():
        print(f"  {name:<44} {n:>9,}")
    print(
        f"one by one: median over the {len(searched)} examples that search thresholds "
        f"{statistics.median(searched):,.0f}"
    )


if __name__ == "__main__":
    main()
