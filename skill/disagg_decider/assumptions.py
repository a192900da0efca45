"""What a verdict assumed because the workload did not say: the defaults it filled in.

A workload with no `cluster.network`, `kubernetes` or `ops` block is priced on 400G InfiniBand
RDMA, Kubernetes and a team of medium maturity; each of those can move the decision (a TCP
fabric vetoes a split, a low-maturity team cannot run two pools). A reader of the verdict must
see them, not find them in a table of inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from disagg_decider.verdict import Assumption
from disagg_decider.workload import Workload


@dataclass(frozen=True)
class Default:
    path: str  # dotted field path in the workload
    why: str  # what it changes, for the reader


# The defaults that move a verdict, in the order a reader checks them.
DEFAULTS = (
    Default("cluster.network", "the KV transfer's link and whether it has RDMA (rules DSG004/5)"),
    Default("cluster.kubernetes", "which orchestrators can run the plan"),
    Default("cluster.gpus_per_node", "which layouts fit one node's NVLink domain"),
    Default("ops.maturity", "whether the team can run two pools (rule DSG003)"),
    Default("engine", "the engine the deploy files and step overheads are for"),
    Default(
        "weights_dtype", "the weights' bytes, hence memory and decode step time (the model's own)"
    ),
    Default("kv_cache_dtype", "the KV cache's bytes per token (default: the weights' dtype)"),
    Default("traffic.prefix_cache_hit_rate", "the share of prompt tokens prefilled"),
    Default("slo.basis", "how targets are checked: p99 under Poisson load"),
    Default("cost.usd_per_gpu_hour", "the cost rows"),
    Default("efficiency.prefill_mfu", "prefill time (measure it: decide calibrate)"),
    Default("efficiency.decode_mbu", "decode step time (measure it: decide calibrate)"),
    Default("efficiency.max_decode_batch", "the decode batch cap per replica"),
)


# Each default's path as field names, split once (every verdict checks every default).
_PARTS = {d.path: tuple(d.path.split(".")) for d in DEFAULTS}

# The efficiency defaults a resolved workload takes from the fitted step physics.
FITTED_STEP = ("efficiency.prefill_mfu", "efficiency.decode_mbu")


def assumed(workload: Workload, efficiency_from: str = "") -> list[Assumption]:
    """The `DEFAULTS` this workload left out, with the values the verdict used.

    `efficiency_from` names the fitted table entry the step constants came from
    (`Resolved.efficiency_from`); the efficiency entries say so.
    """
    out = []
    for d in DEFAULTS:
        if d.path == "traffic.prefix_cache_hit_rate" and workload.traffic.classes:
            continue  # derived from the classes, each of which has its own
        given, value = _given(workload, _PARTS[d.path])
        if d.path == "kv_cache_dtype":
            value = workload.kv_dtype
        elif d.path == "weights_dtype":
            value = workload.priced_weights_dtype
        if not given:
            why = d.why
            if efficiency_from and d.path in FITTED_STEP:
                why = f"{why}; fitted to measured silicon: {efficiency_from}"
            out.append(Assumption(field=d.path, value=_plain(value), affects=why))
    return out


def _given(model: BaseModel, parts: tuple[str, ...]) -> tuple[bool, Any]:
    """Whether the workload file set this field (and every block on its path), and its value.
    (`__pydantic_fields_set__` is what the `model_fields_set` property returns, read without
    a call.)"""
    node: Any = model
    given = True
    for part in parts:
        given = given and part in node.__pydantic_fields_set__
        node = getattr(node, part)
    return given, node


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value
