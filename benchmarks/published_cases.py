"""The calculator on published cases: what the papers and vendors report, and what we say.

Run from the repository root:

    python benchmarks/published_cases.py

Each case is a workload file in benchmarks/published/ with its source in a comment; the
script varies the fields the source leaves open (SLOs, node count) and prints the verdict and
the gain. The DistServe toy case is checked by the simulator: pytest tests/test_sim_distserve.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.workload import load_workload  # noqa: E402

CASES = ROOT / "benchmarks" / "published"


def verdict_line(label: str, workload) -> str:
    v = decide(workload)
    gain = "n/a (colocated meets no SLO)" if v.metrics.gain is None else f"{v.metrics.gain:.2f}x"
    return f"  {label:<34} {v.decision:<9} gain {gain}"


def with_fields(workload, **fields):
    """A copy with dotted fields replaced, e.g. slo__ttft_ms=1000."""
    data = workload.model_dump(mode="json", exclude_none=True)
    for dotted, value in fields.items():
        node = data
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return type(workload).model_validate(data)


def main() -> None:
    aic = load_workload(CASES / "aiconfigurator-qwen3-32b-32xh200.yaml")
    print("AIConfigurator, Qwen3-32B FP8, 32 H200, 4000/500 (published: disaggregated 1.70x)")
    for ttft in (300, 600, 1000):
        print(verdict_line(f"TTFT {ttft} ms, TPOT 10 ms", with_fields(aic, slo__ttft_ms=ttft)))

    dyn = load_workload(CASES / "dynamo-llama70b-h100.yaml")
    print("Dynamo, 70B FP8 on H100, 3K/150 (published: +30% on 1 node, >2x on 2 nodes)")
    for gpus in (8, 16):
        for tpot in (10, 15, 20):
            w = with_fields(dyn, cluster__gpus=gpus, slo__tpot_ms=tpot)
            print(verdict_line(f"{gpus} GPUs, TPOT {tpot} ms", w))
    print("command: python benchmarks/published_cases.py")


if __name__ == "__main__":
    main()
