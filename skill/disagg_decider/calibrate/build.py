"""Result files -> fit -> the calibration record (what `decide calibrate` writes)."""

from __future__ import annotations

import math
from pathlib import Path

from disagg_decider.calibrate import fit as fitting
from disagg_decider.calibrate.file import (
    UNBOUNDED,
    Calibration,
    Constants,
    DataFile,
    Entry,
    Point,
)
from disagg_decider.calibrate.readers import read_results
from disagg_decider.calibrate.source import Limits
from disagg_decider.catalog import Gpu, ModelSpec, step_fit
from disagg_decider.workload import Efficiency

STATISTIC = {"ttft_ms": "ttft_stat", "tpot_ms": "tpot_stat"}


def calibrate(
    paths: list[Path],
    *,
    model: ModelSpec,
    gpu: Gpu,
    engine: str,
    tp: int,
    weights_dtype: str = "bf16",
    chunk_tokens: int = 8192,
    max_batch: int = 256,
    limits: Limits | None = None,
) -> Calibration:
    runs, files = read_results(paths, limits)
    kv = "fp8" if weights_dtype in ("fp8", "fp4") else "bf16"
    # The constants not fitted here are the ones a workload is priced with (the fitted step
    # physics, `catalog/step_fit.py`), so the calibrated ones mean the same thing when applied.
    fitted = step_fit.fitted(gpu.id, engine, model.moe is not None, weights_dtype)
    base = Efficiency(**fitted.constants) if fitted else Efficiency()
    target = fitting.Target(
        model, gpu, engine, tp, weights_dtype, kv, chunk_tokens, max_batch, base=base
    )
    if not bool(target.engine_with(target.base).fits()):
        from disagg_decider.errors import UserError

        raise UserError(
            f"{model.id} in {weights_dtype} does not fit on {tp} x {gpu.id}: check --tp"
        )
    result = fitting.fit(runs, target)
    points = [
        Point(
            file=r.run.source,
            run=r.run.where,
            load=r.run.load_label(),
            prompt_tokens=round(r.run.prompt_tokens, 1),
            output_tokens=round(r.run.output_tokens, 1),
            metric=r.metric,
            statistic=getattr(r.run, STATISTIC[r.metric]) if r.metric in STATISTIC else "mean",
            measured=round(r.measured, 4),
            predicted=None if r.predicted is None else round(r.predicted, 4),
            error=None if r.error is None else round(r.error, 4),
            predicted_by=r.by,
        )
        for r in result.residuals
    ]
    entry = Entry(
        model=model.id,
        gpu=gpu.id,
        engine=engine,
        tp=tp,
        weights_dtype=weights_dtype,
        chunk_tokens=chunk_tokens,
        max_batch=max_batch,
        efficiency=Constants(
            **{k: round(getattr(result.efficiency, k), 4) for k in fitting.FITTED}
        ),
        fitted=list(result.fitted),
        held=result.held,
        uncertainty={
            k: round(v, 4) if math.isfinite(v) else UNBOUNDED for k, v in result.uncertainty.items()
        },
        residuals={
            k: None if v is None else round(v, 4)
            for k, v in fitting.summary(result.residuals).items()
        },
        warnings=result.warnings,
        data=[DataFile(file=f.name, sha256=f.sha256, format=f.format, runs=f.runs) for f in files],
        points=points,
    )
    return Calibration(entries=[entry])
