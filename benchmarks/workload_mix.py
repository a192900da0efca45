"""A reproducible mix of workloads around the shipped examples, for speed and regression checks.

Each example is varied along the axes a capacity planner sweeps: request rate, prompt and
output lengths, SLO targets, prefix-cache hit rate, cluster size and network. The mix is
seeded, so two runs (and two versions of the calculator) see the same workloads.

    from workload_mix import workload_mix
    workloads = workload_mix(1000)
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.workload import Workload, load_workload  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
NETWORKS = ("ib-ndr-400", "roce-200", "tcp-25", "efa", "nvlink")


def workload_mix(n: int, seed: int = 7) -> list[Workload]:
    """`n` workloads, cycling through the examples, each with seeded variations."""
    rng = random.Random(seed)
    # Heterogeneous pools take their own (unbatched) path, calc/modes/hetero.py, and mixed traffic
    # varies per class (benchmarks/conditional_vs_sim.py draws its own mixes): not in the mix.
    examples = map(load_workload, EXAMPLES)
    bases = [w for w in examples if not w.cluster.heterogeneous and not w.traffic.classes]
    out = []
    for i in range(n):
        base = bases[i % len(bases)]
        data = base.model_dump(mode="json", exclude_none=True)
        t, slo, cluster = data["traffic"], data["slo"], data["cluster"]
        scale = rng.choice((0.25, 0.5, 1.0, 2.0, 4.0))
        for key in ("prompt_tokens", "output_tokens"):
            p50 = max(16.0, round(t[key]["p50"] * rng.choice((0.5, 1.0, 2.0))))
            t[key] = {"p50": p50, "p99": p50 * rng.choice((1.0, 2.0, 3.0))}
        t["requests_per_second"] = t["requests_per_second"] * scale
        t["prefix_cache_hit_rate"] = rng.choice((0.0, 0.1, 0.3, 0.6))
        slo["ttft_ms"] = slo["ttft_ms"] * rng.choice((0.5, 1.0, 2.0))
        slo["tpot_ms"] = slo["tpot_ms"] * rng.choice((0.7, 1.0, 1.5))
        cluster["gpus"] = rng.choice((2, 4, 8, 16, 32))
        if not isinstance(cluster.get("network"), dict):
            # L40S has no NVLink: keep it on a network link.
            links = NETWORKS if cluster["gpu"] != "l40s" else NETWORKS[:-1]
            cluster["network"] = rng.choice(links)
        data["name"] = f"{data['name']}-{i}"
        out.append(Workload.model_validate(data))
    return out
