"""The workload file: what is served, to whom, on what, by which team.

Validated with `extra="forbid"` so a typo is an error with the nearest valid key, never a silent
default. `load_workload` is the only entry point that reads a file; `resolve` turns catalog ids
into the typed records the calculator needs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from disagg_decider import catalog, dtypes
from disagg_decider.dtypes import Dtype
from disagg_decider.errors import UserError, excerpt, nearest
from disagg_decider.yamlio import load_yaml_file, load_yaml_text

# Physical ranges, declared once: every bound below is far outside any real deployment and far
# inside what the arithmetic handles (no overflow to inf, no JSON-incompatible floats).
MAX_TOKENS = 10_000_000  # prompt or output length; the longest contexts today are ~10M
MIN_RATE_PER_S = 1e-6  # one request in ~12 days
MAX_RATE_PER_S = 1e6
MAX_SLO_MS = 86_400_000.0  # a day
MAX_GPUS = 1_000_000
MAX_GPUS_PER_NODE = 1024
MAX_TP = 1024
MAX_GBPS = 1e6
MAX_LATENCY_US = 1e7  # 10 s
MAX_USD_PER_GPU_HOUR = 10_000.0
MAX_CHUNKS = 64
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 100
MAX_DESCRIPTION_CHARS = 4000
MAX_PATH_CHARS = 4096
MAX_OVERRIDES = 100
MAX_CLASSES = 16  # request classes of mixed traffic

# Characters that rewrite a terminal or reorder text: C0/C1 controls (tab and newline allowed
# only where noted), bidi embeddings/overrides/isolates/marks, line and paragraph separators.
_BIDI_AND_SEPARATORS = "\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff"
_UNSAFE = {
    "": re.compile(f"[\x00-\x1f{_BIDI_AND_SEPARATORS}]"),
    "\t\n": re.compile(f"[\x00-\x08\x0b-\x1f{_BIDI_AND_SEPARATORS}]"),
}


def unsafe_char(text: str, allow: str = "") -> str | None:
    """The first control or bidi character in `text` (other than tab and newline when
    `allow` is "\\t\\n"), or None."""
    found = _UNSAFE[allow].search(text)
    return found.group() if found else None


class _Strict(BaseModel):
    """Unknown keys are errors, numbers are finite, and a boolean is never read as a number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name is None:
            return value
        ann = cls.model_fields[info.field_name].annotation
        if not _accepts(ann, (int, float)):
            return value
        if isinstance(value, bool) and not _accepts(ann, (bool,)):
            raise ValueError("expected a number, got a boolean (true/false)")
        # A number is written as one: "8", 0x10, 1_000 or 1:30:00 arrive as strings (yamlio
        # reads YAML 1.2 numbers only), and pydantic would otherwise convert some of them.
        items = value if isinstance(value, list) else [value]
        if not _accepts(ann, (str,)) and any(isinstance(v, str) for v in items):
            kind = (
                "a number (e.g. 8, 0.5 or 1e8)"
                if _accepts(ann, (float,))
                else "an integer (e.g. 8)"
            )
            raise ValueError(
                f"expected {kind} written as one, not text: no quotes, and no 0x, 1_000 or "
                "1:30:00 forms"
            )
        return value


def _accepts(ann: Any, kinds: tuple[type, ...]) -> bool:
    """Whether the annotation (through unions, Annotated, lists) takes one of these types."""
    if ann in kinds:
        return True
    return any(_accepts(a, kinds) for a in getattr(ann, "__args__", ()) or ())


def _plain_string(value: Any, allow: str = "") -> Any:
    if isinstance(value, str) and (ch := unsafe_char(value, allow)) is not None:
        raise ValueError(f"contains the control or bidi character U+{ord(ch):04X}; use plain text")
    return value


class Percentiles(_Strict):
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


class TrafficClass(_Strict):
    """One kind of request in mixed traffic (chat turns, RAG prompts, agent steps)."""

    share: float = Field(gt=0, le=1)
    prompt_tokens: Percentiles
    output_tokens: Percentiles
    prefix_cache_hit_rate: float = Field(default=0.0, ge=0, lt=1)

    _plain_numbers = field_validator(
        "prompt_tokens", "output_tokens", mode="before", json_schema_input_type=Percentiles | float
    )(_as_percentiles)


class Traffic(_Strict):
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


class Slo(_Strict):
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


class CustomNetwork(_Strict):
    rdma: bool
    gbps_per_gpu: float = Field(gt=0, le=MAX_GBPS)
    latency_us: float | None = Field(default=None, ge=0, le=MAX_LATENCY_US)
    efficiency: float | None = Field(default=None, gt=0, le=1)


class Cluster(_Strict):
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


class Ops(_Strict):
    maturity: Literal["low", "medium", "high"] = "medium"
    orchestrator_preference: Literal["any", "kubernetes-native", "managed-stack"] = "any"
    cncf_commitment: bool = False
    wants_sla_planner: bool = False
    wants_scale_to_zero: bool = False


class Cost(_Strict):
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


class LayoutPin(_Strict):
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


class Parallelism(_Strict):
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


class Efficiency(_Strict):
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


class HfConfigRef(_Strict):
    hf_config: Path

    @field_validator("hf_config", mode="before")
    @classmethod
    def _short_path(cls, value: Any) -> Any:
        return _file_path(value)


def _file_path(value: Any) -> Any:
    """A path a workload names: short, one line, no NUL (it is echoed in messages)."""
    if isinstance(value, str):
        if not value or len(value) > MAX_PATH_CHARS or "\0" in value:
            raise ValueError(f"expected a file path of 1 to {MAX_PATH_CHARS} characters")
        _plain_string(value)
    return value


class Workload(_Strict):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    description: str = Field(default="", max_length=MAX_DESCRIPTION_CHARS)
    model: Annotated[str, Field(max_length=MAX_ID_CHARS)] | HfConfigRef
    weights_dtype: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description=(
            "weight format: bf16, fp8, fp8_block, mxfp4, nvfp4 or fp4 (= nvfp4), or "
            "'<experts>-experts/<rest>' for mixed precision (mxfp4-experts/bf16); omitted: "
            "the model's published checkpoint (catalog, or the config's quantization_config)"
        ),
    )
    kv_cache_dtype: Dtype | None = Field(
        default=None,
        description=(
            "KV cache format; omitted: fp8 with low-precision weights the workload names, "
            "else the model's own (bf16 for every published checkpoint in the catalog)"
        ),
    )
    engine: Literal["vllm", "sglang", "trtllm"] = "vllm"
    step_source: Literal["default", "silicon"] = Field(
        default="default",
        exclude_if=lambda value: value == "default",  # dumps of existing workloads unchanged
        description=(
            "where step times come from: default (the roofline) or silicon (aiconfigurator-"
            "core's measured kernels: pip install 'disagg-decider[silicon]'; falls back to the "
            "default with a warning where its database lacks the model, GPU, engine or dtype)"
        ),
    )
    traffic: Traffic
    slo: Slo
    cluster: Cluster
    ops: Ops = Ops()
    cost: Cost = Cost()
    parallelism: Parallelism = Parallelism()
    efficiency: Efficiency = Efficiency()
    calibration: Path | None = Field(
        default=None,
        description="calibration file from `decide calibrate` (relative to this file)",
    )
    overrides: dict[
        Annotated[str, Field(max_length=MAX_ID_CHARS)],
        float | int | bool | Annotated[str, Field(max_length=MAX_ID_CHARS)],
    ] = Field(
        default_factory=dict,
        max_length=MAX_OVERRIDES,
        description="rulebook parameter overrides, by name",
    )

    @field_validator("calibration", mode="before")
    @classmethod
    def _calibration_path(cls, value: Any) -> Any:
        return _file_path(value)

    @field_validator("weights_dtype")
    @classmethod
    def _known_precision(cls, value: str | None) -> str | None:
        if value is not None and not dtypes.is_valid(value):
            raise ValueError(
                f"unknown weight format; valid: {', '.join(dtypes.DTYPES)}, or "
                "'<experts>-experts/<rest>' such as mxfp4-experts/bf16"
            )
        return value

    @field_validator("model", "engine", mode="before")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        return _plain_string(value)

    # Tabs and newlines are whitespace every renderer folds; escapes and bidi controls are not.
    @field_validator("name", "description", mode="before")
    @classmethod
    def _readable(cls, value: Any) -> Any:
        return _plain_string(value, allow="\t\n")

    @property
    def kv_dtype(self) -> str:
        """The KV format priced: the workload's, else fp8 beside low-precision weights it
        names, else bf16. `resolve` fills both in from the model where the workload omits the
        weights (`with_native_dtypes`), so resolved workloads read the model's own."""
        if self.kv_cache_dtype is not None:
            return self.kv_cache_dtype
        weights = self.weights_dtype or "bf16"
        return "fp8" if dtypes.parts(weights)[0] in dtypes.LOW_PRECISION else "bf16"

    @property
    def priced_weights_dtype(self) -> str:
        """The weight format priced (bf16 where a workload not yet resolved omits it)."""
        return self.weights_dtype or "bf16"


@dataclass(frozen=True)
class Resolved:
    """A workload with its catalog ids looked up: what the calculator takes."""

    workload: Workload
    model: catalog.ModelSpec
    gpu: catalog.Gpu
    link: catalog.Link
    link_gbps: float  # per GPU, one way
    # Where the priced formats come from: "workload", or the model's own ("model: <source>")
    # where the workload omits the weights' format (`with_native_dtypes`).
    dtypes_from: str = "workload"
    # The fitted step physics' table entry its unset efficiency constants came from
    # (`catalog/step_fit.py`); "" where it sets them all or no entry serves.
    efficiency_from: str = ""


def resolve(workload: Workload, base_dir: Path | None = None) -> Resolved:
    model = _resolve_model(workload.model, base_dir)
    native = workload.weights_dtype is None
    workload = with_native_dtypes(workload, model)
    dtypes_from = f"model: {model.dtype_source}" if native else "workload"
    gpu = catalog.get_gpu(workload.cluster.gpu)
    workload, efficiency_from = with_fitted_efficiency(workload, model, gpu)
    link, gbps = _resolve_link(workload.cluster.network, gpu)
    if workload.efficiency.link_efficiency is not None:
        link = link.model_copy(update={"efficiency": workload.efficiency.link_efficiency})
    return Resolved(
        workload=workload,
        model=model,
        gpu=gpu,
        link=link,
        link_gbps=gbps,
        dtypes_from=dtypes_from,
        efficiency_from=efficiency_from,
    )


def with_native_dtypes(workload: Workload, model: catalog.ModelSpec) -> Workload:
    """The workload with the model's published formats where it omits the weights' format.

    A catalog model carries the formats its checkpoint ships in (gpt-oss-120b: MXFP4 experts
    and BF16 attention; DeepSeek-V3/R1: block-scaled FP8), a local config.json its
    `quantization_config`. Naming weights but no KV format keeps the workload's rule (fp8 KV
    beside low-precision weights, `Workload.kv_dtype`).
    """
    if workload.weights_dtype is not None:
        return workload
    kv_dtype = workload.kv_cache_dtype or model.kv_cache_dtype
    native = workload.model_copy(
        update={"weights_dtype": model.weights_dtype, "kv_cache_dtype": kv_dtype}
    )
    # Filled in, not given: `assumptions.assumed` lists them as defaults the verdict used.
    native.__pydantic_fields_set__ = set(workload.model_fields_set)
    return native


def with_fitted_efficiency(
    workload: Workload, model: catalog.ModelSpec, gpu: catalog.Gpu
) -> tuple[Workload, str]:
    """The workload with the fitted step physics (`catalog/step_fit.py`) for every efficiency
    constant it does not set (its own, or a calibration's, are kept), and where they came from.
    A constant set to its class default counts as not set (see below).

    The filled-in constants are not marked as given, so `assumptions.assumed` lists them as
    defaults the verdict used, with the table entry they came from.
    """
    from disagg_decider.catalog import step_fit

    fit = step_fit.fitted(gpu.id, workload.engine, model.moe is not None, workload.weights_dtype)
    if fit is None:
        return workload, ""
    eff = workload.efficiency
    # Given: set, to a value other than the class default. A workload dumped and validated
    # again (`model_dump` -> `model_validate`: sweeps, rate variants) marks every field set;
    # its defaults must still take the table, or the copy is priced on other physics.
    defaults = type(eff).model_fields
    given = {f for f in eff.model_fields_set if getattr(eff, f) != defaults[f].default}
    update = {k: v for k, v in fit.constants.items() if k not in given}
    if not update:
        return workload, ""
    filled = eff.model_copy(update=update)
    filled.__pydantic_fields_set__ = given
    out = workload.model_copy(update={"efficiency": filled})
    out.__pydantic_fields_set__ = set(workload.model_fields_set)
    return out, fit.source()


def _resolve_model(ref: str | HfConfigRef, base_dir: Path | None) -> catalog.ModelSpec:
    if isinstance(ref, str):
        return catalog.get_model(ref)
    from disagg_decider.catalog.hf_config import model_from_hf_config

    path = ref.hf_config
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return model_from_hf_config(path)


def _resolve_link(ref: str | CustomNetwork, gpu: catalog.Gpu) -> tuple[catalog.Link, float]:
    if isinstance(ref, CustomNetwork):
        link = catalog.Link(
            id="custom",
            name=f"custom {'RDMA' if ref.rdma else 'TCP'} {ref.gbps_per_gpu:g} Gb/s per GPU",
            kind="scale-out",
            gbps=ref.gbps_per_gpu,
            rdma=ref.rdma,
            latency_us=ref.latency_us if ref.latency_us is not None else (8 if ref.rdma else 80),
            efficiency=ref.efficiency or (0.85 if ref.rdma else 0.4),
            sources=["workload file"],
        )
        return link, ref.gbps_per_gpu
    link = catalog.get_link(ref)
    gbps = catalog.link_gbps_per_gpu(link, gpu)
    if gbps <= 0:
        raise UserError(f"cluster.network: {gpu.id} has no NVLink-class scale-up link")
    return link, gbps


# --- reading files -------------------------------------------------------------------------


def parse_workload(data: Any, source: str) -> Workload:
    if not isinstance(data, dict):
        raise UserError(f"{source}: a workload is a YAML mapping with keys such as name, model")
    try:
        workload = Workload.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(exc, source, Workload)) from None
    _check_catalog_ids(workload, source)
    return workload


def _check_catalog_ids(workload: Workload, source: str) -> None:
    """Unknown catalog ids are named with the file and field here, not deep in the calculator."""
    ids = [("cluster.gpu", catalog.get_gpu, workload.cluster.gpu)]
    for pool in ("prefill_gpu", "decode_gpu"):
        if getattr(workload.cluster, pool) is not None:
            ids.append((f"cluster.{pool}", catalog.get_gpu, getattr(workload.cluster, pool)))
    if isinstance(workload.model, str):
        ids.append(("model", catalog.get_model, workload.model))
    if isinstance(workload.cluster.network, str):
        ids.append(("cluster.network", catalog.get_link, workload.cluster.network))
    for field, lookup, value in ids:
        try:
            lookup(value)
        except UserError as exc:
            raise UserError(f"{source}: {field}: {exc}") from None


def load_workload(path: Path) -> Workload:
    return parse_workload(load_yaml_file(path), str(path))


def load_workload_text(text: str, source: str = "<workload>") -> Workload:
    return parse_workload(load_yaml_text(text, source), source)


def format_validation_error(exc: ValidationError, source: str, root: type[BaseModel]) -> str:
    """One line per problem: the dotted field path, what is wrong, what would be valid.

    Keys and values are quoted through `excerpt` (80 characters and the length), pydantic's
    "Value error, " prefix is dropped, and at most `MAX_ERRORS` problems are listed.
    """
    lines = [f"{source}: invalid workload" if root is Workload else f"{source}: invalid"]
    errors = exc.errors(include_url=False, include_context=False, include_input=True)
    for err in errors[:MAX_ERRORS]:
        loc = [p for p in err["loc"] if not str(p).startswith(("function-", "constrained"))]
        path = ".".join(_loc_part(p) for p in loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            valid = _fields_at(root, err["loc"][:-1])
            hint = nearest(str(err["loc"][-1]), valid) if valid else ""
            lines.append(f"  {path}: unknown key; {hint}")
        elif err["type"] == "missing":
            lines.append(f"  {path}: required field is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            lines.append(f"  {path}: {msg} (got {excerpt(err.get('input'))})")
    if len(errors) > MAX_ERRORS:
        lines.append(f"  ... and {len(errors) - MAX_ERRORS} more")
    return "\n".join(lines)


MAX_ERRORS = 20


def _loc_part(part: Any) -> str:
    text = str(part)
    return text if len(text) <= 80 and text.isprintable() else excerpt(text)


def _fields_at(root: type[BaseModel], loc: tuple) -> list[str]:
    model: Any = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(str(part)) if hasattr(model, "model_fields") else None
        if field is None:
            return []
        ann = field.annotation
        model = _first_model(ann)
    return list(model.model_fields) if model is not None and hasattr(model, "model_fields") else []


def _first_model(ann: Any) -> Any:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def lognormal_sigma(p: Percentiles) -> float:
    """Log-normal shape from p50 and p99 (z99 = 2.326)."""
    return math.log(p.p99 / p.p50) / 2.3263478740408408
