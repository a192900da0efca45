"""`decide frontier --map`: which layout wins over a grid of (TTFT target, TPOT target).

TaiChi (arXiv 2508.01989) finds aggregation best with a tight TTFT and a loose TPOT, and
disaggregation with a tight TPOT and a loose TTFT. The map shows where those regions fall for
the team's own workload: every cell is the calculator at those two targets (one `analyze_many`
batch, the verdict's layout), its winning layout and how far ahead it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from disagg_decider.errors import UserError
from disagg_decider.frontier_rows import MODES
from disagg_decider.frontier_sweep import (
    Sweep,
    analysis_row,
    check_sweep,
    output_mean_tokens,
    resolved_for,
    sweep_analyses,
)
from disagg_decider.workload import Workload

DEFAULT_TTFT_LOW_MS = 100.0
DEFAULT_TTFT_HIGH_MS = 5000.0
DEFAULT_MAP_POINTS = 8
MAX_MAP_POINTS = 24  # 576 verdicts: a few seconds


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Cell(_Out):
    ttft_target_ms: float
    tokens_per_s_per_user: float
    winner: str | None  # None: no layout meets both targets
    tokens_per_s_per_gpu: dict[str, float]  # each mode's output tokens/s per GPU (0: misses)
    # The best layout with a prefill pool over colocation (None unless both serve): the heat.
    split_over_colocated: float | None


class WinnerMap(_Out):
    workload: str
    basis: str
    ttft_targets_ms: list[float]
    tokens_per_s_per_user: list[float]
    cells: list[list[Cell]]  # [ttft][tps]
    target_ttft_ms: float
    target_tokens_per_s_per_user: float


def ttft_grid(low_ms: float, high_ms: float, points: int) -> np.ndarray:
    if not (1 <= low_ms < high_ms <= 600_000):
        raise UserError(
            f"--ttft-low {low_ms:g} / --ttft-high {high_ms:g}: TTFT targets in ms, "
            "low below high, between 1 and 600000"
        )
    return np.geomspace(low_ms, high_ms, points)


def winner_map(
    w: Workload,
    base_dir: Path | None = None,
    sweep: Sweep | None = None,
    ttft_low_ms: float = DEFAULT_TTFT_LOW_MS,
    ttft_high_ms: float = DEFAULT_TTFT_HIGH_MS,
    options: Mapping[str, Any] | None = None,
) -> WinnerMap:
    """The calculator at every (TTFT, TPOT) pair of the two grids, in one batch: each cell's
    winner is the verdict's layout at those targets."""
    sweep = sweep or Sweep(points=DEFAULT_MAP_POINTS)
    check_sweep(sweep)
    if sweep.points > MAX_MAP_POINTS:
        raise UserError(
            f"--map --points {sweep.points}: at most {MAX_MAP_POINTS} per axis (the map prices "
            "points x points verdicts)"
        )
    if sweep.basis == "rate-matched":
        raise UserError(
            "--map --basis rate-matched: the rate-matched basis has no TTFT queueing to trade; "
            "use --basis p99-under-load or static for the map"
        )
    ttfts = [float(t) for t in ttft_grid(ttft_low_ms, ttft_high_ms, sweep.points)]
    tps = [float(u) for u in sweep.grid()]
    r = resolved_for(w, base_dir, options or {})
    analyses = sweep_analyses(r, [(1e3 / u, t) for t in ttfts for u in tps], sweep.basis)
    modes = list(MODES) if sweep.basis == "p99-under-load" else ["colocated", "disaggregated"]
    out_tokens = output_mean_tokens(r.workload)
    cells = []
    for i, t in enumerate(ttfts):
        line = []
        for j, u in enumerate(tps):
            row = analysis_row(u, analyses[i * len(tps) + j], modes, False, out_tokens)
            per_gpu = {m: p.tokens_per_s_per_gpu for m, p in row.modes.items()}
            split = max(per_gpu.get("disaggregated", 0.0), _pooled(row, per_gpu))
            colo = per_gpu["colocated"]
            line.append(
                Cell(
                    ttft_target_ms=t,
                    tokens_per_s_per_user=u,
                    winner=row.winner,
                    tokens_per_s_per_gpu=per_gpu,
                    split_over_colocated=split / colo if colo > 0 and split > 0 else None,
                )
            )
        cells.append(line)
    return WinnerMap(
        workload=w.name,
        basis=sweep.basis,
        ttft_targets_ms=ttfts,
        tokens_per_s_per_user=tps,
        cells=cells,
        target_ttft_ms=w.slo.ttft_ms,
        target_tokens_per_s_per_user=1e3 / w.slo.tpot_ms,
    )


def _pooled(row, per_gpu: Mapping[str, float]) -> float:
    """The conditional layout's throughput where it keeps a prefill pool, else 0."""
    point = row.modes.get("conditional")
    if point is None or point.details.get("prefill_tp") is None:
        return 0.0
    return per_gpu["conditional"]


def cell_text(c: Cell) -> str:
    """A cell in a table: the winner's initial and its lead, or who alone serves."""
    if c.winner is None:
        return "-"
    short = {"colocated": "C", "disaggregated": "D", "conditional": "K"}[c.winner]
    ratio = c.split_over_colocated
    if ratio is None:
        return f"{short} only"
    return f"{short} {ratio:.2f}x"
