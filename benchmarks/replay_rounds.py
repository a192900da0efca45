"""How many tests the replayed load bisection needs (`calc/queues/bisection_replay.py`), against the
plain loop.

Run from the repository root:

    python benchmarks/replay_rounds.py [--mix 200]

Decides the 10 examples and `--mix` workloads of `benchmarks/workload_mix.py` one at a time,
and for every load bisection the replay runs (one or two entries in plain floats,
`load_bisection.REPLAY_ENTRIES`) counts the replay's rounds (each tests two loads per entry in
one call) and checks its answer against the 16-step bisection on the same entries, bit for
bit. Counts do not move with the machine's load; then both are timed on the captured
bisections (CPU time, `--repeats` interleaved rounds, pinned to one core where the OS allows).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.calc.queues import bisection_replay, load_bisection  # noqa: E402
from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402
from workload_mix import workload_mix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mix", type=int, default=200, help="mixed workloads decided too")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timing rounds")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    rounds: list[int] = []
    captured: list[tuple] = []
    entries = differ = 0
    plain = load_bisection._FewEntries.replayed

    def counted(self, rho_max: float, p_top: list[float]):
        """Every bisection `max_rate_per_ms` would replay (one or two entries)."""
        nonlocal entries, differ
        calls = [0]
        probabilities = self.twice().probabilities

        def probability(loads: list[float]) -> list[float]:
            calls[0] += 1
            return probabilities(loads)

        grid = bisection_replay.bisection_grid(rho_max, load_bisection.BISECTIONS).tolist()
        got = bisection_replay.replay(probability, grid, self.over, p_top, load_bisection.P99_TAIL)
        expected = self.bisect(rho_max).tolist()
        rounds.append(calls[0])
        captured.append((self, rho_max, p_top))
        entries += len(got)
        differ += sum(a != b for a, b in zip(got, expected, strict=True))
        return plain(self, rho_max, p_top)

    load_bisection._FewEntries.replayed = counted
    workloads = [load_workload(p) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    for w in [*workloads, *workload_mix(args.mix)]:
        decide(w)
    steps = load_bisection.BISECTIONS
    print(f"{len(rounds)} replayed load bisections ({entries} entries), examples + {args.mix}")
    print(
        f"  rounds per bisection: median {statistics.median(rounds):.0f}, "
        f"mean {statistics.mean(rounds):.1f}, max {max(rounds)} (the loop: {steps} tests)"
    )
    print(f"  tests saved: {steps / statistics.mean(rounds):.1f}x fewer rounds than the loop's")
    print(f"  answers differing from the loop's: {differ} of {entries}")
    load_bisection._FewEntries.replayed = plain
    per_call = {"loop": [], "replay": []}
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(args.repeats):
            for name, times in per_call.items():
                start = time.process_time()
                for few, rho_max, p_top in captured:
                    few.bisect(rho_max) if name == "loop" else few.replayed(rho_max, p_top)
                times.append(1e6 * (time.process_time() - start) / len(captured))
    for name, times in per_call.items():
        print(
            f"  {name:6s} us CPU per bisection: median {statistics.median(times):.0f} "
            f"(min {min(times):.0f}, max {max(times):.0f})"
        )
    print("command: python benchmarks/replay_rounds.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
