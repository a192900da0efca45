"""Hardware and model catalogs, shipped as YAML package data.

Every figure carries a source URL in the YAML. The calculator only sees these typed records, so
a model read from a local Hugging Face `config.json` and one from the catalog look the same.
Units are in the field names: `_tflops` (1e12 FLOP/s, dense), `_gb` (1e9 bytes),
`_tb_per_s` / `_gb_per_s` (bytes per second), `_gbps` (1e9 bits per second), `_us`, `_b` (1e9).
"""

from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from disagg_decider.errors import UserError, excerpt, nearest
from disagg_decider.yamlio import load_yaml_text


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gpu(_Record):
    id: str
    name: str
    bf16_dense_tflops: float = Field(gt=0)
    fp8_dense_tflops: float | None = Field(default=None, gt=0)
    fp4_dense_tflops: float | None = Field(default=None, gt=0)
    hbm_gb: float = Field(gt=0, description="usable HBM per GPU, 1e9 bytes")
    hbm_tb_per_s: float = Field(gt=0)
    scaleup_gb_per_s: float = Field(ge=0, description="NVLink-class bandwidth per GPU, one way")
    scaleup_domain_gpus: int = Field(ge=1, description="GPUs reachable over scale-up links")
    scaleout_gbps: float = Field(gt=0, description="typical scale-out NIC rate per GPU")
    tdp_w: float | None = None
    sources: list[str] = Field(min_length=1)
    notes: str = ""


class Moe(_Record):
    experts: int = Field(ge=2)
    experts_active: int = Field(ge=1)
    shared_experts: int = Field(default=0, ge=0)
    expert_ffn_dim: int = Field(gt=0)
    dense_layers: int = Field(default=0, ge=0, description="leading layers with a dense FFN")


class Mla(_Record):
    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)
    q_lora_rank: int | None = None


class ModelSpec(_Record):
    id: str
    name: str
    hf_repo: str = ""
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    ffn_dim: int = Field(gt=0, description="dense FFN width (SwiGLU intermediate)")
    vocab: int = Field(gt=0)
    moe: Moe | None = None
    mla: Mla | None = None
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int = Field(default=0, ge=0)
    params_total_b: float = Field(gt=0)
    params_active_b: float = Field(gt=0)
    max_context_tokens: int = Field(gt=0)
    weights_dtype: str = Field(
        default="bf16",
        description="the published checkpoint's weight format (a `dtypes` precision string)",
    )
    kv_cache_dtype: str = Field(default="bf16", description="the KV format engines default to")
    dtype_source: str = Field(
        default="BF16 checkpoint", description="where the formats above are published"
    )
    sources: list[str] = Field(min_length=1)
    notes: str = ""

    @field_validator("weights_dtype", "kv_cache_dtype")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from disagg_decider import dtypes

        if not dtypes.is_valid(value):
            raise ValueError(f"unknown format {value!r}; valid: {', '.join(dtypes.DTYPES)}")
        return value


class Link(_Record):
    id: str
    name: str
    kind: Literal["scale-up", "scale-out"]
    gbps: float | None = Field(
        default=None, gt=0, description="per GPU, one way; None for scale-up (taken from the GPU)"
    )
    rdma: bool
    latency_us: float = Field(ge=0)
    efficiency: float = Field(gt=0, le=1, description="achieved share of line rate for KV moves")
    sources: list[str] = Field(min_length=1)
    notes: str = ""


def link_gbps_per_gpu(link: Link, gpu: Gpu | None) -> float:
    """Gb/s one GPU gets on a catalog link, one way.

    A scale-up link (NVLink) has no figure of its own: it runs at the GPU's scale-up bandwidth,
    0 when the GPU is not known or has none (callers refuse that). A network link carries its
    catalog figure.
    """
    if link.kind == "scale-up":
        return gpu.scaleup_gb_per_s * 8.0 if gpu is not None else 0.0
    assert link.gbps is not None
    return link.gbps


def _load(kind: str, record: type[_Record]) -> dict[str, _Record]:
    from disagg_decider.shipped_data import load_shipped

    def parse(path: Path) -> Any:
        return load_yaml_text(path.read_text("utf-8"), f"catalog/{kind}.yaml")

    raw = load_shipped(Path(__file__).resolve().parent / f"{kind}.yaml", parse)
    out: dict[str, _Record] = {}
    for entry in raw[kind]:
        fields = dict(entry)
        aliases = fields.pop("aliases", [])
        try:
            item = record.model_validate(fields)
        except ValidationError as exc:  # a broken catalog is a bug in this package
            raise RuntimeError(f"catalog/{kind}.yaml entry {fields.get('id')}: {exc}") from exc
        for key in (item.id, *aliases):
            out[key] = item
    return out


@cache
def gpus() -> dict[str, Gpu]:
    return _load("gpus", Gpu)  # type: ignore[return-value]


@cache
def models() -> dict[str, ModelSpec]:
    return _load("models", ModelSpec)  # type: ignore[return-value]


@cache
def links() -> dict[str, Link]:
    return _load("links", Link)  # type: ignore[return-value]


def _get(table: dict, kind: str, key: str, listing: str):
    try:
        return table[key]
    except KeyError:
        hint = nearest(key, list(table))
        shown = excerpt(key)
        raise UserError(f"unknown {kind} {shown}: {hint} (all: decide catalog {listing})") from None


def get_gpu(gpu_id: str) -> Gpu:
    return _get(gpus(), "gpu", gpu_id, "gpus")


def get_model(model_id: str) -> ModelSpec:
    return _get(models(), "model", model_id, "models")


def get_link(link_id: str) -> Link:
    return _get(links(), "network link", link_id, "links")
