"""Published disaggregated-vs-aggregated comparisons beside the calculator's, at the same
interactivity and basis.

Run from the repository root:

    python benchmarks/published_frontiers.py

Each case in benchmarks/data/published_frontiers.yaml gives a published ratio (disaggregated
over aggregated throughput per GPU) or only a direction, at a stated tokens/s per user, with
its source and the basis it was computed on. The calculator is asked at that interactivity
(TPOT = 1000 / tokens/s per user) on that basis: rate-matched through `decide frontier`'s
rate-matched rows, static and p99-under-load through the verdict. Printed per case: published
ratio, ours, direction of each, and whether ours is within 1.5x; then the totals.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.frontier_rate_matched import rate_matched_rows  # noqa: E402
from disagg_decider.workload import parse_workload, resolve  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_frontiers.yaml"


def workload_of(case: dict):
    c = case["workload"]
    pub = case["published"]
    basis = pub["basis"]
    data = {
        "name": case["id"],
        "model": c["model"],
        "weights_dtype": c["weights_dtype"],
        "engine": c["engine"],
        "traffic": {
            "prompt_tokens": c["prompt"],
            "output_tokens": c["output"],
            "requests_per_second": c.get("rate", 5),
        },
        "slo": {
            "ttft_ms": c["ttft_ms"],
            "tpot_ms": 1e3 / pub["tokens_per_s_per_user"],
            "basis": "static" if basis == "static" else "p99-under-load",
        },
        "cluster": {
            "gpu": c["gpu"],
            "gpus": c["gpus"],
            "gpus_per_node": c.get("gpus_per_node", 8),
            "network": c["network"],
        },
        "ops": {"maturity": "high"},
    }
    return parse_workload(data, str(DATA))


def our_ratio(case: dict) -> float | None:
    """Disaggregated over colocated throughput per GPU; inf where only the split serves."""
    w = workload_of(case)
    pub = case["published"]
    if pub["basis"] == "rate-matched":
        u = float(pub["tokens_per_s_per_user"])
        rows, _ = rate_matched_rows(resolve(w), [u], u)
        c = rows[0].modes["colocated"].tokens_per_s_per_gpu
        d = rows[0].modes["disaggregated"].tokens_per_s_per_gpu
    else:
        v = decide(w)
        c = v.colocated.goodput_per_gpu if v.colocated.feasible else 0.0
        d = v.disaggregated.goodput_per_gpu if v.disaggregated.feasible else 0.0
    if c > 0:
        return d / c
    return math.inf if d > 0 else None


def main() -> None:
    cases = yaml.safe_load(DATA.read_text())["cases"]
    right = within = with_ratio = 0
    print(f"{'case':<32} {'basis':<15} {'tok/s/u':>7} {'published':>10} {'ours':>7} dir   1.5x")
    for case in cases:
        pub = case["published"]
        ours = our_ratio(case)
        mine = None if ours is None else ("disaggregate" if ours >= 1.0 else "colocate")
        ok_dir = mine == pub["direction"]
        right += ok_dir
        p = pub["ratio"]
        close = ""
        if p is not None:
            with_ratio += 1
            good = ours is not None and math.isfinite(ours) and ours > 0
            good = good and max(ours / p, p / ours) <= 1.5
            within += good
            close = "yes" if good else "no"
        shown = "n/a" if ours is None else ("only D" if math.isinf(ours) else f"{ours:.2f}x")
        print(
            f"{case['id']:<32} {pub['basis']:<15} {pub['tokens_per_s_per_user']:>7g} "
            f"{'-' if p is None else f'{p:.2f}x':>10} {shown:>7} "
            f"{'ok ' if ok_dir else 'NO '}  {close}"
        )
    n = len(cases)
    print(
        f"direction right on {right} of {n} ({right / n:.0%}); ratio within 1.5x on "
        f"{within} of {with_ratio} with a published ratio ({within / max(with_ratio, 1):.0%})"
    )
    print("command: python benchmarks/published_frontiers.py")


if __name__ == "__main__":
    main()
