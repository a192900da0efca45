"""Pinned parallelism that cannot run is refused, naming the rule it breaks.

A workload may pin TP degrees under `parallelism:`. The search never proposes a degree these
rules forbid, but a pin bypasses the search, so each pin is checked before anything is priced:

- the cluster: a TP group cannot have more GPUs than the cluster, and a pinned prefill and
  decode replica must fit in it together;
- the scale-up domain: tensor parallelism all-reduces twice per layer, so a TP group stays on
  one node's NVLink (or a larger scale-up domain such as GB200 NVL72); the calculator prices
  its all-reduce on that link and has no model of TP across the network;
- attention heads: TP splits the query heads across ranks, so the degree must divide them
  (vLLM: "Total number of attention heads must be divisible by tensor parallel size");
- the engine's P/D transfer: vLLM's NIXL connector and TensorRT-LLM need decode TP >= prefill
  TP; SGLang transfers KV between equal TP layouts only (the same rules `deploy` applies).
"""

from __future__ import annotations

from disagg_decider.errors import UserError
from disagg_decider.workload import Resolved

ROLES = ("colocated", "prefill", "decode")


def problems(r: Resolved) -> list[str]:
    """Every rule a workload's pins break, one message each (empty when they can all run)."""
    w = r.workload
    c = w.cluster
    pins = {role: getattr(w.parallelism, f"{role}_tp") for role in ROLES}
    domain = max(c.gpus_per_node, r.gpu.scaleup_domain_gpus)
    out = []
    for role, tp in pins.items():
        if not tp:
            continue
        field = f"parallelism.{role}_tp={tp}"
        if tp > c.gpus:
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
    p, d = pins["prefill"], pins["decode"]
    if p and d:
        if p + d > c.gpus:
            out.append(
                f"parallelism.prefill_tp={p} + decode_tp={d}: one replica of each needs "
                f"{p + d} GPUs, more than the cluster's {c.gpus}"
            )
        if w.engine == "sglang" and p != d:
            out.append(
                f"parallelism.prefill_tp={p}, decode_tp={d}: SGLang transfers KV between "
                "equal TP layouts only; pin them equal"
            )
        elif w.engine in ("vllm", "trtllm") and d < p:
            out.append(
                f"parallelism.prefill_tp={p} > decode_tp={d}: {w.engine}'s P/D KV transfer "
                "(NIXL connector) needs decode TP >= prefill TP; pin decode_tp >= prefill_tp"
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
