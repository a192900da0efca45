"""`decide batch` at fleet scale (issue 27): per-core throughput, --jobs scaling, memory, start-up.

Everything runs `decide batch` as a process on generated workloads (the seeded mix of
`workload_mix.py`, written as one JSONL file per size), as a user would, and reads the process
tree's CPU time and peak RSS from `resource.getrusage(RUSAGE_CHILDREN)` in a fresh wrapper process
per run (so one run's peak is not another's). The project's modules are compiled once by a warm-up
batch into a private cache, so no run pays their compilation. Repeats are interleaved (every
setting once, then every setting again) so that drift in the machine's speed spreads over all of
them.

    python benchmarks/batch_scale.py                       # the figures in the README
    python benchmarks/batch_scale.py --rss-sizes 1000 10000 100000 --repeats 3

Reports:
- batched decisions per CPU-second per core: workloads / (user + sys CPU of the whole tree),
  for each --jobs (the pool's overhead shows as a lower rate with more jobs);
- --jobs 1 .. the machine's cores: workloads per wall second, and the ratio to --jobs 1;
- peak RSS (the largest process of the tree) against the batch's size, with the wall time to
  the first row on stdout and to the last;
- start-up: `decide --version` against `python -c "import pydantic, typer, yaml, jinja2,
  numpy"`, wall and CPU medians, and their ratio.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload_mix import ROOT, workload_mix

# The children find this checkout's modules compiled, as an installed wheel has them: cached in
# a private folder (written by a warm-up launch), even where PYTHONDONTWRITEBYTECODE=1 would
# make every launch compile ~110 modules from source (about 0.1 CPU-s a process here).
PYCACHE = tempfile.mkdtemp(prefix="batch-scale-pycache-")
atexit.register(shutil.rmtree, PYCACHE, ignore_errors=True)
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "skill"), "PYTHONPYCACHEPREFIX": PYCACHE}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)
DECIDE = [sys.executable, "-m", "disagg_decider"]
DEPENDENCIES = "import pydantic, typer, yaml, jinja2, numpy"

# Runs `argv` and prints: seconds to the first stdout line, seconds to the end, CPU seconds of
# the process tree and the largest resident set (KiB) in it. Every half second it also sums
# the resident sets of the whole tree (the command and every process under it, from /proc;
# pages a fork shares with its parent count in both, so the sum errs high) and, every
# `curve_s` seconds, records (seconds, rows written so far, that sum): the peak of the sum and
# the curve of memory against rows come back too (Linux; elsewhere the sum reads 0).
WRAPPER = """
import json, os, resource, subprocess, sys, threading, time
curve_s = float(os.environ.get("BATCH_SCALE_CURVE_S", "10"))
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
state = {"rows": 0, "peak": 0, "curve": [], "done": False}

def tree_rss_kib(root):
    pids, total, i = [root], 0, 0
    while i < len(pids):
        pid, i = pids[i], i + 1
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    pids += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return total

def sample():
    last = -curve_s
    while not state["done"]:
        rss, now = tree_rss_kib(proc.pid), time.perf_counter() - start
        state["peak"] = max(state["peak"], rss)
        if now - last >= curve_s:
            state["curve"].append((round(now, 1), state["rows"], rss))
            last = now
        time.sleep(0.5)

threading.Thread(target=sample, daemon=True).start()
first = None
for line in proc.stdout:
    state["rows"] += 1
    if first is None:
        first = time.perf_counter() - start
code = proc.wait()
state["done"] = True
wall = time.perf_counter() - start
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "first_s": first, "wall_s": wall,
                  "cpu_s": use.ru_utime + use.ru_stime, "maxrss_kib": use.ru_maxrss,
                  "tree_peak_kib": state["peak"], "curve": state["curve"]}))
"""


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def write_mix(n: int, folder: Path) -> Path:
    """`n` seeded workloads as a JSONL file (the mix repeats with new variations past 1,000)."""
    path = folder / f"mix-{n}.jsonl"
    if not path.exists():
        with path.open("w") as f:
            for start in range(0, n, 1000):
                for w in workload_mix(min(1000, n - start), seed=7 + start):
                    data = w.model_dump(mode="json", exclude_none=True)
                    data["name"] = f"{data['name']}-{start}"
                    f.write(json.dumps(data) + "\n")
    return path


def measure(argv: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, *argv], env=ENV, capture_output=True, text=True
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise SystemExit(f"{' '.join(argv)}: exit code {result['code']}")
    return result


def batch(path: Path, jobs: int, chunk: int) -> dict:
    argv = [*DECIDE, "batch", str(path), "-f", "jsonl", "--jobs", str(jobs)]
    return measure([*argv, "--chunk", str(chunk), "--quiet"])


def span(values: list[float], fmt: str = "{:.0f}") -> str:
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} (range {fmt.format(lo)}-{fmt.format(hi)})"


def throughput(path: Path, n: int, repeats: int, chunk: int) -> None:
    jobs_list = list(range(1, cores() + 1))
    runs: dict[int, list[dict]] = {j: [] for j in jobs_list}
    for _ in range(repeats):
        for j in jobs_list:  # interleaved: 1, 2, ..., 1, 2, ...
            runs[j].append(batch(path, j, chunk))
    print(f"\n{n:,} workloads, --chunk {chunk}, {repeats} interleaved repeats")
    base = [n / r["wall_s"] for r in runs[1]]
    for j in jobs_list:
        per_cpu = [n / r["cpu_s"] for r in runs[j]]
        wall = [n / r["wall_s"] for r in runs[j]]
        ratio = [w / b for w, b in zip(wall, base, strict=True)]
        print(
            f"--jobs {j}: {span(per_cpu)} decisions per CPU-second per core; "
            f"{span(wall)} per wall second; {span(ratio, '{:.2f}')}x --jobs 1"
        )


def memory(folder: Path, sizes: list[int], jobs: int, chunk: int) -> None:
    print(f"\npeak RSS, --jobs {jobs}, --chunk {chunk}: the largest process of the tree, and")
    print("the tree's summed RSS (parent + workers, sampled every 0.5 s) at its peak")
    for n in sizes:
        r = batch(write_mix(n, folder), jobs, chunk)
        print(
            f"{n:>7,} workloads: largest process {r['maxrss_kib'] / 1024:.0f} MiB, tree "
            f"{r['tree_peak_kib'] / 1024:.0f} MiB; first row after {r['first_s']:.2f} s of "
            f"{r['wall_s']:.1f} s; {n / r['cpu_s']:.0f} per CPU-second"
        )
        curve = r["curve"]
        if len(curve) > 2:  # the tree's RSS against rows written, at up to 8 points
            picks = [curve[round(k * (len(curve) - 1) / 7)] for k in range(8)]
            points = ", ".join(f"{rows:,} rows {kib / 1024:.0f} MiB" for _, rows, kib in picks)
            print(f"         tree RSS as rows are written: {points}")


def startup(repeats: int) -> None:
    version, deps = [], []
    for _ in range(repeats):
        version.append(measure([*DECIDE, "--version"]))
        deps.append(measure([sys.executable, "-c", DEPENDENCIES]))
    print(f"\nstart-up, {repeats} interleaved runs")
    for key, label in (("wall_s", "wall"), ("cpu_s", "CPU")):
        v = [r[key] * 1e3 for r in version]
        d = [r[key] * 1e3 for r in deps]
        ratios = [a / b for a, b in zip(v, d, strict=True)]
        print(
            f"{label}: decide --version {span(v)} ms, `{DEPENDENCIES}` {span(d)} ms: "
            f"{span(ratios, '{:.2f}')}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workloads", type=int, default=2000, help="batch for throughput")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=512)
    parser.add_argument("--rss-sizes", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--startup-runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{cores()} cores, Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        batch(write_mix(8, folder), 1, args.chunk)  # warm-up: compiles into PYCACHE
        if args.startup_runs:
            startup(args.startup_runs)
        if args.workloads and args.repeats:
            path = write_mix(args.workloads, folder)
            throughput(path, args.workloads, args.repeats, args.chunk)
        if args.rss_sizes:
            memory(folder, args.rss_sizes, cores(), args.chunk)
    print(f"\nload {os.getloadavg()[0]:.1f}; {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
