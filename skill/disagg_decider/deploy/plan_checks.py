"""The constraints a deploy plan must pass: what makes a layout unrunnable (refusals: pods past a
node, GPUs the cluster lacks, KV transfers an engine cannot make between the pools' layouts) or
risky (warnings), each with its reason and source, so the CLI and the output README can say why.

`plan.py` builds the `DeployPlan` these read.
"""

from __future__ import annotations

from disagg_decider import catalog
from disagg_decider.deploy.placement import multi_node_errors, pool_gpu_errors
from disagg_decider.deploy.plan import DeployPlan
from disagg_decider.errors import UserError

# Where each refusal comes from, quoted in the message so a user can check it.
NIXL_TP_SOURCE = (
    "vLLM NixlConnector supports decode TP >= prefill TP only (llm-d "
    "docs/operations/disaggregation/vllm.md; ai-dynamo/dynamo#2295)"
)
SGLANG_TP_SOURCE = "SGLang P/D transfers KV between equal TP layouts on both sides"


def check(plan: DeployPlan) -> tuple[list[str], list[str]]:
    """(errors, warnings): errors make the layout unrunnable and refuse the whole output."""
    errors: list[str] = []
    warnings: list[str] = []
    mode = "disaggregated" if plan.disaggregated else "colocated"
    feasible = getattr(plan.verdict, mode).feasible
    if not feasible:
        # What limits the layout (memory, context, a target out of reach), in the verdict's words.
        limits = [x.detail for x in plan.verdict.limits if x.mode in (mode, "both")]
        errors.append(f"no {mode} layout meets the targets: " + "; ".join(limits))
    elif not getattr(plan.verdict, mode).fits_cluster:
        short = [x.detail for x in plan.verdict.limits if x.mode == mode and x.kind == "rate"]
        warnings.append("the cluster is short of GPUs for the rate: " + "; ".join(short))
    for pool in plan.pools:
        if feasible and pool.max_num_seqs is not None and pool.max_num_seqs < 1:
            errors.append(
                f"{pool.role} pool: the calculator found no batch size that meets the TPOT target "
                f"at TP {pool.tp} (max batch {pool.max_num_seqs}); pin another TP or relax the SLO"
            )
        errors += multi_node_errors(pool, plan.gpus_per_node, plan.target, plan.engine)
    if plan.workload is not None:
        errors += pool_gpu_errors(plan.pools, plan.workload)
    if plan.total_gpus > plan.cluster_gpus:
        layout = " + ".join(f"{p.replicas} {p.role} x {p.layout}" for p in plan.pools)
        errors.append(
            f"the pools need {plan.total_gpus} GPUs ({layout}) but cluster.gpus is "
            f"{plan.cluster_gpus}"
        )
    if plan.disaggregated:
        p, d = plan.pool("prefill"), plan.pool("decode")
        if plan.engine == "vllm" and d.attention_tp < p.attention_tp:
            errors.append(
                f"vLLM with NIXL needs decode TP >= prefill TP, got prefill TP {p.tp} > decode "
                f"TP {d.tp}: {NIXL_TP_SOURCE}. Pin parallelism.decode_tp >= prefill_tp"
            )
        if plan.engine == "sglang" and d.attention_tp != p.attention_tp:
            errors.append(
                f"SGLang needs equal TP on both sides, got prefill TP {p.tp} and decode TP "
                f"{d.tp}: {SGLANG_TP_SOURCE}. Pin parallelism.prefill_tp = decode_tp"
            )
        if plan.engine == "vllm" and d.attention_tp != p.attention_tp and _is_mla(plan):
            warnings.append(
                f"{plan.verdict.model} uses MLA: vLLM's NIXL heterogeneous TP is only partly "
                "supported for MLA (no head split); prefer equal TP"
            )
        m = plan.verdict.metrics
        if m.kv_transfer_path == "network" and not m.kv_transfer_rdma:
            warnings.append(
                "the KV transfer crosses a network without RDMA: NIXL falls back to TCP, which "
                "Dynamo measured about 40x slower (TTFT 355 ms -> 10+ s)"
            )
        if not plan.verdict.disaggregated.feasible:
            warnings.append("the calculator found no disaggregated sizing that meets both SLOs")
    elif not plan.verdict.colocated.feasible:
        warnings.append("the calculator found no colocated sizing that meets both SLOs")
    return errors, warnings


def _is_mla(plan: DeployPlan) -> bool:
    try:
        return catalog.get_model(plan.verdict.model).mla is not None
    except UserError:
        return False
