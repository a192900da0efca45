"""Moving a request's KV cache from the prefill pool to the decode pool (physics.md 2.5).

`serialized` is what vLLM's and SGLang's NIXL paths do (decode pulls the KV once prefill ends);
`layerwise` streams each layer while the next is computed, as TensorRT-LLM and Mooncake do,
leaving roughly one layer's transfer exposed. A link's line rate per GPU is the catalog's
(`catalog.link_gbps_per_gpu`), which `workload.resolve` reads too.
"""

from __future__ import annotations

import numpy as np


def effective_gb_per_s(link_gbps: float, efficiency: float, parallel_links: int) -> float:
    """Usable bytes per second when `parallel_links` GPU NICs each carry one KV shard."""
    return link_gbps / 8.0 * efficiency * parallel_links


def transfer_ms(kv_bytes, gb_per_s: float, latency_ms: float = 0.0):
    """Serialized transfer: fixed latency plus bytes over effective bandwidth."""
    return latency_ms + np.asarray(kv_bytes, dtype=float) / (gb_per_s * 1e9) * 1e3


def layerwise_exposed_ms(kv_bytes, gb_per_s: float, latency_ms: float, prefill_ms, layers: int):
    """Exposed time when layer i's KV moves while layer i+1 computes.

    If the link keeps up with prefill only the last layer's share shows; otherwise the part of
    the transfer that outlasts prefill shows too.
    """
    wire = transfer_ms(kv_bytes, gb_per_s)
    return latency_ms + np.maximum(wire - prefill_ms, wire / layers)


def is_layerwise(engine_name: str, setting: str) -> bool:
    """Whether the KV streams layer by layer: `auto` means yes on TensorRT-LLM only."""
    if setting == "auto":
        return engine_name == "trtllm"
    return setting == "layerwise"
