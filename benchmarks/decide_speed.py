"""How fast is a verdict? Decisions per second in-process, and `decide` as a process.

Run from the repository root:

    python benchmarks/decide_speed.py [--workloads 2048] [--repeats 5] [--seconds 3] [--runs 10]

Reports, on one core (the process is pinned to CPU 0 where the OS allows):
  - batched decisions (`decide.decide_many` over a seeded mix of workloads around the
    examples, `benchmarks/workload_mix.py`): the path of `decide batch`, sweeps and scripts;
    calculator only (`analyze_many`), rule evaluation only (metric table + rulebook on those
    results) and full decisions (calculator + rulebook + Verdict records);
  - one decision per call (`decide.decide`, cycling through the examples): what one
    `decide --workload` or one MCP call costs in-process;
  - the wall time of `decide --workload examples/... --format json` as a fresh process.

Rates are the median over repeats; the machine's speed can drift between runs, so the spread
(min-max) is printed too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.calc.compare import analyze_many  # noqa: E402
from disagg_decider.decide import decide, decide_many  # noqa: E402
from disagg_decider.metrics import metric_values  # noqa: E402
from disagg_decider.rules import engine  # noqa: E402
from disagg_decider.rules.loader import with_extra  # noqa: E402
from disagg_decider.workload import load_workload, resolve  # noqa: E402
from workload_mix import workload_mix  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def batch_rates(fn, items, repeats: int) -> list[float]:
    """Items per second of `fn(items)`, once per repeat, after one warm-up on a slice."""
    fn(items[:64])
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(items)
        rates.append(len(items) / (time.perf_counter() - start))
    return rates


def call_rates(fn, items, seconds: float, repeats: int) -> list[float]:
    """Calls per second of `fn(item)`, cycling through `items`, `seconds` per repeat."""
    for item in items:
        fn(item)
    rates = []
    for _ in range(repeats):
        done = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for item in items:
                fn(item)
            done += len(items)
        rates.append(done / (time.perf_counter() - start))
    return rates


def process_wall_s(path: Path, runs: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    cmd = [sys.executable, "-m", "disagg_decider", "--workload", str(path), "--format", "json"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def line(label: str, rates: list[float]) -> str:
    return (
        f"{label:44s} {statistics.median(rates):7.0f} per second "
        f"(min {min(rates):.0f}, max {max(rates):.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2048, help="batch size of the mix")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="per repeat, one-by-one")
    parser.add_argument("--runs", type=int, default=10, help="process launches")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})

    mix = workload_mix(args.workloads)
    resolved = [resolve(w) for w in mix]
    batch_calc = batch_rates(analyze_many, resolved, args.repeats)
    analyses = analyze_many(resolved)
    book = with_extra([])
    params = book.param_values()

    read = engine.metrics_read(book.book)

    def rules_only(pairs):
        for r, a in pairs:
            engine.decide(book.book, metric_values(r, a, read), params)

    rule_rates = batch_rates(rules_only, list(zip(resolved, analyses, strict=True)), args.repeats)
    batch_full = batch_rates(decide_many, mix, args.repeats)
    examples = [load_workload(p) for p in EXAMPLES]
    one_full = call_rates(decide, examples, args.seconds, min(args.repeats, 3))
    wall = process_wall_s(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml", args.runs)

    print(f"one core; python {sys.version.split()[0]}")
    print(f"batched: {len(mix)} workloads from benchmarks/workload_mix.py, {args.repeats} runs")
    print(line("  calculator only (analyze_many)", batch_calc))
    print(line("  rule evaluation only (metrics + rulebook)", rule_rates))
    print(line("  full decisions (decide_many -> Verdicts)", batch_full))
    calc_s, rules_s = 1 / statistics.median(batch_calc), 1 / statistics.median(rule_rates)
    full_s = 1 / statistics.median(batch_full)
    print(
        f"  per decision: calculator {calc_s * 1e6:.0f} us, rule evaluation {rules_s * 1e6:.0f} us "
        f"(+{100 * rules_s / calc_s:.0f}% on the calculator), records and summary "
        f"{max(full_s - calc_s - rules_s, 0) * 1e6:.0f} us"
    )
    print(f"one by one: the {len(examples)} examples, cycled")
    print(line("  full decision per call (decide)", one_full))
    print(
        f"`decide --workload --format json` process wall time: median "
        f"{statistics.median(wall):.3f} s, max {max(wall):.3f} s over {len(wall)} runs"
    )
    print("command: python benchmarks/decide_speed.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
