"""Calibrations applied to workloads: matching entries override the default constants.

An entry matches a workload on model, GPU, engine and weights dtype (catalog ids resolved, so
aliases match). TP: the entry for a degree the workload pins is preferred; with one entry, its
constants serve every TP degree the search tries, and the note says so. Constants the workload
sets itself in `efficiency:` are kept over the calibration. No match is reported, never silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from disagg_decider import catalog
from disagg_decider.workload import Workload

if TYPE_CHECKING:  # the file's models load only when a calibration file is read
    from disagg_decider.calibrate.file import Calibration, Entry

FIELDS = ("prefill_mfu", "decode_mbu", "step_overhead_ms")


@dataclass(frozen=True)
class Applied:
    workload: Workload
    notes: list[str]  # what was calibrated and with what residual error
    warnings: list[str]


def calibration_path(workload: Workload, base_dir: Path | None, cli: Path | None) -> Path | None:
    """`--calibration` wins over the workload's `calibration:` (relative to the workload file)."""
    if cli is not None:
        return cli
    ref = workload.calibration
    if ref is None:
        return None
    return ref if ref.is_absolute() or base_dir is None else base_dir / ref


@lru_cache(maxsize=32)
def _loaded(real: str, mtime_ns: int, given: str) -> Calibration:
    """One parse per file and version: a batch applies one file to many workloads. Read and
    named by the path as given (a message must not reveal where a symlink points)."""
    from disagg_decider.calibrate.file import load_calibration

    return load_calibration(Path(given))


def _load(path: Path) -> Calibration:
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        from disagg_decider.calibrate.file import load_calibration

        return load_calibration(path)  # names the problem (missing file, ...)
    return _loaded(str(path.resolve()), mtime, str(path))


def apply_calibration(workload: Workload, path: Path) -> Applied:
    cal = _load(path)
    model_id = _model_id(workload)
    weights_dtype = _weights_dtype(workload)
    gpu_id = catalog.get_gpu(workload.cluster.gpu).id
    matching = [
        e
        for e in cal.entries
        if catalog.get_model(e.model).id == model_id
        and catalog.get_gpu(e.gpu).id == gpu_id
        and e.engine == workload.engine
        and e.weights_dtype == weights_dtype
    ]
    if not matching:
        have = "; ".join(e.label() for e in cal.entries)
        return Applied(
            workload,
            [],
            [
                f"calibration {path.name}: no entry for {model_id} on {gpu_id} "
                f"({workload.engine}, {weights_dtype}); default constants used "
                f"(the file has: {have})"
            ],
        )
    entry, tp_note = _pick(workload, matching)
    explicit = workload.efficiency.model_fields_set
    update = {f: getattr(entry.efficiency, f) for f in FIELDS if f not in explicit}
    kept = [f for f in FIELDS if f in explicit]
    eff = workload.efficiency.model_copy(update=update)
    constants = ", ".join(f"{f} {v:.3g}" for f, v in update.items())
    notes = [
        f"calibrated from {path.name}: {entry.label()}: {constants}; "
        f"{entry.residual_text()}{tp_note}"
    ]
    if kept:
        notes.append(f"efficiency.{', '.join(kept)} set in the workload: kept over the calibration")
    warnings = [f"calibration {path.name}: {w}" for w in entry.warnings]
    warnings += _range_warnings(workload, entry, path.name)
    return Applied(workload.model_copy(update={"efficiency": eff}), notes, warnings)


def _model_id(workload: Workload) -> str:
    if isinstance(workload.model, str):
        return catalog.get_model(workload.model).id
    return str(workload.model.hf_config)


def _weights_dtype(workload: Workload) -> str:
    """The weight format the workload is priced in: its own, else a catalog model's published
    one (a local config's is read when the workload is resolved; bf16 here)."""
    if workload.weights_dtype is not None:
        return workload.weights_dtype
    if isinstance(workload.model, str):
        return catalog.get_model(workload.model).weights_dtype
    return "bf16"


def _pick(workload: Workload, entries: list[Entry]) -> tuple[Entry, str]:
    p = workload.parallelism
    pins = [t for t in (p.colocated_tp, p.prefill_tp, p.decode_tp) if t]
    for tp in pins:
        for e in entries:
            if e.tp == tp:
                return e, ""
    e = entries[0]
    return e, f" (measured at TP{e.tp}; applied to every TP degree searched)"


def calibrated_workload(workload: Workload, base_dir: Path | None) -> Workload:
    """The workload with its own `calibration:` file applied (front ends that resolve it
    themselves, e.g. `decide simulate`, so the simulator runs on the constants the verdict used)."""
    path = calibration_path(workload, base_dir, None)
    return workload if path is None else apply_calibration(workload, path).workload


def _range_warnings(workload: Workload, entry: Entry, name: str) -> list[str]:
    """A workload far outside the prompt lengths the runs covered extrapolates the constants."""
    prompts = [p.prompt_tokens for p in entry.points]
    if not prompts:
        return []
    lo, hi = min(prompts), max(prompts)
    p50 = workload.traffic.prompt_tokens.p50
    if lo / 2 <= p50 <= hi * 2:
        return []
    return [
        f"calibration {name}: measured on prompts of {lo:,.0f}-{hi:,.0f} tokens; this workload's "
        f"p50 of {p50:,.0f} extrapolates the fitted constants"
    ]
