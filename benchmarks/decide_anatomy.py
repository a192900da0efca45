"""What a verdict is made of: the work a decision does, counted, against issue 17's budgets.

Run from the repository root:

    python benchmarks/decide_anatomy.py [--workloads 256] [--repeats 5]

`decide_speed.py` and `decide_cpu.py` say how long a verdict takes; this script says why, in
units that do not move with the machine's load, so a speed target can be checked against the
work it leaves room for:

  - one warm decision per example (`decide.decide`): its CPU ms (median of --repeats), the
    Python-level calls it makes (functions, methods and C builtins, as `cProfile` counts them,
    numpy's array methods and reductions included; arithmetic on arrays is not a call there),
    CPU microseconds per call, and the share of the single most expensive function in the
    decision's own time (a flat profile: no one function to rewrite);
  - batched decisions (`decide.decide_many` over `benchmarks/workload_mix.py`): the same counts
    per decision, where numpy's arrays span all the workloads at once;
  - a fresh process's pydantic bill (CPU time, the children pinned to one core): pydantic's
    own imports on the first model (not part of `from pydantic import BaseModel`) and the
    project's models built when a verdict's modules are imported (timed around pydantic's
    model metaclass), against the interpreter's start and the import of the verdict's
    third-party dependencies (`numpy, yaml, BaseModel`), i.e. what a 1.25x start-up budget
    leaves for everything the project does.

Each count is exact for this code and Python; the times are CPU time on this machine.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from decide_cpu import EXAMPLES, cpu_s  # noqa: E402
from disagg_decider.decide import decide, decide_many  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402
from workload_mix import workload_mix  # noqa: E402


def cpu_ms(fn, *args) -> float:
    return 1e3 * cpu_s(fn, *args)


def profile_counts(fn, *args) -> tuple[int, float]:
    """(calls, largest self-time share) of one run of fn under cProfile."""
    profiler = cProfile.Profile()
    profiler.enable()
    fn(*args)
    profiler.disable()
    stats = pstats.Stats(profiler)
    own_s = [row[2] for row in stats.stats.values()]  # (cc, nc, tottime, cumtime, callers)
    return stats.total_calls, max(own_s) / sum(own_s)


# A fresh interpreter: dependency imports, then pydantic's first-use imports, then the
# project's verdict modules with pydantic's model metaclass timed.
PYDANTIC_BILL = """
import json, os, time
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
cpu = time.process_time
t0 = cpu()
import numpy, yaml
from pydantic import BaseModel
t1 = cpu()
import annotated_types, pydantic.fields, pydantic.types
t2 = cpu()
from pydantic._internal import _model_construction as construction
built = [0, 0.0]
original = construction.ModelMetaclass.__new__
def timed(*args, **kwargs):
    start = cpu()
    cls = original(*args, **kwargs)
    built[0] += 1
    built[1] += cpu() - start
    return cls
construction.ModelMetaclass.__new__ = timed
import disagg_decider.cli_verdict, disagg_decider.decide, disagg_decider.workload
import disagg_decider.calc.compare
t3 = cpu()
print(json.dumps({"start": t0, "deps": t1 - t0, "first_use": t2 - t1, "models": built[0],
                  "models_s": built[1], "project": t3 - t2}))
"""


def pydantic_bill(pycache: str) -> dict[str, float]:
    """One fresh child's bill. Its compiled modules come from a private cache (filled by the
    first child), as an installed wheel has them, even where PYTHONDONTWRITEBYTECODE is set."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, "-c", PYDANTIC_BILL], capture_output=True, check=True, env=env, text=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=256, help="batch size of the mix")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measure")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})  # one core, for this process and its children

    print(f"python {sys.version.split()[0]}; CPU time, pinned to one core")
    print("one warm decision per example: CPU ms (median), Python-level calls, us per call,")
    print("largest single function's share of the decision's own time")
    per_call_us, calls_all = [], []
    for path in EXAMPLES:
        workload = load_workload(path)
        decide(workload)
        ms = statistics.median(cpu_ms(decide, workload) for _ in range(args.repeats))
        calls, top = profile_counts(decide, workload)
        us_per = 1e3 * ms / calls
        per_call_us.append(us_per)
        calls_all.append(calls)
        print(f"  {path.stem:40s} {ms:6.2f} ms {calls:7,d} calls {us_per:5.2f} us {top:4.0%}")
    us = statistics.median(per_call_us)
    print(
        f"  median {statistics.median(calls_all):,.0f} calls, {us:.2f} us per call: a 1.5 ms "
        f"decision leaves room for about {1500 / us:,.0f} calls"
    )

    mix = workload_mix(args.workloads)
    decide_many(mix[:64])
    batch_ms = statistics.median(cpu_ms(decide_many, mix) for _ in range(args.repeats))
    calls, top = profile_counts(decide_many, mix)
    per_decision_us = 1e3 * batch_ms / len(mix)
    print(
        f"batched, {len(mix)} workloads: {per_decision_us:.0f} us CPU and "
        f"{calls / len(mix):,.0f} calls per decision ({1e3 * batch_ms / calls:.2f} us per call, "
        f"largest function {top:.0%}); 5,000 decisions per second leave 200 us, about "
        f"{200 * calls / (1e3 * batch_ms):,.0f} calls at that rate"
    )

    pycache = tempfile.mkdtemp(prefix="decide-anatomy-pycache-")
    try:
        pydantic_bill(pycache)  # warm-up: compiles into the private cache
        bills = [pydantic_bill(pycache) for _ in range(args.repeats)]
    finally:
        shutil.rmtree(pycache, ignore_errors=True)

    def median_ms(key: str) -> float:
        return 1e3 * statistics.median(b[key] for b in bills)

    deps, first_use, models = median_ms("deps"), median_ms("first_use"), median_ms("models_s")
    start = median_ms("start")
    print(f"a fresh process (median of {args.repeats}), CPU ms:")
    print(f"  the interpreter's own start                      {start:6.1f}")
    print(f"  numpy, yaml, `from pydantic import BaseModel`  {deps:6.1f}")
    print(f"  pydantic's imports on the first model            {first_use:6.1f}")
    print(
        f"  building the project's {bills[0]['models']:.0f} pydantic models        {models:6.1f}"
        f" (within {median_ms('project'):.1f} of project imports)"
    )
    print(
        f"  a 1.25x start-up budget leaves {0.25 * (start + deps):.1f} ms beyond the "
        "interpreter and dependencies; "
        f"pydantic alone takes {first_use + models:.1f}"
    )
    load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, 1-min load average {load_1m:.1f} at the end")
    print("command: python benchmarks/decide_anatomy.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
