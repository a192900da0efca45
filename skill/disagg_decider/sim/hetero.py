"""Heterogeneous pools in the simulator: prefill on one GPU type, decode on another.

The layouts come from the verdict and the pricing from the calculator (calc/modes/hetero.py):
disaggregated is the cross split, prefill engines on the prefill pool's GPU, decode engines on
the decode pool's, each request's KV over the cluster network (`hetero_cross.network_path`);
colocated is both pools serving colocated replicas side by side, each pool's layout the
calculator's for that pool alone, the traffic split in proportion to what each pool carries
within the targets (the calculator adds the two rates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.modes import hetero
from disagg_decider.calc.physics.step import Engine
from disagg_decider.errors import UserError
from disagg_decider.sim.colocated import ColocatedConfig
from disagg_decider.sim.outcome import Outcome
from disagg_decider.sim.requests import Requests
from disagg_decider.verdict import Verdict
from disagg_decider.workload import Resolved


@dataclass(frozen=True)
class ColocatedPool:
    """One GPU type's colocated replicas and the share of arrivals it takes."""

    role: str  # the pool: prefill or decode
    gpu: str
    engine: Engine
    config: ColocatedConfig
    share: float


def check_cross_split(verdict: Verdict) -> None:
    """The simulator runs the cross split: one prefill layout on the prefill GPU and one decode
    layout on the decode GPU; the verdict's other heterogeneous layouts are refused by name."""
    label = verdict.disaggregated.prefill_layout or ""
    if " on " not in label:
        raise UserError(
            "cluster.prefill_gpu/decode_gpu: the verdict's split runs inside each pool (each "
            "pool's own split beats the cross split); simulate each pool's workload on its own"
        )
    if "(+" in label:
        raise UserError(
            f"cluster.prefill_gpu/decode_gpu: the verdict also prefills on spare decode-pool "
            f"GPUs ({label}); the simulator runs one prefill layout. Lower the rate or add "
            "prefill GPUs"
        )


def colocated_pools(r: Resolved, colocated_config, engine_for) -> tuple[ColocatedPool, ...]:
    """Each pool's colocated layout as the calculator prices it for that pool alone, all its
    replicas, and its share of the arrivals: its goodput over the two pools' sum."""
    from disagg_decider.calc.compare import analyze_many

    pools = [hetero.pool_resolved(r, role) for role in ("prefill", "decode")]
    analyses = analyze_many(pools)
    rates = [a.colocated.max_rate_per_s if a.colocated.feasible else 0.0 for a in analyses]
    if sum(rates) <= 0:
        raise UserError("cluster.prefill_gpu/decode_gpu: neither pool can serve colocated")
    out = []
    for role, rp, a, rate in zip(("prefill", "decode"), pools, analyses, rates, strict=True):
        c = a.colocated
        gpus = c.tp * c.dp
        replicas = rp.workload.cluster.gpus // gpus
        cfg = colocated_config(replicas, gpus, c, a)
        engine = engine_for(rp, c.tp, c.dp, c.ep)
        out.append(ColocatedPool(role, rp.gpu.id, engine, cfg, rate / sum(rates)))
    return tuple(p for p in out if p.share > 0)


def split(requests: Requests, shares: list[float], seed: int = 0) -> list[np.ndarray]:
    """Arrival indices per pool: a weighted random router with a fixed seed."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(shares), size=len(requests), p=np.asarray(shares) / sum(shares))
    return [np.flatnonzero(pick == i) for i in range(len(shares))]


def subset(requests: Requests, index: np.ndarray) -> Requests:
    return Requests(
        arrival_ms=requests.arrival_ms[index],
        prompt=requests.prompt[index],
        output=requests.output[index],
        cached=requests.cached[index],
    )


def merged(outcomes: list[Outcome], parts: list[np.ndarray], n: int) -> Outcome:
    first, done = np.zeros(n), np.zeros(n)
    for o, index in zip(outcomes, parts, strict=True):
        first[index], done[index] = o.first_token_ms, o.done_ms
    return Outcome(
        mode="colocated",
        gpus=sum(o.gpus for o in outcomes),
        first_token_ms=first,
        done_ms=done,
        layout=" + ".join(o.layout for o in outcomes),
    )


def usd_per_gpu_hour(r: Resolved, s, mode: str) -> float:
    """The mode's GPU-hour price averaged over the GPUs it runs, each at its pool's price
    (`cost.prefill_/decode_usd_per_gpu_hour`), as the calculator costs the two pools."""
    price = {
        role: hetero.pool_workload(r.workload, role).cost.usd_per_gpu_hour
        for role in ("prefill", "decode")
    }
    if mode == "colocated":
        spend = [(p.config.gpus, price[p.role]) for p in s.colocated_pools]
    else:
        d = s.disaggregated
        spend = [
            (d.prefill_replicas * d.prefill_tp, price["prefill"]),
            (d.decode_replicas * d.decode_tp, price["decode"]),
        ]
    gpus = sum(g for g, _ in spend)
    return sum(g * usd for g, usd in spend) / gpus if gpus else price["decode"]
