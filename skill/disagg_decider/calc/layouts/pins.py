"""Pinned parallelism that cannot run is refused, naming the rule it breaks.

A workload may pin TP degrees or DP/EP layouts under `parallelism:`. The search never proposes
a layout these rules forbid, but a pin bypasses the search, so each pin is checked before
anything is priced:

- the cluster: a TP group cannot have more GPUs than the cluster, and a pinned prefill and
  decode replica must fit in it together;
- the scale-up domain: tensor parallelism all-reduces twice per layer, so a TP group stays on
  one node's NVLink (or a larger scale-up domain such as GB200 NVL72); the calculator prices
  its all-reduce on that link and has no model of TP across the network;
- attention heads: TP splits the query heads across ranks, so the degree must divide them
  (vLLM: "Total number of attention heads must be divisible by tensor parallel size");
- the engine's P/D transfer: vLLM's NIXL connector and TensorRT-LLM need decode TP >= prefill
  TP; SGLang transfers KV between equal TP layouts only (the same rules `deploy` applies); TP
  here is the attention TP of a layout (one DP rank holds a request's KV);
- DP/EP layouts: EP needs a MoE model and at most its expert count; a replica wider than a
  scale-up domain fills whole domains over an RDMA network (as the search allows);
- block-scaled FP8 experts sharded by TP keep whole 128 x 128 scale blocks per rank (the
  search's rule too, `layout_choices.split_fp8_blocks`).
"""

from __future__ import annotations

from disagg_decider.calc.physics.parallel import Layout
from disagg_decider.errors import UserError
from disagg_decider.workload import Parallelism, Resolved

ROLES = ("colocated", "prefill", "decode")
FP8_BLOCK = 128  # weight_block_size [128, 128] of block-scaled FP8 checkpoints


def pinned_layout(p: Parallelism, role: str) -> Layout | None:
    """The layout `parallelism:` pins for a role (`<role>_tp` or `<role>: {tp, dp, ep}`), None
    when the role is left to the search."""
    tp = getattr(p, f"{role}_tp")
    if tp is not None:
        return Layout.of(tp)
    pin = getattr(p, role)
    return None if pin is None else Layout.of(pin.tp, pin.dp, pin.ep)


def problems(r: Resolved) -> list[str]:
    """Every rule a workload's pins break, one message each (empty when they can all run)."""
    w = r.workload
    c = w.cluster
    pins = {role: pinned_layout(w.parallelism, role) for role in ROLES}
    domain = max(c.gpus_per_node, r.gpu.scaleup_domain_gpus)
    out = []
    for role, lay in pins.items():
        if lay is None:
            continue
        tp = lay.tp
        field = _field(w, role, lay)
        if lay.gpus > c.gpus:
            out.append(f"{field}: more GPUs than the cluster's {c.gpus} (cluster.gpus)")
        if tp > domain:
            out.append(
                f"{field}: a TP group must stay inside one scale-up domain, here "
                f"{c.gpus_per_node} GPUs per node (cluster.gpus_per_node; a {r.gpu.id} "
                f"scale-up domain is {r.gpu.scaleup_domain_gpus} GPUs); use TP <= {domain}"
            )
        if r.model.heads % tp:
            out.append(
                f"{field}: {r.model.id} has {r.model.heads} attention heads, which TP {tp} "
                "does not divide (engines split heads evenly across TP ranks)"
            )
        if cuts_fp8_blocks(r, lay):
            out.append(
                f"{field}: TP {tp} cuts {r.model.id}'s block-scaled FP8 experts "
                f"({r.model.moe.expert_ffn_dim} wide, {FP8_BLOCK} x {FP8_BLOCK} scale blocks) "
                "inside a block; engines refuse to load that (vLLM: not divisible by weight "
                "quantization block_n); use a TP that keeps whole blocks per rank, or EP"
            )
        if not lay.tp_only:
            out.extend(_layout_problems(r, field, lay, domain))
    p, d = pins["prefill"], pins["decode"]
    if p and d:
        pf, df = _field(w, "prefill", p), _field(w, "decode", d)
        if p.gpus + d.gpus > c.gpus:
            out.append(
                f"{pf} + {df.removeprefix('parallelism.')}: one replica of each needs "
                f"{p.gpus + d.gpus} GPUs, more than the cluster's {c.gpus}"
            )
        if w.engine == "sglang" and p.tp != d.tp:
            out.append(
                f"{pf}, {df.removeprefix('parallelism.')}: SGLang transfers KV between "
                "equal TP layouts only; pin them equal"
            )
        elif w.engine in ("vllm", "trtllm") and d.tp < p.tp:
            out.append(
                f"{pf} > {df.removeprefix('parallelism.')}: {w.engine}'s P/D KV transfer "
                "(NIXL connector) needs decode TP >= prefill TP; pin decode_tp >= prefill_tp"
            )
    return out


def cuts_fp8_blocks(r: Resolved, lay: Layout) -> bool:
    """Experts in block-scaled FP8 sharded by TP (no EP) with a scale block cut between ranks."""
    moe = r.model.moe
    if moe is None or r.workload.weights_dtype != "fp8_block":
        return False
    return bool(cuts_scale_block(moe.expert_ffn_dim, lay.tp, lay.ep))


def cuts_scale_block(expert_ffn_dim: int, tp, ep):
    """Whether plain TP (EP 1) leaves a rank part of a 128 x 128 scale block of each expert;
    elementwise on arrays of TP and EP (the search's layouts) as on one layout."""
    return (ep == 1) & (expert_ffn_dim % (tp * FP8_BLOCK) != 0)


def _field(w, role: str, lay) -> str:
    """How the pin is written: `parallelism.decode_tp=8` or `parallelism.decode (DP16/EP16)`."""
    if getattr(w.parallelism, f"{role}_tp") is not None:
        return f"parallelism.{role}_tp={lay.tp}"
    return f"parallelism.{role} ({lay.label})"


def _layout_problems(r: Resolved, field: str, lay, domain: int) -> list[str]:
    """DP/EP pins: experts to spread, and a replica beyond one scale-up domain filling whole
    domains over an RDMA network (DeepEP's internode all-to-all), as the search allows."""
    out = []
    moe = r.model.moe
    if lay.ep > 1 and moe is None:
        out.append(f"{field}: {r.model.id} is not a mixture-of-experts model; ep must be 1")
    elif lay.ep > 1 and lay.ep > moe.experts:
        out.append(f"{field}: {r.model.id} has {moe.experts} experts; ep must not exceed them")
    if lay.gpus > domain:
        if lay.gpus % domain:
            out.append(
                f"{field}: a replica of {lay.gpus} GPUs spans scale-up domains of {domain} "
                "GPUs; it must fill whole domains (a multiple of the domain size)"
            )
        if not (r.link.rdma or r.link.kind == "scale-up"):
            out.append(
                f"{field}: a replica of {lay.gpus} GPUs spans several scale-up domains, and "
                f"its all-to-all needs an RDMA network, not {r.link.id}"
            )
    return out


def check(r: Resolved) -> None:
    """Raise a `UserError` (exit 2) listing every broken rule of the workload's pins."""
    found = problems(r)
    if found:
        name = r.workload.name
        raise UserError(
            f"workload {name!r}: pinned parallelism cannot run:\n  " + "\n  ".join(found)
        )
