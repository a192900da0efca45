"""What one decision costs as the cluster grows (issue 27): the RAG example on 16 .. 100,000 GPUs.

Run from the repository root:

    python benchmarks/cluster_scale.py [--rounds 5] [--sizes 16,64,256,1024,10000,100000]
                                       [--no-process]

Reports per cluster size, the workload otherwise the example's (3 req/s):
  - in-process CPU ms of one `decide` (`time.process_time`): the least over `--rounds`
    interleaved rounds after one warm-up each (the machine is shared; the least is the
    decision's own cost), and its ratio to the first size's;
  - a fresh `decide --workload ... --format json` process: its CPU seconds (user + system) and
    peak RSS, from `resource.getrusage(RUSAGE_CHILDREN)` of a wrapper whose only child it is
    (imports and the Erlang table, built once per process, included);
  - the verdict: decision and the GPUs each layout takes for the rate.

Before issue 27 the same example took ~16 ms on 16 GPUs, 8.9 CPU-s on 256, 63.8 CPU-s and
670 MB on 1,024, and 100,000 GPUs did not finish (later refused by a 256-replica budget).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.workload import Workload  # noqa: E402

RAG = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"
_WRAPPER = """
import json, os, resource, subprocess, sys
env = {**os.environ, "PYTHONPATH": sys.argv[1]}
p = subprocess.run([sys.executable, "-m", "disagg_decider", "--workload", sys.argv[2],
                    "--format", "json"], capture_output=True, text=True, env=env)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": p.returncode, "cpu_s": u.ru_utime + u.ru_stime,
                  "maxrss_mb": u.ru_maxrss / 1024}))
"""


def rag_data(gpus: int) -> dict:
    data = yaml.safe_load(RAG.read_text())
    data["cluster"]["gpus"] = gpus
    return data


def least_cpu_ms(sizes: list[int], rounds: int) -> dict[int, float]:
    """Least in-process CPU ms of `decide` per size over interleaved rounds, after a warm-up."""
    workloads = {g: Workload.model_validate(rag_data(g)) for g in sizes}
    for w in workloads.values():
        decide(w)
    least = dict.fromkeys(sizes, float("inf"))
    for _ in range(rounds):
        for g, w in workloads.items():
            start = time.process_time()
            decide(w)
            least[g] = min(least[g], (time.process_time() - start) * 1e3)
    return least


def fresh_process(gpus: int, folder: Path) -> dict:
    path = folder / f"rag-{gpus}.yaml"
    path.write_text(yaml.safe_dump(rag_data(gpus), sort_keys=False))
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(ROOT / "skill"), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def layout_gpus(gpus: int) -> str:
    v = decide(Workload.model_validate(rag_data(gpus)))
    s = v.sizing
    return (
        f"{v.decision}; colocated {s.colocated_gpus}, "
        f"split {s.prefill_gpus}+{s.decode_gpus} GPUs for the rate"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="16,64,256,1024,10000,100000")
    parser.add_argument("--no-process", action="store_true", help="skip the fresh processes")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cpu = least_cpu_ms(sizes, args.rounds)
    print(f"RAG example ({RAG.name}), least of {args.rounds} interleaved rounds")
    print(f"{'GPUs':>8} {'CPU ms':>8} {'x first':>8} {'process CPU s':>14} {'peak MB':>8}  verdict")
    with tempfile.TemporaryDirectory() as tmp:
        for g in sizes:
            proc = {"cpu_s": float("nan"), "maxrss_mb": float("nan")}
            if not args.no_process:
                proc = fresh_process(g, Path(tmp))
            print(
                f"{g:>8,} {cpu[g]:>8.1f} {cpu[g] / cpu[sizes[0]]:>8.2f} "
                f"{proc['cpu_s']:>14.2f} {proc['maxrss_mb']:>8.0f}  {layout_gpus(g)}"
            )


if __name__ == "__main__":
    main()
