"""The path a request's KV takes from prefill to decode, and how long it takes on it.

Shared by the search (`search`), the pools (`pools`) and the simulator, so both price the same
link, NIC count and transfer style.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from disagg_decider.calc.physics import kv, transfer
from disagg_decider.catalog import get_link, link_gbps_per_gpu
from disagg_decider.workload import Resolved


@dataclass(frozen=True)
class TransferPath:
    """The link a request's KV takes; numeric fields may be arrays, one entry per row."""

    kind: str  # "scale-up" (NVLink), "pcie" (one box without NVLink) or "network"
    gbps_per_gpu: float | np.ndarray
    efficiency: float | np.ndarray
    latency_ms: float | np.ndarray
    rdma: bool

    @staticmethod
    def stack(paths: Sequence[TransferPath]) -> TransferPath:
        """Many paths as one whose numeric fields are arrays (W,), one entry per path.

        `kind` and `rdma` do not enter the arithmetic; they are left as the first path's.
        """

        first = paths[0]
        return TransferPath(
            first.kind,
            np.array([p.gbps_per_gpu for p in paths], dtype=float),
            np.array([p.efficiency for p in paths], dtype=float),
            np.array([p.latency_ms for p in paths], dtype=float),
            first.rdma,
        )

    def gb_per_s(self, prefill_tp, decode_tp):
        """Each prefill rank ships its shard over its own link, in parallel."""
        senders = np.minimum(prefill_tp, decode_tp)
        bw = transfer.effective_gb_per_s(self.gbps_per_gpu, self.efficiency, senders)
        return float(bw) if type(bw) is not np.ndarray or bw.ndim == 0 else bw

    def take(self, index: np.ndarray, shape: tuple[int, ...]) -> TransferPath:
        """A stacked path's entries at `index`, reshaped to broadcast on a search's axes."""
        return replace(
            self,
            gbps_per_gpu=np.asarray(self.gbps_per_gpu)[index].reshape(shape),
            efficiency=np.asarray(self.efficiency)[index].reshape(shape),
            latency_ms=np.asarray(self.latency_ms)[index].reshape(shape),
        )


# GPU-to-GPU inside one box without NVLink (L40S-class PCIe cards): PCIe Gen4 x16 carries
# 32 GB/s one way (the catalog's L40S note: 64 GB/s bidirectional). Peer-to-peer copies through
# the host's root complex reach about 70% of it; a few microseconds to set one up.
PCIE_GB_PER_S = 32.0
PCIE_EFFICIENCY = 0.7
PCIE_LATENCY_MS = 0.01


def transfer_path(r: Resolved) -> TransferPath:
    """KV stays on NVLink when the whole cluster is one scale-up domain, on PCIe when it is one
    box of GPUs without NVLink (both pools sit in the node, so the KV never meets the cluster
    network), and takes the network otherwise."""
    c = r.workload.cluster
    domain = max(c.gpus_per_node, r.gpu.scaleup_domain_gpus)
    has_nvlink = r.gpu.scaleup_gb_per_s > 0
    if r.link.kind == "scale-up" or (c.gpus <= domain and has_nvlink):
        nvlink = get_link("nvlink")
        gbps = link_gbps_per_gpu(nvlink, r.gpu)
        return TransferPath("scale-up", gbps, nvlink.efficiency, nvlink.latency_us / 1e3, True)
    if c.gpus <= c.gpus_per_node and not c.heterogeneous:
        return TransferPath("pcie", PCIE_GB_PER_S * 8.0, PCIE_EFFICIENCY, PCIE_LATENCY_MS, True)
    link = r.link
    return TransferPath("network", r.link_gbps, link.efficiency, link.latency_us / 1e3, link.rdma)


def transfer_times(r: Resolved, path: TransferPath, uncached, prefill_compute_ms, p_tp, d_tp):
    """Serialized, layer-wise and engine-style (the one that shows in TTFT) transfer times."""
    size = kv.kv_bytes(r.model, r.workload.kv_dtype, uncached)
    bw = path.gb_per_s(p_tp, d_tp)
    serial = transfer.transfer_ms(size, bw, path.latency_ms)
    layered = transfer.layerwise_exposed_ms(
        size, bw, path.latency_ms, prefill_compute_ms, r.model.layers
    )
    layerwise = transfer.is_layerwise(r.workload.engine, r.workload.efficiency.kv_transfer)
    exposed = layered if layerwise else serial
    if type(serial) is not np.ndarray or serial.ndim == 0:
        return float(serial), float(layered), float(exposed)
    return serial, layered, exposed
