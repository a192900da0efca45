"""The sections of a workload file (traffic, SLOs, cluster, ops, cost, parallelism,
efficiency), on the ranges and the strict model of `workload_fields.py`.

Each section is a strict pydantic model (`extra="forbid"`: a typo is an error naming the nearest
valid key); `workload.Workload` puts them together and is the file's one entry point. Kept apart
so the file's top level, its reading and its resolution against the catalogs (`workload.py`)
read on one screen, and so the sections import nothing but the catalogs' formats.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from disagg_decider.workload_fields import (
    MAX_CHUNKS,
    MAX_CLASSES,
    MAX_GBPS,
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_ID_CHARS,
    MAX_LATENCY_US,
    MAX_RATE_PER_S,
    MAX_SLO_MS,
    MAX_TOKENS,
    MAX_TP,
    MAX_USD_PER_GPU_HOUR,
    MIN_RATE_PER_S,
    StrictModel,
    file_path,
)


class Percentiles(StrictModel):
    """A length distribution given by two percentiles; fitted to a log-normal by the calculator."""

    p50: float = Field(gt=0, le=MAX_TOKENS)
    p99: float = Field(gt=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _ordered(self) -> Percentiles:
        if self.p99 < self.p50:
            raise ValueError(f"p99 ({self.p99:g}) must be >= p50 ({self.p50:g})")
        return self


def _as_percentiles(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return {"p50": value, "p99": value}
    return value


class TrafficClass(StrictModel):
    """One kind of request in mixed traffic (chat turns, RAG prompts, agent steps)."""

    share: float = Field(gt=0, le=1)
    prompt_tokens: Percentiles
    output_tokens: Percentiles
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0, lt=1)

    _plain_numbers = field_validator(
        "prompt_tokens", "output_tokens", mode="before", json_schema_input_type=Percentiles | float
    )(_as_percentiles)


class Traffic(StrictModel):
    """One class (prompt_tokens, output_tokens, prefix_cache_hit_rate) or several (`classes`).

    With `classes`, the single-class fields are derived: the mix as the log-normal with its mean
    and second moment and the token-weighted hit rate (`disagg_decider.classes`), which the
    colocated and always-disaggregated modes take; the conditional layout splits each class.
    """

    prompt_tokens: Percentiles | None = None
    output_tokens: Percentiles | None = None
    requests_per_second: float = Field(ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S)
    prefix_cache_hit_rate: float | None = Field(default=None, ge=0, lt=1)
    classes: list[TrafficClass] | None = Field(default=None, min_length=1, max_length=MAX_CLASSES)

    _plain_numbers = field_validator(
        "prompt_tokens", "output_tokens", mode="before", json_schema_input_type=Percentiles | float
    )(_as_percentiles)

    @model_validator(mode="after")
    def _one_form(self) -> Traffic:
        if self.classes is None:
            missing = [n for n in ("prompt_tokens", "output_tokens") if getattr(self, n) is None]
            if missing:
                raise ValueError(
                    f"needs {' and '.join(missing)} (or `classes`, a list of request classes)"
                )
            if self.prefix_cache_hit_rate is None:
                self.prefix_cache_hit_rate = 0.0
                # A default, not the user's: `assumptions.assumed` lists it as filled in.
                self.__pydantic_fields_set__.discard("prefix_cache_hit_rate")
            return self
        given = [
            n
            for n in ("prompt_tokens", "output_tokens", "prefix_cache_hit_rate")
            if getattr(self, n) is not None
        ]
        if given:
            raise ValueError(
                f"give either `classes` or {', '.join(given)}, not both: with classes each class "
                "has its own lengths and hit rate"
            )
        total = sum(c.share for c in self.classes)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"classes: shares must sum to 1, got {total:g}")
        from disagg_decider.classes import components, mixture_percentiles

        prompt, output, hit = mixture_percentiles(components(self))
        self.prompt_tokens = Percentiles(p50=prompt[0], p99=min(prompt[1], MAX_TOKENS))
        self.output_tokens = Percentiles(p50=output[0], p99=min(output[1], MAX_TOKENS))
        self.prefix_cache_hit_rate = min(hit, 0.999999)
        return self


class Slo(StrictModel):
    """p99 targets, as MLPerf's server scenarios state them."""

    ttft_ms: float = Field(gt=0, le=MAX_SLO_MS)
    tpot_ms: float = Field(gt=0, le=MAX_SLO_MS)
    basis: Literal["p99-under-load", "static"] = Field(
        default="p99-under-load",
        description=(
            "p99-under-load: p99 TTFT/TPOT at the workload's Poisson rate (queueing included); "
            "static: TTFT of a batch with no queue and mean TPOT, the batch maximising "
            "throughput per GPU, as AIConfigurator and Dynamo's planner size (calc/static.py)"
        ),
    )


class CustomNetwork(StrictModel):
    rdma: bool
    gbps_per_gpu: float = Field(gt=0, le=MAX_GBPS)
    latency_us: float | None = Field(default=None, ge=0, le=MAX_LATENCY_US)
    efficiency: float | None = Field(default=None, gt=0, le=1)


class Cluster(StrictModel):
    """The GPUs this service may use. `prefill_gpu`/`decode_gpu` (with their counts) make the
    inventory heterogeneous: `prefill_gpus` of one type and `decode_gpus` of another (each
    defaults to `gpu`), `gpus` their sum, on separate nodes joined by `network`."""

    gpu: str = Field(max_length=MAX_ID_CHARS)
    gpus: int = Field(gt=0, le=MAX_GPUS)
    gpus_per_node: int = Field(default=8, gt=0, le=MAX_GPUS_PER_NODE)
    network: Annotated[str, Field(max_length=MAX_ID_CHARS)] | CustomNetwork = "ib-ndr-400"
    kubernetes: bool = True
    prefill_gpu: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    prefill_gpus: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    decode_gpu: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    decode_gpus: int | None = Field(default=None, gt=0, le=MAX_GPUS)

    @property
    def heterogeneous(self) -> bool:
        return self.prefill_gpu is not None or self.decode_gpu is not None

    @model_validator(mode="after")
    def _pools_add_up(self) -> Cluster:
        counts = (self.prefill_gpus, self.decode_gpus)
        if not self.heterogeneous:
            if any(c is not None for c in counts):
                raise ValueError(
                    "prefill_gpus/decode_gpus size heterogeneous pools: give prefill_gpu and/or "
                    "decode_gpu too"
                )
            return self
        if any(c is None for c in counts):
            raise ValueError("a heterogeneous cluster gives both prefill_gpus and decode_gpus")
        if self.prefill_gpus + self.decode_gpus != self.gpus:  # type: ignore[operator]
            raise ValueError(
                f"gpus ({self.gpus}) must equal prefill_gpus + decode_gpus "
                f"({self.prefill_gpus} + {self.decode_gpus})"
            )
        return self


class Ops(StrictModel):
    maturity: Literal["low", "medium", "high"] = "medium"
    orchestrator_preference: Literal["any", "kubernetes-native", "managed-stack"] = "any"
    cncf_commitment: bool = False
    wants_sla_planner: bool = False
    wants_scale_to_zero: bool = False


class Cost(StrictModel):
    usd_per_gpu_hour: float = Field(default=4.0, gt=0, le=MAX_USD_PER_GPU_HOUR)
    prefill_usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        le=MAX_USD_PER_GPU_HOUR,
        description="heterogeneous clusters: the prefill pool's GPUs",
    )
    decode_usd_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        le=MAX_USD_PER_GPU_HOUR,
        description="heterogeneous clusters: the decode pool's GPUs",
    )


class LayoutPin(StrictModel):
    """One role's layout: `dp` attention ranks of `tp` GPUs, experts over `ep` GPUs.

    `{tp: 8}` is plain TP8; `{dp: 16, ep: 16}` is DP-attention with EP16 (SGLang
    --enable-dp-attention, vLLM --enable-expert-parallel); `{tp: 8, dp: 2, ep: 16}` a hybrid.
    """

    tp: int = Field(default=1, gt=0, le=MAX_TP)
    dp: int = Field(default=1, gt=0, le=MAX_TP)
    ep: int = Field(default=1, gt=0, le=MAX_TP)

    @model_validator(mode="after")
    def _experts_over_all(self) -> LayoutPin:
        gpus = self.tp * self.dp
        if self.ep not in (1, gpus):
            raise ValueError(
                f"ep must be 1 (experts sharded by TP) or tp x dp = {gpus} (experts spread "
                f"over every GPU of the replica), got {self.ep}"
            )
        return self


class Parallelism(StrictModel):
    colocated_tp: int | None = Field(default=None, gt=0, le=MAX_TP)
    prefill_tp: int | None = Field(default=None, gt=0, le=MAX_TP)
    decode_tp: int | None = Field(default=None, gt=0, le=MAX_TP)
    colocated: LayoutPin | None = None
    prefill: LayoutPin | None = None
    decode: LayoutPin | None = None
    expert_parallel: bool = Field(
        default=True,
        description="false: search tensor-parallel layouts only (an engine without DeepEP/EP)",
    )

    @model_validator(mode="after")
    def _one_pin_per_role(self) -> Parallelism:
        for role in ("colocated", "prefill", "decode"):
            if getattr(self, f"{role}_tp") is not None and getattr(self, role) is not None:
                raise ValueError(f"give {role}_tp or {role}: {{tp, dp, ep}}, not both")
        return self

    @property
    def pins_any(self) -> bool:
        """Whether any role is pinned (most workloads pin none: the search's fast path)."""
        return any(
            v is not None
            for v in (
                self.colocated_tp,
                self.prefill_tp,
                self.decode_tp,
                self.colocated,
                self.prefill,
                self.decode,
            )
        )


class Efficiency(StrictModel):
    """Efficiency constants; defaults come from published measurements (physics.md 2.10)."""

    prefill_mfu: float = Field(
        default=0.45, gt=0, le=1, description="Splitwise Llama2-70B H100: 46% TP2, 36% TP4"
    )
    decode_mbu: float = Field(
        default=0.7, gt=0, le=1, description="Databricks 55-60% at batch 1; AIC 0.8; FlashMLA 90%"
    )
    decode_mfu: float = Field(default=0.45, gt=0, le=1)
    saturation_tokens: float = Field(
        default=128,
        ge=0,
        le=MAX_TOKENS,
        description=(
            "tokens per pass at which GEMMs reach half their MFU; DistServe: one 512-token "
            "prompt saturates an A100 (13B), Splitwise: prompt throughput peaks near 2048"
        ),
    )
    hbm_utilization: float = Field(default=0.9, gt=0, le=1, description="vLLM gpu_memory_util")
    activation_reserve_gb: float = Field(
        default=4.0, ge=0, le=10_000, description="per GPU, not for KV"
    )
    step_overhead_ms: float = Field(
        default=1.5, ge=0, le=60_000, description="launch + sampling per step"
    )
    allreduce_latency_us: float = Field(
        default=8.0, ge=0, le=MAX_LATENCY_US, description="per TP all-reduce"
    )
    prefill_overhead_ms: float = Field(default=3.0, ge=0, le=60_000)
    # The fitted step physics (`calc/step_fit.json`, `catalog/step_fit.py`): the class defaults
    # below keep the plain roofline; a resolved workload gets the fitted values for its GPU x
    # engine x family x format unless it sets them.
    attention_mfu: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "attention priced on its own: max(KV read at kv_mbu, attention FLOPs at this MFU) "
            "added to the pass; null: attention inside the linear roofline"
        ),
    )
    kv_mbu: float | None = Field(
        default=None, gt=0, le=1, description="HBM share of the KV read; null: decode_mbu"
    )
    expert_saturation_tokens: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TOKENS,
        description=(
            "tokens per routed expert at which its GEMMs reach half their MFU; null: "
            "saturation_tokens scaled by the routing (the roofline's expert-GEMM term)"
        ),
    )
    mfu_tp_slope: float = Field(
        default=0.0, ge=0, le=10, description="MFU divided by 1 + slope x log2(TP)"
    )
    expert_parallel_slope: float = Field(
        default=0.0, ge=0, le=10, description="routed-expert GEMM time x (1 + slope x (EP - 1))"
    )
    allreduce_time_scale: float = Field(
        default=1.0, ge=0, le=100, description="TP all-reduce bandwidth time x this"
    )
    alltoall_time_scale: float = Field(
        default=1.0, ge=0, le=100, description="MoE dispatch/combine time x this"
    )
    link_efficiency: float | None = Field(default=None, gt=0, le=1, description="None: link's")
    kv_transfer: Literal["auto", "serialized", "layerwise"] = Field(
        default="auto", description="auto: layer-wise for TensorRT-LLM, serialized otherwise"
    )
    max_decode_batch: int = Field(
        default=512,
        gt=0,
        le=1_000_000,
        description="sequences per attention-DP rank (max_num_seqs; a DPn replica holds n x)",
    )
    chunk_tokens: list[int] = Field(
        default=[256, 512, 1024, 2048, 4096, 8192],
        min_length=1,
        max_length=MAX_CHUNKS,
        description="colocated token budgets per iteration tried (max_num_batched_tokens)",
    )

    @field_validator("chunk_tokens")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(c <= 0 or c > MAX_TOKENS for c in v):
            raise ValueError(f"chunk sizes must be between 1 and {MAX_TOKENS:,} tokens")
        return sorted(set(v))


class HfConfigRef(StrictModel):
    hf_config: Path

    @field_validator("hf_config", mode="before")
    @classmethod
    def _short_path(cls, value: Any) -> Any:
        return file_path(value)


def lognormal_sigma(p: Percentiles) -> float:
    """Log-normal shape from p50 and p99 (z99 = 2.326)."""
    return math.log(p.p99 / p.p50) / 2.3263478740408408
