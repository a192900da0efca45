"""The always-disaggregated split search against every whole split, on the workload mix.

Run from the repository root:

    PYTHONPATH=skill python benchmarks/split_search.py [--workloads 800] [--seed 17]

Every call a batched decision makes to `pools.pooled_split` is checked against a brute force
that prices each whole split x = 1 .. most of every entry (`rate_where` at each size): the
served rate must match bit for bit and the prefill replicas too (ties to the fewest). It also
counts the prefill-pool rates the split search bisects (rates read off `PoolRates`' table
cost nothing and are not counted), the figure its CPU cost follows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from disagg_decider.calc.layouts import pool_rates, pools, search  # noqa: E402
from disagg_decider.decide import decide_many  # noqa: E402
from workload_mix import workload_mix  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=800)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    tally = {"splits": 0, "entries": 0, "served_differ": 0, "x_differ": 0}
    cost = {"calls": 0, "rates": 0}
    in_split = [False]
    plain_rate_where = pools.rate_where

    def counted(pool, servers, mask):
        if in_split[0] and np.any(mask):
            cost["calls"] += 1
            cost["rates"] += int(np.sum(mask))
        return plain_rate_where(pool, servers, mask)

    def checked(budget, p_tp, d_tp, pool, d_rate, allowed, rates=None):
        in_split[0] = True
        try:
            out = pools.pooled_split(budget, p_tp, d_tp, pool, d_rate, allowed, rates)
        finally:
            in_split[0] = False
        want, want_x = pools.every_split_best(budget, p_tp, d_tp, pool, d_rate, allowed)
        on = want > 0
        tally["splits"] += 1
        tally["entries"] += int(on.sum())
        tally["served_differ"] += int((~np.equal(out[1], want)).sum())
        tally["x_differ"] += int((on & (out[2] != want_x)).sum())
        return out

    pools.rate_where = pool_rates.rate_where = counted
    search.pooled_split = checked
    decide_many(workload_mix(args.workloads, seed=args.seed))
    print(
        f"{args.workloads} workloads (seed {args.seed}): {tally['splits']} split searches, "
        f"{tally['entries']} entries serving something; differ from every whole split tried: "
        f"served {tally['served_differ']}, prefill replicas {tally['x_differ']}"
    )
    print(
        f"rates the split search bisected: {cost['rates']} in {cost['calls']} calls "
        "(table reads not counted)"
    )
    print(
        "command: PYTHONPATH=skill python benchmarks/split_search.py "
        f"--workloads {args.workloads} --seed {args.seed}"
    )
    return 1 if tally["served_differ"] or tally["x_differ"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
