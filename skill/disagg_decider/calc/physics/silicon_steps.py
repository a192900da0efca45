"""The measured step source's tables in use: per-layout curves stacked and interpolated.

`calc/physics/silicon.py` asks aiconfigurator-core for each layout's curves; this module stacks the
layouts an engine holds (its TP/DP/EP may be arrays of candidates), interpolates them with numpy
for any pass (log-log; a power law beyond the grids) and says which passes the database covers.
One `SiliconSteps` per workload key per process: its tables are built once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from disagg_decider.calc.physics.silicon import (
    BATCH_GRID,
    CONTEXT_GRID,
    PROMPT_GRID,
    TOKEN_GRID,
    Key,
    LayoutTable,
    Refused,
    coverage_gap,
    key_of,
    layout_table,
)

_LOG_TOKENS = np.log(TOKEN_GRID)
_LOG_PROMPTS = np.log(PROMPT_GRID)
_LOG_BATCHES = np.log(BATCH_GRID)
_LOG_CONTEXTS = np.log(CONTEXT_GRID)
_TINY_MS = 1e-9  # keeps a zero curve (no such operation) finite in log space


def _segment(log_grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the grid segment holding each x and the weight of its upper end; above the
    grid's top the last segment is extended (weight > 1: a power law)."""
    lx = np.log(np.maximum(x, np.exp(log_grid[0])))
    j = np.clip(np.searchsorted(log_grid, lx, side="right") - 1, 0, len(log_grid) - 2)
    w = (lx - log_grid[j]) / (log_grid[j + 1] - log_grid[j])
    return j, w


def _curve(log_grid: np.ndarray, log_values: np.ndarray, layout: np.ndarray, x) -> np.ndarray:
    """Log-log interpolation of each layout's curve (rows of `log_values`) at x."""
    layout, x = np.broadcast_arrays(layout, np.asarray(x, dtype=float))
    j, w = _segment(log_grid, x)
    return np.exp(log_values[layout, j] * (1.0 - w) + log_values[layout, j + 1] * w)


def _surface(
    log_values: np.ndarray, layout: np.ndarray, batch, context, scale_below_one: bool = True
) -> np.ndarray:
    """Bilinear log-log interpolation of a (batch, context) surface; below one sequence it
    scales with the batch (attention) or stays at one sequence's (a whole step)."""
    layout, b, c = np.broadcast_arrays(
        layout, np.asarray(batch, dtype=float), np.asarray(context, dtype=float)
    )
    i, u = _segment(_LOG_BATCHES, b)
    j, v = _segment(_LOG_CONTEXTS, c)
    lo = log_values[layout, i, j] * (1.0 - v) + log_values[layout, i, j + 1] * v
    hi = log_values[layout, i + 1, j] * (1.0 - v) + log_values[layout, i + 1, j + 1] * v
    out = np.exp(lo * (1.0 - u) + hi * u)
    if not scale_below_one:
        return out
    return np.where(b < 1.0, out * np.maximum(b, 0.0), out)


@dataclass(frozen=True)
class Stacked:
    """The tables of several layouts, one row each, in log milliseconds. Where the database
    refused a layout's decode steps (`decode_covered` False) or prompt passes
    (`prompt_covered`), its rows are placeholders and the roofline prices those passes."""

    decode_step: np.ndarray
    prompt_non_attention: np.ndarray
    prompt_attention: np.ndarray
    decode_attention: np.ndarray
    decode_covered: np.ndarray
    prompt_covered: np.ndarray


_SHAPES = {
    "decode_step": (len(BATCH_GRID), len(CONTEXT_GRID)),
    "prompt_non_attention": (len(TOKEN_GRID),),
    "prompt_attention": (len(PROMPT_GRID),),
    "decode_attention": (len(BATCH_GRID), len(CONTEXT_GRID)),
}


def _stacked(tables: list[LayoutTable | None]) -> Stacked:
    def rows(field: str) -> np.ndarray:
        placeholder = np.ones(_SHAPES[field])
        got = [None if t is None else getattr(t, field) for t in tables]
        return np.log(
            np.maximum(np.stack([placeholder if g is None else g for g in got]), _TINY_MS)
        )

    return Stacked(
        decode_step=rows("decode_step"),
        prompt_non_attention=rows("prompt_non_attention"),
        prompt_attention=rows("prompt_attention"),
        decode_attention=rows("decode_attention"),
        decode_covered=np.array([t is not None and t.decode_step is not None for t in tables]),
        prompt_covered=np.array(
            [t is not None and t.prompt_non_attention is not None for t in tables]
        ),
    )


class SiliconSteps:
    """A workload's measured step source: one table per parallel layout, built on first use.

    Shared by every engine of the workload (`Engine.steps`); what the database refuses is
    priced by the roofline and listed in `refused` for the verdict's warnings.
    """

    def __init__(self, key: Key, moe: bool) -> None:
        self.key, self.moe = key, moe
        self.refused: dict[str, str] = {}  # layout label (and which passes) -> reason
        self.priced: set[str] = set()  # layout labels with a table
        self._stacks: dict[tuple, tuple[Stacked, np.ndarray]] = {}

    def _layout(self, tp: int, dp: int, ep: int) -> LayoutTable | None:
        from disagg_decider.calc.physics.parallel import label

        name = label(tp, dp, ep)
        try:
            table = layout_table(self.key, tp, dp, ep, self.moe)
        except Refused as exc:
            self.refused.setdefault(name, str(exc))
            return None
        self.priced.add(name)
        if table.decode_refused:
            self.refused.setdefault(f"{name} (decode steps)", table.decode_refused)
        if table.prompt_refused:
            self.refused.setdefault(f"{name} (passes with prompt tokens)", table.prompt_refused)
        return table

    def stack(self, tp, dp, ep) -> tuple[Stacked, np.ndarray]:
        """The tables of the engine's layouts and each element's row in them."""
        arrays = [np.asarray(v, dtype=np.int64) for v in (tp, dp, ep)]
        cache_key = tuple((a.shape, a.tobytes()) for a in arrays)  # a few candidates
        hit = self._stacks.get(cache_key)
        if hit is not None:
            return hit
        t, d, e = np.broadcast_arrays(*arrays)
        triples = np.stack([t.ravel(), d.ravel(), e.ravel()], axis=1)
        unique, inverse = np.unique(triples, axis=0, return_inverse=True)
        tables = [self._layout(int(a), int(b), int(c)) for a, b, c in unique]
        result = (_stacked(tables), inverse.reshape(t.shape))
        self._stacks[cache_key] = result
        return result

    def prefill_overhead_ms(self, tp, dp, ep, roofline_ms: float):
        """No fixed prefill overhead where the database prices prompt passes (its passes
        carry their own), the roofline's elsewhere."""
        stacked, layout = self.stack(tp, dp, ep)
        return np.where(stacked.prompt_covered[layout], 0.0, roofline_ms)

    def pass_ms(self, tp, dp, ep, decode_batch, decode_context, prefill_tokens, prefill_context):
        """One pass's time per the database, and where it covers the pass (elsewhere the
        caller takes the roofline). Batch and prompt tokens are the replica's, spread evenly
        over its `dp` attention ranks with the pass's attention work kept whole."""
        stacked, layout = self.stack(tp, dp, ep)
        c_total = np.asarray(prefill_tokens, dtype=float)
        has_prompt = c_total > 0
        covered = np.where(
            has_prompt, stacked.prompt_covered[layout], stacked.decode_covered[layout]
        )
        if not covered.any():
            return None, covered
        ranks = np.asarray(dp, dtype=float)
        b = np.asarray(decode_batch, dtype=float) / ranks
        c = c_total / ranks
        s = np.maximum(np.asarray(prefill_context, dtype=float) + (ranks - 1.0) * c / 2.0, 0.0)
        ms = _surface(stacked.decode_step, layout, b, decode_context, scale_below_one=False)
        if np.any(has_prompt):
            tokens = np.maximum(b + c, 1.0)
            mixed = _curve(_LOG_TOKENS, stacked.prompt_non_attention, layout, tokens)
            attention = _prompt_attention(stacked, layout, s + c) - _prompt_attention(
                stacked, layout, s
            )
            mixed = mixed + np.maximum(attention, 0.0)
            decode = _surface(stacked.decode_attention, layout, b, decode_context)
            mixed = mixed + np.where(b > 0, decode, 0.0)
            ms = np.where(has_prompt, mixed, ms)
        return ms, covered


def _prompt_attention(stacked: Stacked, layout: np.ndarray, tokens) -> np.ndarray:
    """Attention of a whole prompt of `tokens`; below the grid it falls linearly to zero."""
    x = np.asarray(tokens, dtype=float)
    a = _curve(_LOG_PROMPTS, stacked.prompt_attention, layout, x)
    low = PROMPT_GRID[0]
    return np.where(x < low, a * np.maximum(x, 0.0) / low, a)


@cache
def steps_for(key: Key, moe: bool) -> SiliconSteps:
    """One step source per workload key per process: its tables are built once."""
    return SiliconSteps(key, moe)


def steps_of(r) -> SiliconSteps | None:
    """The measured step source of a resolved workload, None where the database lacks it."""
    w = r.workload
    if coverage_gap(r.model.id, r.gpu.id, w.engine, w.weights_dtype) is not None:
        return None
    return steps_for(key_of(r), r.model.moe is not None)


def verdict_notes(r) -> tuple[str, list[str]]:
    """(the step source the verdict used, warnings about it): the silicon source where the
    workload asks for it and the database covers it; layouts it refused, or a workload it lacks
    entirely, are priced by the default roofline, and the warnings say which."""
    w = r.workload
    if w.step_source != "silicon":
        return "default", []
    gap = coverage_gap(r.model.id, r.gpu.id, w.engine, w.weights_dtype)
    if gap is not None:
        return "default", [f"step_source silicon unavailable, default physics used: {gap}"]
    steps = steps_for(key_of(r), r.model.moe is not None)
    if steps.refused and not steps.priced:
        why = next(iter(steps.refused.values()))
        return "default", [f"step_source silicon unavailable, default physics used: {why}"]
    by_reason: dict[str, list[str]] = {}
    for lay, why in sorted(steps.refused.items()):
        by_reason.setdefault(why, []).append(lay)
    notes = [
        f"step_source silicon: layouts {', '.join(lays)} priced by the default physics ({why})"
        for why, lays in by_reason.items()
    ]
    return "silicon", notes
