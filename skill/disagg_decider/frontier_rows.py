"""What `decide frontier` answers: its rows, fronts and winners, and how a row's winner is read.

The shapes the sweep (`frontier_sweep.py`) and the rate-matched basis
(`frontier_rate_matched.py`) both fill in, and the renderers (`frontier_text.py`,
`frontier_plot.py`) and the MCP tool read; kept apart so that each of those imports this module
and none of them imports another.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from disagg_decider.calc.result import InteractivityBand
from disagg_decider.interactivity import crossing

Basis = Literal["p99-under-load", "static", "rate-matched"]
BASES: tuple[str, ...] = ("p99-under-load", "static", "rate-matched")
BASIS_LABELS = {
    "p99-under-load": "p99 TTFT/TPOT under Poisson arrivals at the workload's rate",
    "static": "static batch: no queueing, mean TPOT (AIConfigurator's sizing)",
    "rate-matched": "rate-matched: fractional ctx:gen ratio, no queueing (TensorRT-LLM's)",
}
MODES = ("colocated", "disaggregated", "conditional")
# The rate-matched basis picks its prefill/decode pair on a budget this large, where whole
# replicas round the ratio by under 1% (the ratio itself stays fractional).
RATE_MATCHED_BUDGET_GPUS = 4096


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModePoint(_Out):
    """One mode at one TPOT target: what it serves per GPU and the layout that serves it."""

    tokens_per_s_per_user: float  # 1000 / the TPOT target
    tpot_target_ms: float
    tokens_per_s_per_gpu: float  # output tokens/s per GPU; 0 where the mode meets no target
    tpot_ms: float | None  # the layout's own TPOT (p99, or the static mean)
    ttft_ms: float | None
    layout: str  # e.g. "2 x TP4, chunk 2048"; "" where the mode meets no target
    details: dict[str, float | int | str | None]  # tp/dp/ep, replicas, chunk, threshold, ratio


class Front(_Out):
    mode: str
    points: list[ModePoint]  # Pareto points only, by tokens/s per user ascending


class Row(_Out):
    """Every mode at one TPOT target, and which one wins there."""

    tokens_per_s_per_user: float
    tpot_target_ms: float
    is_target: bool  # the workload's own TPOT target
    modes: dict[str, ModePoint]
    winner: str | None  # None: no layout meets the targets
    # the winner's throughput over the next layout's; None where it alone serves
    winner_over_next: float | None


class WinnerChange(_Out):
    tokens_per_s_per_user: float
    below: str | None  # the winner at lower interactivity
    above: str | None


class OnlyOne(_Out):
    """An interval of the grid where exactly one layout meets the targets (kept, not dropped)."""

    low_tokens_per_s_per_user: float
    high_tokens_per_s_per_user: float
    mode: str


class Frontier(_Out):
    workload: str
    model: str
    gpu: str
    gpus: int
    basis: str
    basis_label: str
    ttft_target_ms: float
    target_tokens_per_s_per_user: float
    modes: list[str]
    rows: list[Row]
    fronts: list[Front]
    winner_changes: list[WinnerChange]
    only_one_meets: list[OnlyOne]
    band: InteractivityBand | None
    notes: list[str]


def best_mode(points: Mapping[str, ModePoint]) -> str | None:
    """The mode serving most per GPU (ties go to the simpler layout, listed first)."""
    best = max(points.values(), key=lambda p: p.tokens_per_s_per_gpu)
    if best.tokens_per_s_per_gpu <= 0:
        return None
    return next(m for m, p in points.items() if p.tokens_per_s_per_gpu == best.tokens_per_s_per_gpu)


def over_next(points: Mapping[str, ModePoint], winner: str | None) -> float | None:
    """The winner's throughput over the best other mode's; None where it alone serves (or
    nothing does: `winner` None)."""
    if winner is None:
        return None
    mine = points[winner].tokens_per_s_per_gpu
    others = [p.tokens_per_s_per_gpu for m, p in points.items() if m != winner]
    nxt = max(others, default=0.0)
    return mine / nxt if nxt > 0 else None


def missed(u: float) -> ModePoint:
    """A mode that meets no target at `u` tokens/s per user: drawn at zero, never dropped."""
    return ModePoint(
        tokens_per_s_per_user=u,
        tpot_target_ms=1e3 / u,
        tokens_per_s_per_gpu=0.0,
        tpot_ms=None,
        ttft_ms=None,
        layout="",
        details={},
    )


def winner_changes(rows: Sequence[Row]) -> list[WinnerChange]:
    """Where the winner changes between neighbouring grid points.

    Between colocated and always-disaggregated, with both serving on both sides, it is where
    their fronts cross; otherwise the geometric middle of the two points."""
    out = []
    for a, b in itertools.pairwise(rows):
        if a.winner == b.winner:
            continue
        x = math.sqrt(a.tokens_per_s_per_user * b.tokens_per_s_per_user)
        if {a.winner, b.winner} == {"colocated", "disaggregated"}:
            vals = [
                r.modes[m].tokens_per_s_per_gpu
                for r in (a, b)
                for m in ("colocated", "disaggregated")
            ]
            if min(vals) > 0:
                c0, s0, c1, s1 = vals
                x = (
                    crossing(a.tokens_per_s_per_user, b.tokens_per_s_per_user, c0, c1, s0, s1, 1.0)
                    or x
                )
        out.append(WinnerChange(tokens_per_s_per_user=x, below=a.winner, above=b.winner))
    return out


def only_one(rows: Sequence[Row], modes: Sequence[str]) -> list[OnlyOne]:
    """Intervals of grid points where exactly one mode meets the targets."""
    out: list[OnlyOne] = []
    for r in rows:
        # the conditional layout serves wherever either mode does (never below either)
        serving = [m for m in modes if m != "conditional" and r.modes[m].tokens_per_s_per_gpu > 0]
        if len(serving) != 1:
            continue
        x = r.tokens_per_s_per_user
        last = out[-1] if out else None
        prev = rows[rows.index(r) - 1] if rows.index(r) > 0 else None
        if (
            last
            and last.mode == serving[0]
            and prev
            and last.high_tokens_per_s_per_user == prev.tokens_per_s_per_user
        ):
            out[-1] = last.model_copy(update={"high_tokens_per_s_per_user": x})
        else:
            out.append(
                OnlyOne(low_tokens_per_s_per_user=x, high_tokens_per_s_per_user=x, mode=serving[0])
            )
    return out
