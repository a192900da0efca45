"""Python-level calls a decision spends in the conditional layout's search (issue 27).

Run from the repository root (or give another checkout's root, to compare two versions):

    python benchmarks/conditional_calls.py [--root PATH] [--workloads 256]

Counts, as `decide_calls.py` does (cProfile's `total_calls`, the same on every run), the
calls made inside `conditional.evaluate_many_later` and the function it returns (the
threshold search, the settling, the lift onto the overall TTFT target, the sizing for the
rate and the report), beside the whole decision's: per decision over a seeded batch
(`workload_mix.py`, seed 7), and per example decided alone. Calls are a proxy: numpy's
operators on arrays cost time without counting as calls, so `decide_cpu_ab.py` has the CPU.
"""

from __future__ import annotations

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


def region_calls(root: Path, workloads: int) -> dict[str, tuple[float, float]]:
    """(calls in the conditional search, calls of the whole decision): per decision over the
    batch (key "batched"), and for each example decided alone."""
    sys.path[:0] = [str(root / "skill"), str(root / "benchmarks")]
    from decide_calls import calls
    from disagg_decider.calc.modes import conditional
    from disagg_decider.decide import decide, decide_many
    from disagg_decider.workload import load_workload
    from workload_mix import workload_mix

    mix = workload_mix(workloads)
    examples = {p.stem: load_workload(p) for p in sorted((root / "examples").glob("*.yaml"))}
    decide_many(mix[:64])  # warm: tables and caches built outside the counts
    for w in examples.values():
        decide(w)
    out: dict[str, tuple[float, float]] = {}
    total = [0]
    original = conditional.evaluate_many_later
    conditional.evaluate_many_later = counting(original, total)
    try:
        decide_many(mix)
        out["batched"] = (total[0] / len(mix), 0.0)
        for name, w in examples.items():
            total[0] = 0
            decide(w)
            out[name] = (float(total[0]), 0.0)
    finally:
        conditional.evaluate_many_later = original
    # The whole decisions, counted apart (one profiler at a time).
    out["batched"] = (out["batched"][0], calls(lambda: decide_many(mix)) / len(mix))
    for name, w in examples.items():
        out[name] = (out[name][0], float(calls(lambda w=w: decide(w))))
    return out


def main() -> None:
    from decide_calls import arguments

    args = arguments(__doc__.splitlines()[0])
    found = region_calls(args.root, args.workloads)
    print(f"{args.root}")
    print(f"{'calls per decision':<46} {'conditional':>11} {'decision':>9} {'share':>6}")
    for name, (region, whole) in found.items():
        print(f"  {name:<44} {region:>11,.0f} {whole:>9,.0f} {region / whole:>6.0%}")
    searched = [region for name, (region, _) in found.items() if name != "batched" and region]
    print(f"median over the {len(searched)} examples that search thresholds:", end=" ")
    print(f"{statistics.median(searched):,.0f}")


if __name__ == "__main__":
    main()
