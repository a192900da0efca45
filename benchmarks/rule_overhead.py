"""What the rulebook costs on top of the calculator, in decisions per second, in process.

For each example workload: the calculator alone (resolve + analyze), then the same plus the
rulebook (metric table + parameter overrides + engine), and the engine alone. The issue's bar:
the rulebook may cost at most 30% of the calculator-only rate.

Reproduce: PYTHONPATH=skill python benchmarks/rule_overhead.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from disagg_decider.calc.compare import analyze
from disagg_decider.decide import effective_parameters
from disagg_decider.metrics import metric_values
from disagg_decider.rules import engine
from disagg_decider.rules.loader import shipped
from disagg_decider.workload import load_workload, resolve

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def rate_per_s(fn: Callable[[], object], seconds: float, repeats: int = 3) -> float:
    """Best of `repeats` timed runs: other processes on the machine only ever slow one down."""
    fn()  # warm caches (catalogs, the rulebook)
    best = 0.0
    for _ in range(repeats):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / repeats:
            fn()
            count += 1
        best = max(best, count / elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    loaded = shipped()
    print(
        f"{'workload':<32} {'calc/s':>7} {'calc+rules/s':>13} {'drop':>6} {'rules only/s':>13} "
        f"{'drop from parts':>16}"
    )
    drops = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        workload = load_workload(path)

        def calc_only(workload=workload, path=path) -> object:
            return analyze(resolve(workload, path.parent))

        def with_rules(workload=workload, path=path) -> object:
            resolved = resolve(workload, path.parent)
            metrics = metric_values(resolved, analyze(resolved))
            params, _ = effective_parameters(loaded, workload, {})
            return engine.decide(loaded.book, metrics, params)

        resolved = resolve(workload, path.parent)
        metrics = metric_values(resolved, analyze(resolved))
        params = loaded.param_values()
        calc = rate_per_s(calc_only, args.seconds)
        full = rate_per_s(with_rules, args.seconds)
        rules = rate_per_s(
            lambda m=metrics, p=params: engine.decide(loaded.book, m, p), args.seconds
        )
        drop = 1 - full / calc
        # the same drop from the two parts' costs, immune to load changing between the runs
        from_parts = (1 / rules) / (1 / calc + 1 / rules)
        drops.append((drop, from_parts))
        print(
            f"{path.stem:<32} {calc:>7.0f} {full:>13.0f} {drop:>6.1%} {rules:>13.0f} "
            f"{from_parts:>16.1%}"
        )
    measured = [d for d, _ in drops]
    parts = [p for _, p in drops]
    print(
        f"drop measured: mean {sum(measured) / len(measured):.1%}, worst {max(measured):.1%}; "
        f"from parts: mean {sum(parts) / len(parts):.1%}, worst {max(parts):.1%} (bar: 30%)"
    )
    print("reproduce: PYTHONPATH=skill python benchmarks/rule_overhead.py --seconds 3")


if __name__ == "__main__":
    main()
