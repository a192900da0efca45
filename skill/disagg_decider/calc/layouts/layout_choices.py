"""The engine a layout runs and the layouts each role may take: TP degrees, MoE layouts the
cluster allows, pins, and the layouts whose weights leave room for KV.

The search (`calc/layouts/search.py`) evaluates these; workloads with one `group_key` share an
engine and so one search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple

import numpy as np

from disagg_decider.calc.layouts import budget
from disagg_decider.calc.layouts.pins import cuts_scale_block, pinned_layout
from disagg_decider.calc.physics import parallel
from disagg_decider.calc.physics.parallel import Layout
from disagg_decider.calc.physics.step import Engine
from disagg_decider.workload import Resolved, Workload

TP_CANDIDATES = parallel.TP_DEGREES
ROLES = ("colocated", "prefill", "decode")


def domain_gpus(r: Resolved) -> int:
    """GPUs on one scale-up domain: a node, or a whole NVL72 rack."""
    return max(r.workload.cluster.gpus_per_node, r.gpu.scaleup_domain_gpus)


def rdma_gb_per_s(r: Resolved) -> float:
    """Bytes per second one GPU's NIC gives the MoE all-to-all between domains."""
    if r.link.kind == "scale-out":
        return r.link_gbps / 8.0 * r.link.efficiency
    return r.gpu.scaleout_gbps / 8.0 * r.link.efficiency


def step_source(r: Resolved):
    """The workload's measured step source (`step_source: silicon`, calc/physics/silicon.py), or
    None for the roofline, also where the database lacks the model, GPU, engine or dtype (the
    verdict says so: `silicon_steps.verdict_notes`)."""
    if r.workload.step_source != "silicon":
        return None
    from disagg_decider.calc.physics.silicon_steps import steps_of

    return steps_of(r)


def engine_for(r: Resolved, tp, dp=1, ep=1) -> Engine:
    w = r.workload
    return Engine(
        r.model,
        r.gpu,
        w.weights_dtype,
        w.kv_dtype,
        tp,
        w.efficiency,
        dp=dp,
        ep=ep,
        domain_gpus=domain_gpus(r),
        rdma_gb_per_s=rdma_gb_per_s(r),
        steps=step_source(r),
    )


def group_key(r: Resolved) -> tuple:
    """Workloads with equal keys run on the same `Engine`, so one search can serve them all."""
    w = r.workload
    key = (
        id(r.model),
        id(r.gpu),
        w.weights_dtype,
        w.kv_dtype,
        w.engine,
        w.efficiency.model_dump_json(),
        w.step_source,
    )
    floor = budget.min_replica_gpus(w.cluster.gpus)
    if floor > 1:  # a coarsened search (`calc/layouts/budget.py`) never shares a block
        key = (*key, ("min_replica_gpus", floor))
    if r.model.moe is None:
        return key
    # The MoE all-to-all depends on the network and the scale-up domain.
    return (*key, domain_gpus(r), rdma_gb_per_s(r), r.link.rdma or r.link.kind == "scale-up")


def pinned_layouts(w: Workload) -> dict[str, Layout | None]:
    """The layout the workload pins per role (`parallelism:`), None where it lets us choose."""
    p = w.parallelism
    if not p.pins_any:
        return dict.fromkeys(ROLES)
    return {role: pinned_layout(p, role) for role in ROLES}


def pinned_tps(w: Workload) -> dict[str, int | None]:
    """Replica GPUs pinned per role (for ordering a batch's blocks)."""
    return {role: (lay.gpus if lay else None) for role, lay in pinned_layouts(w).items()}


def candidate_layouts(members: Sequence[Resolved]) -> list[Layout]:
    """Layouts a search evaluates: TP degrees, MoE layouts the clusters allow, and any pins."""
    out = set(parallel.tp_layouts(max(TP_CANDIDATES)))
    first = members[0]
    if first.model.moe is not None:
        widest = max(r.workload.cluster.gpus for r in members)
        out |= set(parallel.moe_layouts(first.model.moe.experts, widest, domain_gpus(first)))
    for r in members:
        out |= {lay for lay in pinned_layouts(r.workload).values() if lay}
    return sorted(out)


def free_layouts(members: Sequence[Resolved], lay: dict[str, np.ndarray]) -> np.ndarray:
    """Layouts each member's roles may take unpinned on its cluster: (W, T).

    Plain TP stays within a node (the usual degrees); EP layouts span whole scale-up domains
    and, beyond one, need an RDMA network (DeepEP runs over RDMA). Members share the model and
    the scale-up domain (`group_key`).
    """
    clusters = [r.workload.cluster for r in members]
    node = np.array([min(c.gpus, c.gpus_per_node) for c in clusters])[:, None]
    tp_only = (lay["dp"] == 1) & (lay["ep"] == 1)
    plain = (tp_only & np.isin(lay["tp"], TP_CANDIDATES))[None, :] & (lay["gpus"] <= node)
    first = members[0]
    if first.model.moe is None:
        return plain
    plain = plain & ~split_fp8_blocks(members, lay)
    domain = domain_gpus(first)
    budget = np.array([c.gpus for c in clusters])[:, None]
    wanted = np.array([r.workload.parallelism.expert_parallel for r in members])[:, None]
    networked = np.array([r.link.rdma or r.link.kind == "scale-up" for r in members])[:, None]
    within = (lay["gpus"] <= domain)[None, :]
    whole = ((lay["gpus"] % domain) == 0)[None, :] & networked
    wide = (~tp_only & (lay["ep"] <= first.model.moe.experts))[None, :] & (lay["gpus"] <= budget)
    return plain | (wide & (within | whole) & wanted)


def split_fp8_blocks(members: Sequence[Resolved], lay: dict[str, np.ndarray]) -> np.ndarray:
    """(W, T): plain-TP layouts that would cut block-scaled FP8 experts inside a scale block.

    TP shards each expert's FFN width across ranks; with 128 x 128 scale blocks every rank
    must hold whole blocks, or the engine refuses to load the checkpoint (vLLM: "not divisible
    by weight quantization block_n"): Qwen3-235B-A22B-FP8's 1,536-wide experts at TP8 are 192
    wide per rank. Expert-parallel layouts keep experts whole and are not affected."""
    cut = cuts_scale_block(members[0].model.moe.expert_ffn_dim, lay["tp"], lay["ep"])
    block = np.array([r.workload.weights_dtype == "fp8_block" for r in members])[:, None]
    return block & cut[None, :]


def tp_masks(
    members: Sequence[Resolved], lay: dict[str, np.ndarray], fits: np.ndarray
) -> tuple[dict[str, np.ndarray], list[list[str]]]:
    """Which layouts each member's roles may use: role -> (W, T), plus warnings per member.

    A role uses its pinned layout, or every usual one its cluster allows. Layouts whose weights
    leave no room for KV are dropped; when none is left the largest is kept, so the mode
    reports itself infeasible rather than vanishing.
    """
    pinned = [pinned_layouts(r.workload) for r in members]
    # Large clusters: only layouts whose pools stay within one decision's cost budget.
    free, warnings = budget.restrict(members, lay["gpus"], free_layouts(members, lay), pinned)
    keys = list(zip(lay["gpus"], lay["tp"], lay["dp"], lay["ep"], strict=True))
    masks = {}
    for role in ROLES:
        pins = [p[role] for p in pinned]
        at = np.array([keys.index(astuple(pin)) if pin else -1 for pin in pins])
        options = np.where((at >= 0)[:, None], np.arange(len(keys))[None, :] == at[:, None], free)
        usable = options & fits
        for k in np.flatnonzero(~usable.any(axis=1)):
            pin = pins[k]
            if pin:
                r = members[k]
                name = f"{role}_tp={pin.tp}" if pin.tp_only else role
                warnings[k].append(
                    f"parallelism.{name} ({pin.label}): {r.model.id} in "
                    f"{r.workload.weights_dtype} leaves no room for KV on {pin.gpus} x {r.gpu.id}"
                )
            choices = np.flatnonzero(options[k])
            usable[k] = np.arange(len(keys)) == (choices[-1] if len(choices) else 0)
        masks[role] = usable
    return masks, warnings
