"""The workload file: what is served, to whom, on what, by which team.

Validated with `extra="forbid"` so a typo is an error with the nearest valid key, never a silent
default. `load_workload` is the only entry point that reads a file; `resolve` turns catalog ids
into the typed records the calculator needs. The sections the file is made of are
`workload_sections.py`; the ranges every field is held to, `workload_fields.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    field_validator,
)

from disagg_decider import catalog, dtypes
from disagg_decider.dtypes import Dtype
from disagg_decider.errors import UserError, excerpt, nearest
from disagg_decider.workload_fields import (
    MAX_DESCRIPTION_CHARS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_OVERRIDES,
    StrictModel,
    file_path,
    plain_string,
)

# Re-exported: the names the rest of the package (and its users) have always read from here.
from disagg_decider.workload_fields import MAX_GBPS as MAX_GBPS
from disagg_decider.workload_fields import MAX_GPUS as MAX_GPUS
from disagg_decider.workload_fields import MAX_LATENCY_US as MAX_LATENCY_US
from disagg_decider.workload_fields import MAX_RATE_PER_S as MAX_RATE_PER_S
from disagg_decider.workload_fields import MAX_TOKENS as MAX_TOKENS
from disagg_decider.workload_fields import MAX_TP as MAX_TP
from disagg_decider.workload_fields import MIN_RATE_PER_S as MIN_RATE_PER_S
from disagg_decider.workload_fields import unsafe_char as unsafe_char
from disagg_decider.workload_sections import (
    Cluster,
    Cost,
    CustomNetwork,
    Efficiency,
    HfConfigRef,
    Ops,
    Parallelism,
    Slo,
    Traffic,
)
from disagg_decider.workload_sections import lognormal_sigma as lognormal_sigma
from disagg_decider.yamlio import load_yaml_file, load_yaml_text


class Workload(StrictModel):
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
            "where step times come from: default (the pass model fitted to measured silicon, "
            "calc/step_fit.json; the plain roofline where no entry fits) or silicon "
            "(aiconfigurator-core's measured kernels: pip install 'disagg-decider[silicon]'; "
            "falls back to the "
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
        return file_path(value)

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
        return plain_string(value)

    # Tabs and newlines are whitespace every renderer folds; escapes and bidi controls are not.
    @field_validator("name", "description", mode="before")
    @classmethod
    def _readable(cls, value: Any) -> Any:
        return plain_string(value, allow="\t\n")

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


def with_rate(workload: Workload, requests_per_second: float) -> Workload:
    """The workload at another request rate, everything else kept: a sweep's points, and a
    simulation at a mode's max rate (`sim.run.at_max_rate`)."""
    traffic = workload.traffic.model_copy(update={"requests_per_second": requests_per_second})
    return workload.model_copy(update={"traffic": traffic})


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
