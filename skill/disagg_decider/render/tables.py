"""The worked transfer table of the skill file: KV size and transfer time per model and link.

Every figure comes from `calc.physics.kv.kv_bytes`, `calc.physics.transfer.effective_gb_per_s` and
`calc.physics.transfer.transfer_ms` with the catalog's link records, so the table the agent reads is
the arithmetic `decide` runs. One GPU NIC carries the KV (prefill TP1 to decode TP1); with TP>1 each
rank ships its own shard in parallel, which divides the times by min(prefill TP, decode TP).
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_decider import catalog
from disagg_decider.calc.physics import kv, transfer

WORKED_PROMPTS: tuple[int, ...] = (1024, 4096, 8192, 32768)
WORKED_KV_DTYPE = "fp8"
# NVLink bandwidth is a GPU property; H100 and H200 share NVLink 4 (450 GB/s per GPU, one way).
WORKED_NVLINK_GPU = "h200"
# (label, catalog link id): the common fabric of each kind.
WORKED_LINKS: tuple[tuple[str, str], ...] = (
    ("NVLink", "nvlink"),
    ("RDMA", "ib-ndr-400"),
    ("TCP", "tcp-100"),
)


@dataclass(frozen=True)
class LinkColumn:
    label: str
    link_id: str
    name: str
    gbps: float  # per GPU, one way
    efficiency: float
    latency_ms: float
    gb_per_s: float  # effective, one NIC
    sources: tuple[str, ...]


@dataclass(frozen=True)
class ModelRow:
    model_id: str
    name: str
    attention: str
    kv_bytes_per_token_bf16: float
    kv_bytes_per_token_fp8: float
    kv_bytes: tuple[float | None, ...]  # per WORKED_PROMPTS, None beyond the context window
    transfer_ms: dict[str, tuple[float | None, ...]]  # link label -> per WORKED_PROMPTS


@dataclass(frozen=True)
class WorkedTable:
    prompts: tuple[int, ...]
    kv_dtype: str
    links: tuple[LinkColumn, ...]
    rows: tuple[ModelRow, ...]


def worked_links() -> tuple[LinkColumn, ...]:
    columns = []
    for label, link_id in WORKED_LINKS:
        link = catalog.get_link(link_id)
        gpu = catalog.get_gpu(WORKED_NVLINK_GPU)
        gbps = catalog.link_gbps_per_gpu(link, gpu)
        name = f"{link.name}, {gpu.name}" if link.kind == "scale-up" else link.name
        columns.append(
            LinkColumn(
                label=label,
                link_id=link.id,
                name=name,
                gbps=gbps,
                efficiency=link.efficiency,
                latency_ms=link.latency_us / 1e3,
                gb_per_s=transfer.effective_gb_per_s(gbps, link.efficiency, 1),
                sources=tuple(link.sources),
            )
        )
    return tuple(columns)


def unique_models() -> list[catalog.ModelSpec]:
    """Catalog models in file order, once each (the catalog maps aliases to the same record)."""
    seen: dict[str, catalog.ModelSpec] = {}
    for model in catalog.models().values():
        seen.setdefault(model.id, model)
    return list(seen.values())


def attention_kind(model: catalog.ModelSpec) -> str:
    if model.mla is not None:
        return "MLA"
    if model.kv_heads == model.heads:
        return f"MHA, {model.kv_heads} KV heads"  # one KV head per query head (OPT)
    if model.sliding_window_layers:
        return f"GQA + {model.sliding_window_layers} sliding-window layers"
    return f"GQA, {model.kv_heads} KV heads"


def model_row(model: catalog.ModelSpec, links: tuple[LinkColumn, ...]) -> ModelRow:
    sizes: list[float | None] = [
        float(kv.kv_bytes(model, WORKED_KV_DTYPE, p)) if p <= model.max_context_tokens else None
        for p in WORKED_PROMPTS
    ]
    times = {
        link.label: tuple(
            None
            if size is None
            else float(transfer.transfer_ms(size, link.gb_per_s, link.latency_ms))
            for size in sizes
        )
        for link in links
    }
    return ModelRow(
        model_id=model.id,
        name=model.name,
        attention=attention_kind(model),
        kv_bytes_per_token_bf16=kv.kv_bytes_per_token(model, "bf16"),
        kv_bytes_per_token_fp8=kv.kv_bytes_per_token(model, "fp8"),
        kv_bytes=tuple(sizes),
        transfer_ms=times,
    )


def worked_table() -> WorkedTable:
    links = worked_links()
    return WorkedTable(
        prompts=WORKED_PROMPTS,
        kv_dtype=WORKED_KV_DTYPE,
        links=links,
        rows=tuple(model_row(m, links) for m in unique_models()),
    )
