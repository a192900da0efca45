"""`decide frontier`: throughput per GPU against interactivity, the way the field publishes it.

The TPOT target is swept over a log grid of tokens/s per user (1000 / TPOT ms) and the
calculator is called at each point through the verdict pipeline itself (`decide_many`, every
point one workload of one batch), so the frontier's winner at a target is the verdict's layout
there by construction. Nothing here prices a layout: this module reads the verdicts.

Bases, each labelled in the output:
- `p99-under-load` (default): p99 TTFT/TPOT at the workload's Poisson rate, queueing included;
  colocated, always-disaggregated and conditional.
- `static`: `slo.basis: static` (calc/static.py): a batch's TTFT with no queue, mean TPOT.
- `rate-matched`: as TensorRT-LLM's disaggregated-serving study computes it: one generation
  (decode) instance fed by a fractional number of context (prefill) instances, no queueing;
  per GPU = output tokens/s / (ctx GPUs x gen rate / ctx rate + gen GPUs). The instances are
  the static basis's (`calc.static`), the pair the one that serves most per GPU.

Throughput is output tokens/s per GPU (goodput per GPU x mean output length), GPUs counted over
the cluster as the verdict counts them (idle GPUs count against a mode).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from disagg_decider.calc.result import Analysis
from disagg_decider.errors import UserError
from disagg_decider.frontier_rows import (
    BASES,
    BASIS_LABELS,
    MODES,
    Front,
    Frontier,
    ModePoint,
    Row,
    best_mode,
    missed,
    only_one,
    over_next,
    winner_changes,
)
from disagg_decider.interactivity import (
    DEFAULT_MARGIN,
    at_tpot,
    band_from_curve,
    on_basis,
    pareto_mask,
    tps_grid,
)
from disagg_decider.workload import Resolved, Workload


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What a sweep is asked for (the CLI's flags, the MCP tool's arguments)."""

    low_tps_user: float = 10.0
    high_tps_user: float = 400.0
    points: int = 16
    basis: str = "p99-under-load"

    def grid(self) -> np.ndarray:
        return tps_grid(self.low_tps_user, self.high_tps_user, self.points)


def check_sweep(s: Sweep) -> None:
    """Bad bounds are the user's: name the flag (and the MCP tool's field) and what would do."""
    if s.basis not in BASES:
        raise UserError(f"--basis {s.basis}: expected one of {', '.join(BASES)}")
    low = f"--low (low_tokens_per_s_per_user) {s.low_tps_user:g}"
    high = f"--high (high_tokens_per_s_per_user) {s.high_tps_user:g}"
    for bound, v in ((low, s.low_tps_user), (high, s.high_tps_user)):
        if not (math.isfinite(v) and 0.1 <= v <= 10_000):
            raise UserError(f"{bound}: tokens/s per user between 0.1 and 10000")
    if s.low_tps_user >= s.high_tps_user:
        raise UserError(f"{low} must be below {high}")
    if not 2 <= s.points <= 64:
        raise UserError(f"--points {s.points}: between 2 and 64 grid points")


def with_targets(w: Workload, tpot_ms: float, ttft_ms: float | None = None, basis=None):
    """The workload at other targets (and SLO basis)."""
    slo: dict[str, Any] = {"tpot_ms": float(tpot_ms)}
    if ttft_ms is not None:
        slo["ttft_ms"] = float(ttft_ms)
    if basis is not None:
        slo["basis"] = basis
    return w.model_copy(update={"slo": w.slo.model_copy(update=slo)})


def resolved_for(w: Workload, base_dir: Path | None, options: Mapping[str, Any]) -> Resolved:
    """The workload resolved with the calibration the verdict would apply (`--calibration`
    or its own `calibration:` file)."""
    from disagg_decider.calibrate.apply import apply_calibration, calibration_path
    from disagg_decider.workload import resolve

    path = calibration_path(w, base_dir, options.get("calibration"))
    if path is not None:
        w = apply_calibration(w, path).workload
    return resolve(w, base_dir)


def margin_for(w: Workload, options: Mapping[str, Any]) -> float:
    """The rulebook's min_gain as the verdict would read it (rule files, overrides)."""
    from disagg_decider.decide import effective_parameters
    from disagg_decider.rules.loader import with_extra

    loaded = with_extra(list(options.get("rule_files") or ()))
    params, _ = effective_parameters(loaded, w, options.get("overrides") or {})
    return float(params.get("min_gain", DEFAULT_MARGIN))


def sweep_analyses(r: Resolved, targets: Sequence[tuple[float, float | None]], basis: str):
    """The calculator at each (TPOT, TTFT or None) target, in one batch, on `basis`.

    What the verdict at that target is built from (`decide_many` runs the same calls before
    its rules): the frontier reads the modes and the layout (`Analysis.conditional.layout`,
    the verdict's `layout`), never the crossover, so workloads on two GPU types are searched
    without it (`analyze_many(modes_only=True)`, which still prices their layout).
    """
    from disagg_decider.calc.compare import analyze_many

    variants = [at_tpot(r, tpot, ttft, basis) for tpot, ttft in targets]
    mixed = r.workload.cluster.heterogeneous
    return [
        on_basis(v, a)
        for v, a in zip(variants, analyze_many(variants, modes_only=mixed), strict=True)
    ]


def frontier(
    w: Workload,
    base_dir: Path | None = None,
    sweep: Sweep = Sweep(),
    options: Mapping[str, Any] | None = None,
) -> Frontier:
    """Every mode's front over the grid, the winners, and the band, on `sweep.basis`.

    `options` (rule_files, overrides, calibration) are read as `decide_many` reads them.
    """
    check_sweep(sweep)
    options = options or {}
    grid = [float(u) for u in sweep.grid()]
    target = 1e3 / w.slo.tpot_ms
    xs = sorted({*grid, target})
    r = resolved_for(w, base_dir, options)
    margin = margin_for(w, options)
    if sweep.basis == "rate-matched":
        from disagg_decider.frontier_rate_matched import rate_matched_rows

        rows, notes = rate_matched_rows(r, xs, target)
        modes = ["colocated", "disaggregated"]
    else:
        basis = sweep.basis
        analyses = sweep_analyses(r, [(1e3 / u, None) for u in xs], basis)
        modes = list(MODES) if basis == "p99-under-load" else ["colocated", "disaggregated"]
        out_tokens = output_mean_tokens(r.workload)
        rows = [
            analysis_row(u, a, modes, math.isclose(u, target), out_tokens)
            for u, a in zip(xs, analyses, strict=True)
        ]
        notes = sorted({n for a in analyses for n in a.warnings if "slo.basis" in n})
        if basis == "static":
            notes.append("the conditional layout is priced on the p99-under-load basis only")
    return assemble(w, r.model.id, sweep.basis, rows, modes, margin, notes)


def assemble(w: Workload, model: str, basis: str, rows, modes, margin, notes) -> Frontier:
    """The rows' fronts (Pareto points only), winner changes, single-layout intervals, band."""
    target = 1e3 / w.slo.tpot_ms
    xs = [r.tokens_per_s_per_user for r in rows]
    fronts = []
    for mode in modes:
        per_gpu = [r.modes[mode].tokens_per_s_per_gpu for r in rows]
        keep = pareto_mask(xs, per_gpu)
        fronts.append(
            Front(mode=mode, points=[r.modes[mode] for r, k in zip(rows, keep, strict=True) if k])
        )
    colo = [r.modes["colocated"].tokens_per_s_per_gpu for r in rows]
    split = [r.modes["disaggregated"].tokens_per_s_per_gpu for r in rows]
    return Frontier(
        workload=w.name,
        model=model,
        gpu=w.cluster.gpu,
        gpus=w.cluster.gpus,
        basis=basis,
        basis_label=BASIS_LABELS[basis],
        ttft_target_ms=w.slo.ttft_ms,
        target_tokens_per_s_per_user=target,
        modes=list(modes),
        rows=rows,
        fronts=fronts,
        winner_changes=winner_changes(rows),
        only_one_meets=only_one(rows, modes),
        band=band_from_curve(xs, colo, split, margin, target, basis),
        notes=notes,
    )


def analysis_row(
    u: float, a: Analysis, modes: Sequence[str], is_target: bool, out_tokens: float
) -> Row:
    """The calculator at one target as a row; the winner is the verdict's `layout` (on the
    p99 basis, where the conditional layout is priced), else the mode serving most per GPU."""
    points = {m: mode_point(u, a, m, out_tokens) for m in modes}
    distinct = points
    if "conditional" in modes and a.conditional is not None:
        served = any(p.tokens_per_s_per_gpu > 0 for p in points.values())
        winner = a.conditional.layout if served else None
        if a.conditional.layout != "conditional":  # it is one of the two modes: no rival
            distinct = {m: p for m, p in points.items() if m != "conditional"}
    else:
        winner = best_mode(points)
    return Row(
        tokens_per_s_per_user=u,
        tpot_target_ms=1e3 / u,
        is_target=is_target,
        modes=points,
        winner=winner,
        winner_over_next=over_next(distinct, winner),
    )


def output_mean_tokens(w: Workload) -> float:
    """Mean output tokens per request: goodput is in requests, the field's unit in tokens."""
    from disagg_decider.calc.replicas.lengths import Lengths

    return float(np.ravel(Lengths.of(w).output_mean)[0])


def mode_point(u: float, a: Analysis, mode: str, out_tokens: float) -> ModePoint:
    """One mode of the calculator's answer (or a verdict: same fields) as a front's point."""
    records = {"colocated": a.colocated, "disaggregated": a.disaggregated}
    rec = a.conditional if mode == "conditional" else records[mode]
    if rec is None or not rec.feasible or rec.goodput_per_gpu <= 0:
        return missed(u)
    layout, details = describe(rec, mode)
    return ModePoint(
        tokens_per_s_per_user=u,
        tpot_target_ms=1e3 / u,
        tokens_per_s_per_gpu=rec.goodput_per_gpu * out_tokens,
        tpot_ms=rec.tpot_p99_ms,
        ttft_ms=rec.ttft_p99_ms,
        layout=layout,
        details=details,
    )


def describe(rec, mode: str) -> tuple[str, dict]:
    """A mode's layout in words and as numbers (TP/DP/EP, replicas, chunk, threshold)."""
    if mode == "conditional":
        pool = f"P TP{rec.prefill_tp} x {rec.prefill_replicas} + " if rec.prefill_tp else ""
        layout = f"{pool}D TP{rec.decode_tp} x {rec.decode_replicas}"
        if rec.threshold_tokens:
            layout = f"prompts > {rec.threshold_tokens} tokens to {layout}"
        if rec.chunk_tokens:
            layout += f", chunk {rec.chunk_tokens}"
        names = ("threshold_tokens", "prefill_tp", "prefill_replicas", "decode_tp")
        names += ("decode_replicas", "chunk_tokens", "share_to_prefill")
    elif mode == "colocated":
        layout = f"{rec.replicas} x {rec.layout}, chunk {rec.chunk_tokens}"
        names = ("tp", "dp", "ep", "replicas", "chunk_tokens", "max_batch")
    else:
        layout = (
            f"P {rec.prefill_layout} x {rec.prefill_replicas} + "
            f"D {rec.decode_layout} x {rec.decode_replicas}"
        )
        names = tuple(f"{role}_{k}" for role in ("prefill", "decode") for k in ("tp", "dp", "ep"))
        names += ("prefill_replicas", "decode_replicas", "max_batch")
    return layout, {n: getattr(rec, n) for n in names}
