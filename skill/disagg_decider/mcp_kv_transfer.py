"""The MCP tool `estimate_kv_transfer`: the KV bytes one request moves from a prefill pool to
a decode pool, and the transfer time on a link, with the verdict's own physics.

Kept apart from the tools that run a whole decision (`mcp_tools`): this one prices one transfer
from the catalogs and the physics layer alone, and runs in the server's own process.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from disagg_decider import catalog
from disagg_decider.calc.physics import kv, transfer
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas import prefill
from disagg_decider.catalog import step_fit
from disagg_decider.errors import UserError
from disagg_decider.mcp_tools import ToolOutput
from disagg_decider.workload import MAX_GBPS, MAX_LATENCY_US, MAX_TOKENS, MAX_TP, Dtype, Efficiency


def _finite(description: str, **bounds: float) -> Any:
    """A number field that refuses NaN and infinities, within `bounds` (gt/ge/le)."""
    return Field(allow_inf_nan=False, description=description, **bounds)


class KvTransferEstimate(ToolOutput):
    model: str
    prompt_tokens: int = Field(description="uncached prompt tokens whose KV is moved")
    cached_prompt_tokens: int
    kv_dtype: Dtype
    kv_bytes: float = Field(description="KV bytes moved from the prefill to the decode pool")
    kv_bytes_per_token: float
    link: str = Field(description="the link, as understood")
    link_gbps_per_gpu: float = Field(description="line rate per GPU, one way, Gb/s")
    link_efficiency: float = Field(description="achieved share of the line rate")
    parallel_links: int = Field(description="GPU NICs carrying KV shards at once: min(TPs)")
    effective_gb_per_s: float = Field(description="usable bandwidth for this transfer, GB/s")
    latency_ms: float = Field(description="fixed per-transfer latency included below")
    serialized_ms: float = Field(
        description="transfer after prefill ends (vLLM and SGLang NIXL connectors)"
    )
    prefill_ms: float | None = Field(description="prefill compute time; null without a gpu")
    layerwise_exposed_ms: float | None = Field(
        description=(
            "transfer time left visible when each layer's KV streams while the next layer "
            "computes (TensorRT-LLM, Mooncake); null without a gpu"
        )
    )
    notes: list[str]


def estimate_kv_transfer(
    model: Annotated[
        str, Field(max_length=100, description="Model catalog id, e.g. llama-3.3-70b.")
    ],
    prompt_tokens: Annotated[
        int,
        Field(gt=0, le=MAX_TOKENS, description="Uncached prompt tokens whose KV cache is moved."),
    ],
    kv_dtype: Annotated[Dtype, Field(description="KV cache dtype: bf16, fp8 or fp4.")] = "bf16",
    link: Annotated[
        str | None,
        Field(
            max_length=100,
            description=(
                "Link catalog id (e.g. ib-ndr-400, roce-100, tcp-25, nvlink). Give exactly one "
                "of link, link_gbps, link_gb_per_s. Catalog links carry their measured "
                "efficiency and latency; nvlink takes its bandwidth from `gpu`."
            ),
        ),
    ] = None,
    link_gbps: Annotated[
        float | None,
        _finite("Or: bandwidth per GPU in gigaBITS per second (400 for NDR).", gt=0, le=MAX_GBPS),
    ] = None,
    link_gb_per_s: Annotated[
        float | None,
        _finite(
            "Or: bandwidth per GPU in gigaBYTES per second (50 for NDR).", gt=0, le=MAX_GBPS / 8
        ),
    ] = None,
    link_efficiency: Annotated[
        float | None,
        Field(
            gt=0,
            le=1,
            description=(
                "Achieved share of the bandwidth. Default: the catalog link's figure; 1.0 for a "
                "bandwidth given as a number (treated as already measured)."
            ),
        ),
    ] = None,
    latency_us: Annotated[
        float | None,
        _finite(
            "Fixed per-transfer latency; default: catalog link's, else 0.", ge=0, le=MAX_LATENCY_US
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        Field(
            max_length=100,
            description=(
                "GPU catalog id (e.g. h200). Needed for the prefill time and so for the "
                "layer-wise figure; without it only the serialized time is reported."
            ),
        ),
    ] = None,
    prefill_tp: Annotated[
        int, Field(gt=0, le=MAX_TP, description="Prefill tensor-parallel degree.")
    ] = 1,
    decode_tp: Annotated[
        int | None, Field(gt=0, le=MAX_TP, description="Decode TP degree; default: prefill_tp.")
    ] = None,
    weights_dtype: Annotated[
        Dtype, Field(description="Weight dtype, for the prefill time only.")
    ] = "bf16",
    engine: Annotated[
        Literal["vllm", "sglang", "trtllm"],
        Field(description="Serving engine, for the prefill time only (its fitted step physics)."),
    ] = "vllm",
    cached_prompt_tokens: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_TOKENS,
            description="Prompt tokens already in the prefix cache (not moved).",
        ),
    ] = 0,
) -> KvTransferEstimate:
    """Estimate the KV-cache bytes one request moves from a prefill GPU pool to a decode pool,
    and how long the transfer takes over a given link.

    Call it to answer "what does moving the KV cost on our network?" or to compare links (TCP
    vs RDMA vs NVLink) for one model and prompt length. Pass the model, the uncached prompt
    tokens, the KV dtype and the link as a catalog id or a bandwidth (link_gbps in Gb/s or
    link_gb_per_s in GB/s). TP degrees matter: each prefill rank sends its KV shard over its own
    NIC, so min(prefill_tp, decode_tp) links run in parallel.

    Returns the bytes, the serialized transfer time (what vLLM and SGLang pay after prefill) and,
    when `gpu` is given, the prefill time and the layer-wise overlapped time (what TensorRT-LLM
    pays). For the whole decision use decide_disaggregation.
    """
    spec = catalog.get_model(model)
    gpu_spec = catalog.get_gpu(gpu) if gpu is not None else None
    label, gbps, efficiency, latency_ms = _link_figures(
        link, link_gbps, link_gb_per_s, link_efficiency, latency_us, gpu_spec
    )
    d_tp = decode_tp or prefill_tp
    parallel = min(prefill_tp, d_tp)
    bandwidth = transfer.effective_gb_per_s(gbps, efficiency, parallel)
    size = float(kv.kv_bytes(spec, kv_dtype, prompt_tokens))
    notes = []
    prefill_ms = layerwise_ms = None
    if gpu_spec is None:
        notes.append("no gpu given: only the serialized time is reported")
    else:
        # The verdict's own physics: the constants fitted to measured silicon for this GPU,
        # engine and weight format (calc/step_fit.json), the roofline's where none fits.
        fit = step_fit.fitted(gpu_spec.id, engine, spec.moe is not None, weights_dtype)
        eff = Efficiency() if fit is None else Efficiency().model_copy(update=fit.constants)
        engine_ = Engine(spec, gpu_spec, weights_dtype, kv_dtype, prefill_tp, eff)
        if not bool(engine_.fits()):
            notes.append(
                f"{spec.id} in {weights_dtype} leaves no room for KV on {prefill_tp} x "
                f"{gpu_spec.id}: raise prefill_tp; the prefill time assumes it fits"
            )
        prefill_ms = float(prefill.prefill_ms(engine_, prompt_tokens, cached_prompt_tokens))
        layerwise_ms = float(
            transfer.layerwise_exposed_ms(size, bandwidth, latency_ms, prefill_ms, spec.layers)
        )
    if prompt_tokens + cached_prompt_tokens > spec.max_context_tokens:
        notes.append(f"the prompt exceeds {spec.id}'s context of {spec.max_context_tokens} tokens")
    return KvTransferEstimate(
        model=spec.id,
        prompt_tokens=prompt_tokens,
        cached_prompt_tokens=cached_prompt_tokens,
        kv_dtype=kv_dtype,
        kv_bytes=size,
        kv_bytes_per_token=size / prompt_tokens,
        link=label,
        link_gbps_per_gpu=gbps,
        link_efficiency=efficiency,
        parallel_links=parallel,
        effective_gb_per_s=float(bandwidth),
        latency_ms=latency_ms,
        serialized_ms=float(transfer.transfer_ms(size, bandwidth, latency_ms)),
        prefill_ms=prefill_ms,
        layerwise_exposed_ms=layerwise_ms,
        notes=notes,
    )


def _link_figures(
    link_id: str | None,
    gbps: float | None,
    gb_per_s: float | None,
    efficiency: float | None,
    latency_us: float | None,
    gpu: catalog.Gpu | None,
) -> tuple[str, float, float, float]:
    """(label, Gb/s per GPU, efficiency, latency ms) from exactly one way of naming the link."""
    named = (("link", link_id), ("link_gbps", gbps), ("link_gb_per_s", gb_per_s))
    given = [name for name, value in named if value is not None]
    if len(given) != 1:
        raise UserError(
            "pass exactly one of link (catalog id, e.g. ib-ndr-400), link_gbps (Gb/s per GPU) or "
            f"link_gb_per_s (GB/s per GPU); got {', '.join(given) or 'none'}"
        )
    if link_id is None:
        rate = gbps if gbps is not None else gb_per_s * 8.0  # type: ignore[operator]
        eff = efficiency if efficiency is not None else 1.0
        lat = latency_us if latency_us is not None else 0.0
        return f"{rate:g} Gb/s per GPU ({rate / 8:g} GB/s)", rate, eff, lat / 1e3
    spec = catalog.get_link(link_id)
    rate = catalog.link_gbps_per_gpu(spec, gpu)
    if rate <= 0:
        if gpu is None:
            raise UserError(
                f"link {spec.id}: its bandwidth comes from the GPU; pass gpu, e.g. h200"
            )
        raise UserError(f"link {spec.id}: {gpu.id} has no NVLink-class scale-up link")
    eff = efficiency if efficiency is not None else spec.efficiency
    lat = latency_us if latency_us is not None else spec.latency_us
    return spec.name, rate, eff, lat / 1e3
