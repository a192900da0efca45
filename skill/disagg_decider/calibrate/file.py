"""The calibration file: fitted constants, where they came from, and how well they fit.

Written by `decide calibrate`, read by `decide --calibration F`, a workload's
`calibration: F` and `decide catalog calibration F`. YAML, safe-loaded, validated with
`extra="forbid"`. One file may hold several entries (e.g. one per TP degree); each says what it
applies to (model, GPU, engine, TP, weights dtype).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from disagg_decider import catalog
from disagg_decider.errors import UserError
from disagg_decider.workload import MAX_TOKENS, MAX_TP
from disagg_decider.yamlio import load_yaml_file

KIND = "disagg-decider-calibration"
UNBOUNDED = "unbounded"  # an uncertainty the runs cannot bound (see Entry.uncertainty)


class _Strict(BaseModel):
    """Unknown keys refused, and no NaN or infinity in any figure (they would reach JSON output
    as non-standard `NaN`/`Infinity`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Constants(_Strict):
    prefill_mfu: float = Field(gt=0, le=1)
    decode_mbu: float = Field(gt=0, le=1)
    step_overhead_ms: float = Field(ge=0)


class DataFile(_Strict):
    file: str
    sha256: str
    format: Literal["vllm", "sglang", "aiperf", "microbench"]
    runs: int = Field(ge=0)


class Point(_Strict):
    """One measured metric of one run, with the calibrated prediction."""

    file: str
    run: str
    load: str
    prompt_tokens: float
    output_tokens: float
    metric: Literal["ttft_ms", "tpot_ms", "output_tokens_per_s"]
    statistic: str
    measured: float
    predicted: float | None
    error: float | None  # predicted / measured - 1
    predicted_by: Literal["simulator", "mean-field"] = "mean-field"  # replayed or closed form


class Entry(_Strict):
    model: str
    gpu: str
    engine: Literal["vllm", "sglang", "trtllm"]
    tp: int = Field(gt=0, le=MAX_TP)
    weights_dtype: Literal["bf16", "fp8", "fp4"] = "bf16"
    chunk_tokens: int = Field(gt=0, le=MAX_TOKENS)
    max_batch: int = Field(gt=0, le=1_000_000)
    efficiency: Constants
    fitted: list[str]
    held: dict[str, str] = {}
    # One standard error, relative to the fitted value; "unbounded" where the runs cannot pin
    # the constant (fewer independent measured values than constants, or a flat direction).
    uncertainty: dict[str, float | Literal["unbounded"]] = {}
    residuals: dict[str, float | None]  # median / worst absolute relative error per metric
    warnings: list[str] = []
    data: list[DataFile]
    points: list[Point]

    def label(self) -> str:
        return f"{self.model} on {self.tp} x {self.gpu} ({self.engine}, {self.weights_dtype})"

    def error_text(self) -> str:
        median = self.residuals.get("all_median_abs_error")
        worst = self.residuals.get("all_worst_abs_error")
        if median is None or worst is None:
            return "no residuals"
        return f"median {median:.1%}, worst {worst:.1%} over {len(self.points)} measurements"

    def residual_text(self) -> str:
        """The residual, qualified where a constant is unbounded (then a small residual only
        says the fit passes through the points)."""
        free = [k for k, u in self.uncertainty.items() if u == UNBOUNDED]
        text = f"residual error {self.error_text()}"
        if free:
            text += f" (not a measure of {', '.join(free)}: unbounded by these runs)"
        return text


class Calibration(_Strict):
    kind: Literal["disagg-decider-calibration"] = KIND
    version: Literal[1] = 1
    entries: list[Entry] = Field(min_length=1)


def load_calibration(path: Path) -> Calibration:
    data = load_yaml_file(path)
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UserError(
            f"{path}: not a calibration file (expected 'kind: {KIND}', as `decide calibrate` "
            "writes)"
        )
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as exc:
        from disagg_decider.workload import format_validation_error

        raise UserError(format_validation_error(exc, str(path), Calibration)) from None
    for i, entry in enumerate(cal.entries):
        for field, lookup in (("model", catalog.get_model), ("gpu", catalog.get_gpu)):
            try:
                lookup(getattr(entry, field))
            except UserError as exc:
                raise UserError(f"{path}: entries.{i}.{field}: {exc}") from None
    return cal


def dump_calibration(cal: Calibration) -> str:
    import yaml

    header = (
        "# Written by `decide calibrate`: efficiency constants fitted to measured benchmark runs.\n"
        "# Use with `decide --calibration FILE` or `calibration: FILE` in a workload.\n"
    )
    body = yaml.safe_dump(cal.model_dump(mode="json"), sort_keys=False, width=100)
    return header + body
