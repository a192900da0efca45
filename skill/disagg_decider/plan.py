"""The plan a verdict recommends, and the layouts it was weighed against, as plain records.

A platform engineer acts on one thing: what to deploy (orchestrator, pools with their
parallelism and replicas, the routing threshold, GPUs) and what it costs. The calculator gives
each mode's pools and costs; this module picks the one the decision runs (Dynamo may run the
always-split pools where its router cannot keep cache-cold prompts local) and prices the
conditional layout, which the calculator sizes but does not cost, with the same formula the
modes are priced by (`calc/compare.py`), so every plan's cost has one source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from disagg_decider.calc.mode_records import HOURS_PER_YEAR
from disagg_decider.calc.result import (
    ColocatedResult,
    ConditionalResult,
    DisaggregatedResult,
    ModeResult,
)

if TYPE_CHECKING:
    from disagg_decider.verdict import Verdict
    from disagg_decider.workload import Resolved, Traffic

PlanLayout = Literal["colocated", "disaggregated", "conditional"]
Orchestrator = Literal["dynamo", "llm-d"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Pool(_Out):
    """One pool of identical replicas: `layout` is the calculator's (TP2, DP8/EP8, TP1 on b200)."""

    role: Literal["colocated", "prefill", "decode"]
    replicas: int
    layout: str
    tp: int
    dp: int = 1
    ep: int = 1
    gpus: int


class Plan(_Out):
    """A layout as something to deploy: pools, GPUs, cost, and whether it carries the rate.

    `carries_rate`: it meets both p99 targets at the workload's rate on no more GPUs than the
    cluster has. `gpus` is what the pools take (capped at the cluster where the rate needs
    more: `gpus_needed_for_rate`). The costs are those of `gpus` serving at most the rate.
    """

    layout: PlanLayout
    orchestrator: Orchestrator | None  # None: colocated, or a split the verdict did not choose
    pools: list[Pool]
    gpus: int
    gpus_needed_for_rate: int | None
    fits_cluster: bool
    carries_rate: bool
    max_rate_per_s: float
    threshold_tokens: int | None = None  # conditional: prompts above it go to the prefill pool
    share_to_prefill: float | None = None
    chunk_tokens: int | None = None  # chunked-prefill budget of the pool that prefills locally
    cost_per_year_usd: float
    cost_per_million_tokens_usd: float | None


class PriceInputs(_Out):
    """What a plan's cost needs from the workload besides the verdict."""

    requests_per_second: float
    usd_per_gpu_hour: float
    prefill_usd_per_gpu_hour: float  # = usd_per_gpu_hour unless the workload prices pools
    decode_usd_per_gpu_hour: float
    tokens_per_request: float  # mean prompt + mean output, as the calculator prices them


def price_inputs(r: Resolved) -> PriceInputs:
    """The workload's rate, GPU prices and mean tokens per request (the calculator's lengths)."""
    w = r.workload
    price = w.cost.usd_per_gpu_hour
    return PriceInputs(
        requests_per_second=w.traffic.requests_per_second,
        usd_per_gpu_hour=price,
        prefill_usd_per_gpu_hour=w.cost.prefill_usd_per_gpu_hour or price,
        decode_usd_per_gpu_hour=w.cost.decode_usd_per_gpu_hour or price,
        tokens_per_request=tokens_per_request(w.traffic),
    )


def tokens_per_request(traffic: Traffic) -> float:
    """Mean prompt + mean output tokens: `Lengths.of`'s `prompt_mean + output_mean`, the same
    numpy operations on the same numbers, without the dozen other fields it derives."""
    from disagg_decider.calc.queues.queueing import lognormal_mean
    from disagg_decider.workload import lognormal_sigma

    prompt, output = traffic.prompt_tokens, traffic.output_tokens
    prompt_mean = lognormal_mean(prompt.p50, lognormal_sigma(prompt))
    output_mean = lognormal_mean(output.p50, lognormal_sigma(output))
    return float(prompt_mean + output_mean)


def cost_usd(
    usd_per_hour: float, served_per_s: float, tokens_per_request: float
) -> tuple[float | None, float]:
    """($ per 1M tokens, $ per year) of GPUs costing `usd_per_hour` serving `served_per_s`:
    the calculator's formula (`calc/compare.py` `_costs`), for layouts it does not price."""
    tokens_per_hour = served_per_s * tokens_per_request * 3600.0
    per_million = usd_per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else None
    return per_million, usd_per_hour * HOURS_PER_YEAR


def colocated_plan(c: ColocatedResult) -> Plan:
    pool = Pool(
        role="colocated", replicas=c.replicas, layout=c.layout, tp=c.tp, dp=c.dp, ep=c.ep,
        gpus=c.gpus,
    )  # fmt: skip
    return Plan(
        layout="colocated",
        orchestrator=None,
        pools=[pool],
        chunk_tokens=c.chunk_tokens,
        **_mode_fields(c),
    )


def split_plan(d: DisaggregatedResult, orchestrator: Orchestrator | None) -> Plan:
    pools = [
        Pool(role="prefill", replicas=d.prefill_replicas, layout=d.prefill_layout,
             tp=d.prefill_tp, dp=d.prefill_dp, ep=d.prefill_ep, gpus=d.prefill_gpus),
        Pool(role="decode", replicas=d.decode_replicas, layout=d.decode_layout,
             tp=d.decode_tp, dp=d.decode_dp, ep=d.decode_ep, gpus=d.decode_gpus),
    ]  # fmt: skip
    return Plan(
        layout="disaggregated",
        orchestrator=orchestrator,
        pools=pools,
        threshold_tokens=0,
        share_to_prefill=1.0,
        **_mode_fields(d),
    )


def _mode_fields(m: ModeResult) -> dict:
    """A calculator mode's size and cost as the plan states them (the calculator priced it)."""
    return {
        "gpus": m.gpus,
        "gpus_needed_for_rate": m.gpus_needed_for_rate,
        "fits_cluster": m.fits_cluster,
        "carries_rate": m.feasible and m.fits_cluster,
        "max_rate_per_s": m.max_rate_per_s,
        "cost_per_year_usd": m.cost_per_year_usd,
        "cost_per_million_tokens_usd": m.cost_per_million_tokens_usd,
    }


def conditional_carries_rate(k: ConditionalResult, cluster_gpus: int, rate_per_s: float) -> bool:
    """The conditional pools, sized for the rate, fit the cluster and carry the rate."""
    if not k.feasible or k.layout != "conditional":
        return False
    return k.gpus <= cluster_gpus and k.max_rate_per_s >= rate_per_s


def conditional_plan(
    k: ConditionalResult, orchestrator: Orchestrator | None, cluster_gpus: int, x: PriceInputs
) -> Plan:
    """The conditional layout's pools (plain TP replicas) priced as the modes are."""
    prefill_tp = k.prefill_tp or 0
    prefill_gpus, decode_gpus = k.prefill_replicas * prefill_tp, k.decode_replicas * k.decode_tp
    usd_per_hour = (
        prefill_gpus * x.prefill_usd_per_gpu_hour + decode_gpus * x.decode_usd_per_gpu_hour
    )
    served = min(x.requests_per_second, k.max_rate_per_s)
    carries = conditional_carries_rate(k, cluster_gpus, x.requests_per_second)
    per_million, per_year = cost_usd(usd_per_hour, served, x.tokens_per_request)
    pools = [
        Pool(role="prefill", replicas=k.prefill_replicas, layout=f"TP{prefill_tp}",
             tp=prefill_tp, gpus=prefill_gpus),
        Pool(role="decode", replicas=k.decode_replicas, layout=f"TP{k.decode_tp}",
             tp=k.decode_tp, gpus=decode_gpus),
    ]  # fmt: skip
    return Plan(
        layout="conditional",
        orchestrator=orchestrator,
        pools=pools,
        gpus=k.gpus,
        gpus_needed_for_rate=k.gpus if carries else None,  # unknown past the cluster
        fits_cluster=k.gpus <= cluster_gpus,
        carries_rate=carries,
        max_rate_per_s=k.max_rate_per_s,
        threshold_tokens=k.threshold_tokens,
        share_to_prefill=k.share_to_prefill,
        chunk_tokens=k.chunk_tokens,
        cost_per_year_usd=per_year,
        cost_per_million_tokens_usd=per_million,
    )


def chosen_layout(v: Verdict) -> PlanLayout | None:
    """The layout the decision deploys: colocated for colocate; for Dynamo the pools its router
    can run (`dynamo_layout`); for llm-d the best layout. None where that mode meets no target."""
    k = v.conditional
    conditional = k is not None and k.feasible and k.layout == "conditional"
    if v.decision == "colocate":
        return "colocated" if v.colocated.feasible else None
    runs = v.dynamo_layout if v.decision == "dynamo" else v.layout
    if runs == "conditional" and conditional:
        return "conditional"
    return "disaggregated" if v.disaggregated.feasible else None


def plans(v: Verdict, x: PriceInputs) -> tuple[Plan | None, list[Plan]]:
    """The plan to deploy and the feasible layouts it was weighed against (colocated,
    always-split, conditional), each priced; an alternative split runs on the verdict's
    orchestrator, or on none named where the verdict stays colocated."""
    orchestrator: Orchestrator | None = None if v.decision == "colocate" else v.decision
    every: dict[PlanLayout, Plan] = {}
    if v.colocated.feasible:
        every["colocated"] = colocated_plan(v.colocated)
    if v.disaggregated.feasible:
        every["disaggregated"] = split_plan(v.disaggregated, orchestrator)
    k = v.conditional
    if k is not None and k.feasible and k.layout == "conditional":
        every["conditional"] = conditional_plan(k, orchestrator, v.sizing.cluster_gpus, x)
    chosen = chosen_layout(v)
    plan = every.pop(chosen) if chosen is not None else None
    return plan, list(every.values())
