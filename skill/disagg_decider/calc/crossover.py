"""The crossover: the prompt length where disaggregation starts to win, read off a gain curve.

The comparison (`calc/compare.py`) prices each workload's own prompt and a log-spaced grid of
prompt lengths; this module holds the grid and the reading of the curve (where the winning
stretch starts, log-interpolated between grid points), which the sweep, the MCP tool and the
report share.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from functools import cache

import numpy as np

from disagg_decider.calc.queues.array_helpers import sorted_unique
from disagg_decider.workload import Resolved

CROSSOVER_POINTS = 11
CROSSOVER_MIN_PROMPT_TOKENS = 64  # the crossover grid's shortest prompt p50


def crossover_grid(r: Resolved) -> np.ndarray:
    return _log_grid(min(r.model.max_context_tokens, 131072))


@cache
def _log_grid(top: int) -> np.ndarray:
    grid = sorted_unique(np.round(np.geomspace(CROSSOVER_MIN_PROMPT_TOKENS, top, CROSSOVER_POINTS)))
    grid.setflags(write=False)
    return grid


def crossover_from_curve(prompts: np.ndarray, gains: np.ndarray, own_prompt: float) -> int | None:
    """Where disaggregation starts to win, seen from the workload's own prompt length.

    Whole replicas on a fixed budget make the gain curve step up and down, so "the" crossover
    is read relative to the workload: if disaggregation wins at its own prompt, the lower end
    of that winning stretch; if not, the first longer prompt where it would win. The crossing
    is log-interpolated between grid points; None when it never wins on the grid.
    """
    prompts = np.asarray(prompts, dtype=float).tolist()  # a dozen points: plain Python is faster
    gains = np.asarray(gains, dtype=float).tolist()
    wins = [split_wins(g) for g in gains]
    if not any(wins):
        return None
    own = min(bisect_left(prompts, own_prompt), len(prompts) - 1)
    if wins[own]:
        start = own
        while start > 0 and wins[start - 1]:
            start -= 1
    elif True in wins[own:]:
        start = wins.index(True, own)
    else:
        return None
    return _stretch_start(prompts, gains, start)


def winning_stretches(prompts, gains) -> list[tuple[int, int]]:
    """Each stretch of the curve where disaggregation wins, as (from, to) prompt tokens: `from`
    where the gain crosses 1, log-interpolated as `crossover_from_curve` reads it (so the
    crossover is one of them on the same grid), `to` the stretch's last winning grid point."""
    prompts = np.asarray(prompts, dtype=float).tolist()
    gains = np.asarray(gains, dtype=float).tolist()
    wins = [split_wins(g) for g in gains]
    out = []
    for i, won in enumerate(wins):
        if won and (i == 0 or not wins[i - 1]):
            end = i
            while end + 1 < len(wins) and wins[end + 1]:
                end += 1
            out.append((_stretch_start(prompts, gains, i), round(prompts[end])))
    return out


def _stretch_start(prompts: list[float], gains: list[float], start: int) -> int:
    """Where a winning stretch starting at grid point `start` begins: the grid's first point,
    else the log-interpolated crossing from the losing point before it."""
    if start == 0:
        return int(prompts[0])
    return _log_crossing(prompts[start - 1], prompts[start], gains[start - 1], gains[start])


def split_wins(gain: float) -> bool:
    """Disaggregation wins where it serves more per GPU (nan, neither meets the SLO, never)."""
    return gain > 1.0


def crossover_with_own(prompts: np.ndarray, gains: np.ndarray) -> int | None:
    """The crossover on the grid with the workload's own prompt (index 0) merged in."""
    p, g = prompts.tolist(), gains.tolist()
    order = sorted(range(len(p)), key=p.__getitem__)
    return crossover_from_curve([p[i] for i in order], [g[i] for i in order], p[0])


def _log_crossing(lo: float, hi: float, g_lo: float, g_hi: float) -> int:
    """Prompt length where the gain reaches 1 between two grid points (log-linear)."""
    g_lo = 0.0 if math.isnan(g_lo) else float(g_lo)
    if not math.isfinite(g_hi) or g_hi <= g_lo:
        return round(hi)
    frac = min(max((1.0 - g_lo) / (g_hi - g_lo), 0.0), 1.0)
    return round(math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo))))
