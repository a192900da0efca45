"""How fast is a verdict? Start-up against its dependencies, decisions in-process, MCP calls.

Run from the repository root:

    python benchmarks/decide_speed.py [--workloads 2048] [--repeats 5] [--seconds 1] [--runs 4]

Reports, on one core (the process is pinned to CPU 0 where the OS allows):
  - batched decisions (`decide.decide_many` over a seeded mix of workloads around the
    examples, `benchmarks/workload_mix.py`): the path of `decide batch`, sweeps and scripts;
    calculator only (`analyze_many`), rule evaluation only (metric table + rulebook on those
    results) and full decisions (calculator + rulebook + Verdict records);
  - one decision per call (`decide.decide`, cycling through the examples): what one
    `decide --workload` or one MCP call costs in-process;
  - the wall time of `decide --workload examples/... --format json` as a fresh process, as a
    ratio to a fresh process that only imports the third-party packages that verdict loads
    (found by running one and reading its sys.modules; pydantic as `from pydantic import
    BaseModel`, since a bare `import pydantic` defers nearly everything), and to `python -c
    pass`. Each repeat launches them back to back (--runs times), so drift in the
    machine's load hits all alike; the ratio is taken within each repeat, in wall time and
    in CPU time (user + system of the child, which moves less with the load). Children get
    a private bytecode cache (PYTHONPYCACHEPREFIX, filled by a warm-up launch), as an
    installed wheel has; also reported: the ratio to importing all the core dependencies
    (numpy, pydantic, yaml, typer, jinja2, rich); and where such a process spends its time
    (dependency imports, project imports, workload/catalogs/rulebook, first and second
    decision), timed inside one child per repeat;
  - one `decide_disaggregation` call through the MCP SDK's in-memory client
    (`benchmarks/mcp_latency.py`), when the `mcp` package is installed.

Every measure is taken once per repeat, the repeats interleaved (batch, one-by-one, process,
MCP, then again), so a slow minute on a shared machine spreads over all of them. Figures are
the median over repeats with the min-max spread.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
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


THIRD_PARTY = ["numpy", "pydantic", "yaml", "typer", "jinja2", "rich", "click", "mcp"]

PROBE = """
import contextlib, io, json, sys
sys.argv = ["decide", "--workload", sys.argv[1], "--format", "json"]
from disagg_decider.entry import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


CORE_DEPENDENCIES = ["numpy", "pydantic", "yaml", "typer", "jinja2", "rich"]  # pyproject, less mcp
_PYCACHE = tempfile.mkdtemp(prefix="decide-speed-pycache-")
atexit.register(shutil.rmtree, _PYCACHE, ignore_errors=True)


def _env() -> dict[str, str]:
    """The children's environment: compiled modules cached in a private folder
    (PYTHONPYCACHEPREFIX; the warm-up launch writes them), as an installed wheel has them, even
    where PYTHONDONTWRITEBYTECODE=1 would make every launch compile this project's modules
    from source (this session's machines set it: about 40-50 ms more CPU per verdict)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "PYTHONPYCACHEPREFIX": _PYCACHE}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def verdict_dependencies(path: Path) -> list[str]:
    """The third-party packages a `decide --workload --format json` process has loaded."""
    cmd = [sys.executable, "-c", PROBE, str(path)]
    loaded = json.loads(subprocess.run(cmd, check=True, capture_output=True, env=_env()).stdout)
    return [name for name in THIRD_PARTY if name in loaded]


def import_statement(packages: list[str]) -> str:
    plain = [p for p in packages if p != "pydantic"]
    parts = [f"import {', '.join(plain)}"] if plain else []
    if "pydantic" in packages:
        parts.append("from pydantic import BaseModel")
    return "; ".join(parts) or "pass"


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_s(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one launch; CPU (user + system) moves less with the load."""
    cpu, start = _children_cpu_s(), time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=_env())
    return time.perf_counter() - start, _children_cpu_s() - cpu


def startup_commands(path: Path, deps_import: str, core_import: str) -> dict[str, list[str]]:
    return {
        "bare": [sys.executable, "-c", "pass"],
        "deps": [sys.executable, "-c", deps_import],
        "core": [sys.executable, "-c", core_import],
        "decide": [
            *(sys.executable, "-m", "disagg_decider"),
            *("--workload", str(path), "--format", "json"),
        ],
    }


def startup_round(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall and CPU seconds of a bare interpreter, the dependency imports and the
    verdict, launched back to back `runs` times."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, cmd in commands.items():
            wall, cpu = process_s(cmd)
            samples.setdefault(name, []).append(wall)
            samples.setdefault(name + " cpu", []).append(cpu)
    return {k: statistics.median(v) for k, v in samples.items()}


# Where a fresh verdict process spends its time beyond the dependency imports: the phases of
# `entry.answer` timed in one child (wall, ms), so a regression shows where it landed.
PHASES = """
import json, sys, time
clock = time.perf_counter
marks = [clock()]
import numpy, yaml
from pydantic import BaseModel
marks.append(clock())
from pathlib import Path
from disagg_decider.entry import skip_pydantic_plugin_discovery
skip_pydantic_plugin_discovery()
from disagg_decider.cli_verdict import pause_collector_for_process, verdict_json
pause_collector_for_process()
from disagg_decider.decide import decide
from disagg_decider.workload import load_workload
marks.append(clock())
from disagg_decider.rules.loader import shipped
path = Path(sys.argv[1])
workload = load_workload(path)
shipped()
marks.append(clock())
verdict_json(decide(workload, base_dir=path.parent))
marks.append(clock())
verdict_json(decide(workload, base_dir=path.parent))
marks.append(clock())
names = ["dependencies", "project imports", "workload, catalogs, rulebook", "first decision",
         "second decision"]
print(json.dumps({n: 1e3 * (b - a) for n, a, b in zip(names, marks, marks[1:])}))
"""


def phases_ms(path: Path) -> dict[str, float]:
    cmd = [sys.executable, "-c", PHASES, str(path)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, env=_env()).stdout)


def mcp_client_ms(workload: dict, calls: int) -> float | None:
    """Median ms of one decide_disaggregation call through the in-memory MCP client."""
    try:
        import anyio

        from mcp_latency import time_client
    except ImportError:
        return None
    return statistics.median(anyio.run(time_client, workload, calls))


def line(label: str, rates: list[float]) -> str:
    return (
        f"{label:44s} {statistics.median(rates):7.0f} per second "
        f"(min {min(rates):.0f}, max {max(rates):.0f})"
    )


def spread(values: list[float], fmt: str) -> str:
    return (
        f"median {format(statistics.median(values), fmt)} "
        f"(min {format(min(values), fmt)}, max {format(max(values), fmt)})"
    )


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2048, help="batch size of the mix")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="per repeat, one-by-one")
    parser.add_argument("--runs", type=int, default=4, help="process launches per repeat")
    parser.add_argument("--mcp-calls", type=int, default=50, help="MCP calls per repeat")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})  # children inherit it: processes also run on one core

    example = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"
    deps = verdict_dependencies(example)
    deps_import = import_statement(deps)
    commands = startup_commands(example, deps_import, import_statement(CORE_DEPENDENCIES))
    for cmd in commands.values():  # warm-up: the bytecode cache, the page cache
        process_s(cmd)
    mix = workload_mix(args.workloads)
    resolved = [resolve(w) for w in mix]
    analyses = analyze_many(resolved)
    book = with_extra([])
    params = book.param_values()
    read = engine.metrics_read(book.book)

    def rules_only(pairs):
        for r, a in pairs:
            engine.decide(book.book, metric_values(r, a, read), params)

    pairs = list(zip(resolved, analyses, strict=True))
    examples = [load_workload(p) for p in EXAMPLES]
    import yaml

    mcp_workload = yaml.safe_load(example.read_text())
    batch_calc, rule_rates, batch_full, one_full, rounds, mcp_ms = [], [], [], [], [], []
    phases: list[dict[str, float]] = []
    for _ in range(args.repeats):  # interleaved: one sample of every measure per repeat
        batch_calc += batch_rates(analyze_many, resolved, 1)
        rule_rates += batch_rates(rules_only, pairs, 1)
        batch_full += batch_rates(decide_many, mix, 1)
        one_full += call_rates(decide, examples, args.seconds, 1)
        rounds.append(startup_round(commands, args.runs))
        phases.append(phases_ms(example))
        client = mcp_client_ms(mcp_workload, args.mcp_calls)
        if client is not None:
            mcp_ms.append(client)

    print(f"one core; python {sys.version.split()[0]}; {args.repeats} interleaved repeats")
    print(f"batched: {len(mix)} workloads from benchmarks/workload_mix.py")
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
    fast_enough = statistics.median(batch_full) >= 5000
    print(f"  target at least 5,000 full decisions/s: {verdict(fast_enough)}")
    print(f"one by one: the {len(examples)} examples, cycled")
    print(line("  full decision per call (decide)", one_full))
    one_ms = [1e3 / r for r in one_full]
    print(f"  ms per decision: {spread(one_ms, '.2f')}")
    print(f"  target at most 1.5 ms median: {verdict(statistics.median(one_ms) <= 1.5)}")
    ratio = [r["decide"] / r["deps"] for r in rounds]
    cpu_ratio = [r["decide cpu"] / r["deps cpu"] for r in rounds]
    core_ratio = [r["decide"] / r["core"] for r in rounds]
    print(f"`decide --workload {example.name} --format json` as a fresh process:")
    print(f"  its third-party imports: {', '.join(deps)}; baseline: python -c '{deps_import}'")
    print(f"  decide wall s:        {spread([r['decide'] for r in rounds], '.3f')}")
    print(f"  dependency import s:  {spread([r['deps'] for r in rounds], '.3f')}")
    print(f"  bare interpreter s:   {spread([r['bare'] for r in rounds], '.3f')}")
    print(f"  decide / dependencies: {spread(ratio, '.2f')} wall, {spread(cpu_ratio, '.2f')} CPU")
    print(f"  target at most 1.25x: {verdict(statistics.median(ratio) <= 1.25)}")
    print(
        f"  decide / the core dependencies ({', '.join(CORE_DEPENDENCIES)}): "
        f"{spread(core_ratio, '.2f')}"
    )
    print("  where a verdict process spends it, ms wall (one child per repeat, median):")
    for name in phases[0]:
        print(f"    {name:30s} {statistics.median(p[name] for p in phases):6.1f}")
    if mcp_ms:
        print(f"MCP decide_disaggregation through the in-memory client ({args.mcp_calls} calls):")
        print(f"  ms per call: {spread(mcp_ms, '.2f')}")
        print(f"  target at most 3 ms median: {verdict(statistics.median(mcp_ms) <= 3.0)}")
    else:
        print("MCP: not measured (the mcp package is not installed)")
    load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, 1-min load average {load_1m:.1f} at the end")
    print("command: python benchmarks/decide_speed.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
