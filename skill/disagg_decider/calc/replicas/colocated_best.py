"""The colocated replica's capacity: for every (row, TP, chunk) line, the largest decode batch that
meets the targets, searched along the batch grid at once for few lines or by bisection for many
(`best_points`), then the best chunk size per (row, TP); lines no batch holds on may still carry
the workload's own rate below one sequence in flight (`low_load`).

`colocated.py` prices one point (`lines`, `evaluate`); this module searches over them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues.array_helpers import (
    broadcast,
    broadcast_shape,
    first_best,
    shape_of,
)
from disagg_decider.calc.queues.batch_edge import (
    bisect_edge,
    boundary_index,
    levels_for,
    pick,
    value_at,
)
from disagg_decider.calc.replicas.colocated import (
    Lines,
    evaluate,
    lines,
    pooled_wait,
    uncached_nodes,
)
from disagg_decider.calc.replicas.decode import engine_batch_grid
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.low_load import rate_below_batch_one

# Up to this many (line, batch) points, evaluate them all at once; beyond, bisect each line.
# Measured (issue 17f, `benchmarks/decide_cpu.py`'s examples): bisecting is already cheaper at
# ~290 lines x 16 batches (1.1 ms against 1.4), whole grids at ~100 lines (0.7 against 0.9).
WHOLE_GRID_POINTS = 2_500
# What one evaluation's fixed cost (~180 Python-level calls) is worth in points evaluated, in
# CPU time: bisection takes several steps per evaluation while that saves more
# (`_bisection_levels`). Measured on the examples' searches (one step against two per
# evaluation, interleaved, the least of 60 calls each): ~0.10 ms an evaluation against
# ~0.36 us a point. By calls alone two steps would pay from 432 lines up (rag-8k's search:
# ~400 calls fewer), yet cost 0.1 ms more CPU there and 0.3-0.5 ms on 670-960 lines.
EVALUATION_POINTS = 300
# From this many lines the lines hold their quantile nodes node-major (`_node_major_lines`):
# a batch's searches (5,000-50,000 lines), where the tail readings' per-row calls and the
# nodes' exponentials cost most; one decision's (up to ~960 lines on the examples) keep the
# row layout and their calls.
NODE_MAJOR_LINES = 1024


@dataclass(frozen=True)
class ColocatedPoint:
    """Best (chunk, batch) per (row, TP); rate 0 where no point meets the targets."""

    rate_per_s: np.ndarray
    chunk_index: np.ndarray
    batch: np.ndarray


def best_points(
    engine: Engine,
    lengths: Lengths,
    ttft_ms,
    tpot_ms,
    chunks,
    servers=1.0,
    searched=None,
    rate_per_s=None,
) -> ColocatedPoint:
    """Largest feasible batch per chunk size (interpolated), then the best chunk size.

    Every (row, TP, chunk) line is searched along the batch grid. Few lines (one workload) are
    evaluated at every batch in one pass, where numpy's fixed cost per call dominates; many
    lines (a batch of workloads) by bisection, which evaluates log2(n) batches instead of n.
    Both find the same crossing (`batch_edge`). Lines are flattened copies: numpy is several
    times faster on contiguous arrays than on broadcasts with a trailing axis of one.

    `searched`, a mask on the (row, TP) axes, leaves the other lines out: each line is searched
    on its own, so the rest get the same answers; the left-out ones read rate 0, chunk index 0
    and batch 0 (for candidates a caller never reads, such as layouts a row may not use).
    """
    batches = engine_batch_grid(engine)
    c = np.asarray(chunks, dtype=float)[:, None]
    # The engine's layouts' shape, from its fields (not `engine.gpus`: the lines run on an
    # engine of their own, so the caller's constants would be worked out for nothing).
    layouts = broadcast_shape(shape_of(engine.tp), shape_of(engine.dp), shape_of(engine.ep))
    shape = broadcast_shape(shape_of(lengths.prompt_p50), layouts, c.shape)
    keep = (
        None if searched is None else np.broadcast_to(np.asarray(searched)[..., None, None], shape)
    )
    keep = None if keep is None or keep.all() else keep.reshape(-1)
    n_lines = int(np.prod(shape)) if keep is None else int(keep.sum())
    whole_grid = n_lines * batches.size <= WHOLE_GRID_POINTS
    levels = 1 if whole_grid else _bisection_levels(engine, batches, n_lines)
    line_shape = (n_lines, 1) if whole_grid or levels > 1 else (n_lines,)

    def per_line(a) -> np.ndarray:  # `array_helpers.broadcast`: np.broadcast_to's elements, cheaper
        if keep is not None:
            return broadcast(a, shape).reshape(-1)[keep].reshape(line_shape)
        return broadcast(a, shape).reshape(line_shape)

    # The uncached prompt at the quantile nodes is a row's (a prompt's): its exponentials are
    # taken on the rows, then laid out on the lines (the same values); on many lines node-major.
    nodes = uncached_nodes(lengths)
    k, rows = nodes.shape[-1], nodes.shape[:-1]
    nodes = nodes.reshape(*(1,) * (len(shape) - len(rows)), *rows, k)
    if n_lines >= NODE_MAJOR_LINES:
        nodes = _node_major_lines(nodes, shape, keep, line_shape)
    else:
        nodes = broadcast(nodes, (*shape, k)).reshape(-1, k)
        nodes = (nodes if keep is None else nodes[keep]).reshape(*line_shape, k)
    at_lines = lines(
        replace(engine, tp=per_line(engine.tp), dp=per_line(engine.dp), ep=per_line(engine.ep)),
        _lengths_on_lines(lengths, shape, keep, line_shape) or lengths.map(per_line),
        per_line(ttft_ms),
        per_line(tpot_ms),
        per_line(c),
        per_line(servers),
        nodes,
    )
    # The pure decode step comes from the lines' own decode pass (`evaluate`), on the engine
    # the lines already hold: another engine's constants would be worked out again.
    if whole_grid:
        grid = evaluate(at_lines, batches)
        edge = boundary_index(grid.headroom)
        found = edge >= 0
        rate = np.where(found, value_at(grid.rate_per_s, np.maximum(edge, 0.0)), 0.0)
        batch = np.where(found, value_at(batches, edge), 0.0)  # one grid: every line's batches
        below = _BelowOne(np.where(found, np.inf, grid.rate_per_s[:, 0]), grid.idle_tpot_ms[:, 0])
    else:
        # Many lines: their pools' wait terms worked out once for every evaluation.
        wait = pooled_wait(at_lines) if n_lines >= NODE_MAJOR_LINES else None

        def at(index: np.ndarray):
            b = batches[index]
            point = evaluate(at_lines, b, wait=wait)
            return point.headroom, (point.rate_per_s, b, point.idle_tpot_ms)

        bisected = bisect_edge(at, batches.size, (n_lines,), levels)
        rate, batch = bisected.value(0), bisected.value(1)
        # A line that holds nowhere was last tried at B = 1 (its `hi` is 0): its rate and
        # step there. Others are not bounded (their B = 1 values were not read).
        nowhere = bisected.lo < 0
        below = _BelowOne(
            np.where(nowhere, bisected.at_hi[0], np.inf),
            np.where(nowhere, bisected.at_hi[2], 0.0),
        )
    if rate_per_s is not None:
        below = _BelowOne(below.rate_per_s.ravel(), below.step_ms.ravel())
        rate, batch = _below_batch_one(at_lines, rate, batch, per_line(rate_per_s), below)
    if keep is not None:
        rate, batch = _spread(rate, keep), _spread(batch, keep)
    rate, batch = rate.reshape(shape[:-1]), batch.reshape(shape[:-1])
    best = first_best(rate, axis=-1)  # chunk sizes that tie on rate: the smallest
    return ColocatedPoint(rate_per_s=pick(rate, best), chunk_index=best, batch=pick(batch, best))


class _BelowOne(NamedTuple):
    """What the batch search already knows of each line at B = 1, the first grid point: its
    rate and its pure decode step (ms); inf and 0 where they were not read there (a line that
    holds somewhere). `_below_batch_one` bounds the low-load rate with them."""

    rate_per_s: np.ndarray
    step_ms: np.ndarray


# Relative margin on `_below_batch_one`'s bounds: a line is left out only where a bound
# misses by more than this, far beyond any rounding between the search's evaluation at B = 1
# and the low-load one (the same operations on other array shapes).
BOUND_MARGIN = 1e-6


def _node_major_lines(nodes: np.ndarray, shape, keep, line_shape) -> np.ndarray:
    """The rows' uncached nodes (`nodes`, broadcasting to `shape` plus the nodes' axis) laid
    out on the lines as node planes (`node_planes`: each node's lines contiguous), read with
    the nodes on the last axis: the same values as the row layout, which the lines' tail
    readings then keep and read faster on many lines."""
    k = nodes.shape[-1]
    planes = np.empty((k, *shape))
    planes[...] = np.moveaxis(nodes, -1, 0)
    planes = planes.reshape(k, -1)
    planes = (planes if keep is None else planes.compress(keep, axis=1)).reshape(k, *line_shape)
    return np.moveaxis(planes, 0, -1)


def _lengths_on_lines(lengths: Lengths, shape, keep, line_shape) -> Lengths | None:
    """`lengths.map(per_line)` as `best_points` lays lines out, every field in one copy: the
    fields share a shape (`Lengths.build`), so they are stacked, broadcast to the lines and
    split again (one array operation instead of one per field; the same values). None where
    the fields' shapes differ (the caller maps them one by one)."""
    fields = vars(lengths)
    values = list(fields.values())
    try:
        stacked = np.array(values, dtype=float)
    except ValueError:  # "inhomogeneous shape"
        return None
    flat = broadcast(stacked, (len(values), *shape)).reshape(len(values), -1)
    if keep is not None:
        flat = flat[:, keep]
    return Lengths(**dict(zip(fields, flat.reshape(len(values), *line_shape), strict=True)))


def _bisection_levels(engine: Engine, batches: np.ndarray, n_lines: int) -> int:
    """Bisection steps per evaluation (`batch_edge.bisect_edge`): several where the lines are
    few enough that an evaluation's fixed calls outweigh its points (`EVALUATION_POINTS`).

    One step at a time on grids past the engine's cap per DP rank: there `_headroom` adds the
    cap's ratio at every point of an evaluation once any point passes it, so a point's
    headroom would depend on which others share its evaluation."""
    if float(batches[-1]) > engine.eff.max_decode_batch:
        return 1
    return levels_for(n_lines, batches.size, EVALUATION_POINTS)


def _below_batch_one(
    at: Lines, rate: np.ndarray, batch: np.ndarray, wanted: np.ndarray, one: _BelowOne | None
):
    """Lines where no batch on the grid (from 1) meets the targets may still carry the
    workload's own rate (`wanted`, req/s per line) below one sequence in flight per replica
    (`low_load`); they deploy with a batch of 1. Only where the line's replicas carry that rate
    there: the low-load line is the rate sizing's reading near idle, not a capacity to compare
    modes on at loads the workload does not have. `at` holds one entry per line (`best_points`
    lays them out), so its fields index by line.

    The low-load rate is a share (at most 1) of the rate at B = 1, and 0 where the idle TPOT
    misses its target or no sequence's KV fits. `one` (what the search read at B = 1) bounds
    it: a line whose replicas could not carry `wanted` even at the whole B = 1 rate, or whose
    idle TPOT misses, gets 0 without the evaluation (its p99 TTFT bisection is most of the
    cost, and on the examples no failing line is rescued). None evaluates every failing line
    (the reference the tests compare with)."""
    failing = rate.ravel() <= 0.0  # arrays, one entry per line (`best_points`' own)
    if one is not None and failing.any():
        need = wanted.ravel() * (1.0 - 1e-9) * (1.0 - BOUND_MARGIN)
        tpot = at.tpot_ms.ravel() * ((1.0 + 1e-9) * (1.0 + BOUND_MARGIN))
        failing &= (
            (one.rate_per_s * at.servers.ravel() >= need)
            & (one.step_ms.ravel() <= tpot)
            & (at.inverse_memory_limit.ravel() <= 1.0)
        )
    if not failing.any():
        return rate, batch

    def sub(a) -> np.ndarray:
        return np.asarray(a)[failing]

    e = at.engine
    low = lines(
        replace(e, tp=sub(e.tp), dp=sub(e.dp), ep=sub(e.ep)),
        at.lengths.map(sub),
        sub(at.ttft_ms),
        sub(at.tpot_ms),
        sub(at.chunk),
        sub(at.servers),
    )
    rate, batch = np.array(rate, dtype=float), np.array(batch, dtype=float)
    low_rate = rate_below_batch_one(low, evaluate(low, 1.0, with_ttft=True, with_headroom=False))
    carries = low_rate * np.ravel(sub(at.servers)) >= np.ravel(sub(wanted)) * (1.0 - 1e-9)
    low_rate = np.where(carries, low_rate, 0.0).reshape(rate[failing].shape)
    rate[failing] = low_rate
    batch[failing] = np.where(low_rate > 0.0, 1.0, 0.0)
    return rate, batch


def _spread(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Values of the kept lines back on every line, 0 on the others."""
    out = np.zeros(keep.shape)
    out[keep] = np.ravel(values)
    return out
