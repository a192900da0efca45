"""CPU time a decision spends in the conditional search (issue 27), for one checkout.

Run from the repository root (or give another checkout's root; alternate the two in fresh
processes on a shared machine, as `decide_cpu_ab.py` does for the whole decision):

    python benchmarks/conditional_cpu.py [--root PATH] [--workloads 256]

Process CPU time (`time.process_time`) inside `conditional.evaluate_many_later` and the
function it returns, after a warm-up: rag-8k decided alone (the least of 7 runs of 20) and
per decision over the seeded batch (`workload_mix.py`, seed 7; the least of 3). The calls
behind it are `conditional_calls.py`'s and, by stage, `conditional_stages.py`'s.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def timed(fn: Callable, spent: list[float]) -> Callable:
    """`fn` with the CPU time spent inside it (and inside any function it returns) added up."""

    def inner(*args, **kwargs):
        start = time.process_time()
        try:
            out = fn(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - start
        return timed(out, spent) if callable(out) else out

    return inner


def main() -> None:
    from decide_calls import arguments

    args = arguments(__doc__.splitlines()[0])
    sys.path[:0] = [str(args.root / "skill"), str(args.root / "benchmarks")]
    from disagg_decider.calc.modes import conditional
    from disagg_decider.decide import decide, decide_many
    from disagg_decider.workload import load_workload
    from workload_mix import workload_mix

    spent = [0.0]
    conditional.evaluate_many_later = timed(conditional.evaluate_many_later, spent)
    one = load_workload(args.root / "examples" / "rag-8k-h200-rdma-dynamo.yaml")
    mix = workload_mix(args.workloads)
    for _ in range(5):
        decide(one)
    decide_many(mix[:64])
    alone = []
    for _ in range(7):
        spent[0] = 0.0
        for _ in range(20):
            decide(one)
        alone.append(spent[0] / 20 * 1e3)
    batched = []
    for _ in range(3):
        spent[0] = 0.0
        decide_many(mix)
        batched.append(spent[0] / len(mix) * 1e3)
    print(f"{args.root}")
    print(f"  conditional search, rag-8k alone: {min(alone):.2f} ms CPU (least of 7 x 20)")
    print(f"  conditional search, batched: {min(batched):.3f} ms CPU a decision (least of 3)")


if __name__ == "__main__":
    main()
