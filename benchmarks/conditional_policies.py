"""Dynamo's conditional-disaggregation router policies, simulated on the verdict's pools (issue 14).

The issue's bimodal workload (70% 400/150-token chat, 30% 16K/300-token RAG; Qwen3-32B FP8 on
16 H200 over 400G RDMA; TTFT 2 s, TPOT 25 ms) is decided, and its conditional layout (threshold
T, prefill pool, decode workers that prefill locally) is simulated behind each of Dynamo's
router policies: `isl_bounding`, `prefill_load` and `isl_or_load` (semantics: ai-dynamo/dynamo
docs/components/router/router-disaggregated-serving.md, summarised in shared/reference/
dynamo_llmd.md). For each it prints the goodput (99% of steady-state requests within both p99
targets, bisected over the rate) and, at 1.2x the calculator's max rate, the share of requests
sent to prefill and the SLO attainment.

    python benchmarks/conditional_policies.py
    python benchmarks/conditional_policies.py --requests 3000 --busy 0.5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "skill"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from tests.test_conditional import bimodal  # noqa: E402

from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.sim import conditional as sim_conditional  # noqa: E402
from disagg_decider.sim import metrics, run  # noqa: E402
from disagg_decider.sim.goodput import replay_at  # noqa: E402
from disagg_decider.workload import resolve  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--busy", type=float, default=1.0, help="prefill busy threshold")
    args = parser.parse_args()
    w = bimodal()
    v, r = decide(w), resolve(w)
    k = v.conditional
    base = run.synthetic_requests(r, args.requests, seed=args.seed)
    print(
        f"calculator: T={k.threshold_tokens}, {k.share_to_prefill:.1%} to prefill, "
        f"max rate {k.max_rate_per_s:.2f} req/s on {k.prefill_replicas}P x TP{k.prefill_tp} + "
        f"{k.decode_replicas}D x TP{k.decode_tp}"
    )
    print(f"{'policy':<14}{'goodput req/s':>14}{'share@1.2x':>12}{'attain@1.2x':>13}{'s':>6}")
    over = replay_at(base, 1.2 * k.max_rate_per_s)
    for policy in sim_conditional.POLICIES:
        start = time.perf_counter()
        cfg = sim_conditional.config_of(r, v, policy, prefill_busy_threshold=args.busy)
        gp = sim_conditional.goodput(r, cfg, base, 0.99, k.max_rate_per_s)
        engines = run.engine(r, cfg.prefill_tp), run.engine(r, cfg.decode_tp)
        outcome = sim_conditional.simulate(*engines, over, cfg)
        share = outcome.share_to_prefill
        attained = metrics.attainment(outcome, over, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]
        took = time.perf_counter() - start
        print(f"{policy:<14}{gp:>14.2f}{share:>12.1%}{attained:>13.1%}{took:>6.1f}")
    print(
        f"command: python benchmarks/conditional_policies.py --requests {args.requests} "
        f"--seed {args.seed} --busy {args.busy:g}"
    )


if __name__ == "__main__":
    main()
