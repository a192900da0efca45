"""What one decision costs as the cluster grows, and the largest pool the golden mix prices.

    python benchmarks/decision_budget.py            # cluster sizes, one cold process each
    python benchmarks/decision_budget.py --mix 800  # also the golden mix's largest pool

Each size runs `decide` on the chat example (llama-3.1-8b on H100, TP1 allowed: the most
replicas per GPU) in a fresh process and reports that process's CPU seconds and peak RSS.
The budget (`calc/layouts/budget.py`, `MAX_POOL_REPLICAS`) would coarsen clusters whose pools have
more replicas; since issue 27 it is a safety net at the schema's largest cluster, which no
valid workload meets (`benchmarks/cluster_scale.py` shows the cost by cluster size).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

CHAT = ROOT / "examples" / "chat-short-colocate.yaml"
_WRAPPER = """
import json, os, resource, subprocess, sys
env = {**os.environ, "PYTHONPATH": sys.argv[1]}
p = subprocess.run([sys.executable, "-m", "disagg_decider", *sys.argv[2:]],
                   capture_output=True, text=True, env=env)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": p.returncode, "out": p.stdout, "err": p.stderr[-300:],
                  "cpu_s": u.ru_utime + u.ru_stime, "maxrss_mb": u.ru_maxrss / 1024}))
"""


def one_size(gpus: int, folder: Path) -> dict:
    data = yaml.safe_load(CHAT.read_text())
    data["cluster"]["gpus"] = gpus
    path = folder / f"chat-{gpus}.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(ROOT / "skill"), "-w", str(path), "-f", "json"],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    return json.loads(proc.stdout)


def mix_largest_pool(n: int) -> int:
    """The most servers any Erlang C table of the golden mix's decisions reaches."""
    import disagg_decider.calc.queues.erlang as erlang
    import disagg_decider.calc.queues.load_bisection as bisection
    from disagg_decider.decide import decide
    from workload_mix import workload_mix

    tops: list[int] = []
    cached = erlang.erlang_table

    def recorded(top: int):
        tops.append(top)
        return cached(top)

    erlang.erlang_table = bisection.erlang_table = recorded
    for w in workload_mix(n):
        decide(w, base_dir=ROOT / "examples")
    return max(tops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,128,256,1024,2048,100000")
    parser.add_argument("--mix", type=int, default=0, help="workloads of the golden mix")
    args = parser.parse_args()
    from disagg_decider.calc.layouts.budget import MAX_POOL_REPLICAS

    print(f"budget: pools of at most {MAX_POOL_REPLICAS} replicas")
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in map(int, args.sizes.split(",")):
            res = one_size(gpus, Path(tmp))
            if res["code"] == 0:
                verdict = json.loads(res["out"])
                coarse = any("cost budget" in w for w in verdict["warnings"])
                what = f"answered{' (coarsened)' if coarse else ''}"
            else:
                what = f"refused (exit {res['code']})"
            print(
                f"cluster.gpus {gpus:>7,}: {what:<22} {res['cpu_s']:6.2f} CPU-s "
                f"{res['maxrss_mb']:7.0f} MB peak"
            )
    if args.mix:
        print(f"golden mix ({args.mix} workloads): largest pool {mix_largest_pool(args.mix)}")


if __name__ == "__main__":
    main()
