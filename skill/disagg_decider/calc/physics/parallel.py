"""How a replica spreads a model over its GPUs: tensor, data-parallel attention and expert
parallelism, as the engines run them.

A layout is (tp, dp, ep): `dp` attention ranks of `tp` GPUs each (tp x dp GPUs per replica),
and, for MoE models, the routed experts spread over `ep` GPUs (ep = tp x dp, all of them).
`ep` 1 means tensor parallelism only: the experts are sharded `tp` ways like everything else.

- TPn: `vllm --tensor-parallel-size n`, `sglang --tp n`: today's default, every rank holds a
  share of each weight and (MLA) a full copy of every sequence's latent KV.
- DPn/EPn: SGLang `--tp n --dp n --enable-dp-attention --ep-size n`, vLLM
  `--data-parallel-size n --enable-expert-parallel`, TensorRT-LLM `enable_attention_dp` with
  `moe_expert_parallel_size n`: each GPU runs attention for its own sequences (no KV copies),
  experts spread over all n.
- TPt x DPd/EPn (t x d = n): attention TP inside a node, data parallel across, experts over all.
- TPn/EPn: attention TP n and experts spread n ways (vLLM TP with `--enable-expert-parallel`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

TP_DEGREES = (1, 2, 4, 8)
EP_SIZES = (2, 4, 8, 16, 32, 64, 72, 128, 144, 256)


@dataclass(frozen=True, order=True)
class Layout:
    gpus: int  # first, so layouts sort by replica size
    tp: int
    dp: int = 1
    ep: int = 1

    @staticmethod
    def of(tp: int, dp: int = 1, ep: int = 1) -> Layout:
        return Layout(tp * dp, tp, dp, ep)

    @property
    def tp_only(self) -> bool:
        return self.dp == 1 and self.ep == 1

    @property
    def label(self) -> str:
        """`TP8`, `DP16/EP16`, `TP8xDP2/EP16` or `TP8/EP8`."""
        return label(self.tp, self.dp, self.ep)


def label(tp: int, dp: int = 1, ep: int = 1) -> str:
    if dp == 1 and ep == 1:
        return f"TP{tp}"
    attention = f"DP{dp}" if tp == 1 else (f"TP{tp}" if dp == 1 else f"TP{tp}xDP{dp}")
    return f"{attention}/EP{ep}" if ep > 1 else attention


def moe_layouts(experts: int, max_gpus: int, node_gpus: int) -> list[Layout]:
    """DP-attention + EP layouts and TP x EP hybrids a MoE model may run on up to `max_gpus`.

    EP never exceeds the expert count; a replica larger than a node (scale-up domain) fills
    whole nodes, since EP traffic between partial nodes would still cross the network.
    """
    out: set[Layout] = set()
    for n in EP_SIZES:
        if n > max_gpus or n > experts:
            continue
        if n > node_gpus and n % node_gpus:
            continue
        out.add(Layout.of(1, n, n))
        if n <= node_gpus and n in TP_DEGREES:
            out.add(Layout.of(n, 1, n))
        inner = min(node_gpus, 8)
        if n > inner and n % inner == 0:
            out.add(Layout.of(inner, n // inner, n))
    return sorted(out)


def tp_layouts(max_tp: int) -> list[Layout]:
    return [Layout.of(t) for t in TP_DEGREES if t <= max_tp]


def as_arrays(layouts: Iterable[Layout]) -> dict[str, np.ndarray]:
    """Columns gpus, tp, dp, ep (one entry per layout), as the search's candidate axis."""
    layouts = list(layouts)
    return {
        name: np.array([getattr(lay, name) for lay in layouts], dtype=int)
        for name in ("gpus", "tp", "dp", "ep")
    }
