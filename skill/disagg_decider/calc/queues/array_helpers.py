"""Small array helpers that keep the verdict path off costly numpy corners.

`np.unique` consults `np.ma.is_masked`, which imports `numpy.ma` (about 15-20 ms at start-up)
for arrays that can never be masked; the grids here are plain float arrays.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

try:  # the ufunc `np.clip` ends in for arrays (numpy/_core/_methods.py `_clip`)
    from numpy._core.umath import clip as clip_ufunc
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.umath import clip as clip_ufunc


def sorted_unique(values) -> np.ndarray:
    """The distinct values, ascending: what `np.unique` returns for a plain float array."""
    ordered = np.sort(np.asarray(values, dtype=float).reshape(-1))
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def broadcast(a, shape: tuple[int, ...]) -> np.ndarray:
    """The elements `np.broadcast_to(a, shape)` gives, for reading only, without its cost.

    `np.broadcast_to` builds an iterator in Python (about 2 us a call, thousands of calls a
    decision on arrays of a dozen elements). Here `a` is returned as is where it already has
    the shape, else copied into a fresh array of it (the same values; not broadcastable
    raises as `np.broadcast_to` does).
    """
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.shape == shape:
        return a
    out = np.empty(shape, dtype=a.dtype)
    out[...] = a
    return out


def shape_of(a) -> tuple[int, ...]:
    """`np.shape(a)`: an array's own `shape` read directly (`np.shape` is two Python-level
    calls, its dispatcher and itself, for what an attribute holds)."""
    return a.shape if type(a) is np.ndarray else np.shape(a)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """`np.broadcast_shapes(*shapes)` by comparing the dimensions: numpy's builds an empty
    array per shape and a broadcast object, a dozen calls, for what a decision asks hundreds
    of times of two or three short shapes. Shapes that do not broadcast go to numpy, for its
    error."""
    out: tuple[int, ...] = ()
    for shape in shapes:
        if shape == out or shape == ():
            continue
        if out == ():
            out = shape
            continue
        longer, shorter = (out, shape) if len(out) >= len(shape) else (shape, out)
        lead = len(longer) - len(shorter)
        dims = list(longer[:lead])
        for a, b in zip(longer[lead:], shorter, strict=True):
            if a == b or b == 1:
                dims.append(a)
            elif a == 1:
                dims.append(b)
            else:
                return np.broadcast_shapes(*shapes)
        out = tuple(dims)
    return out


def broadcast_flat(a, shape: tuple[int, ...]) -> np.ndarray:
    """`np.broadcast_to(a, shape).reshape(-1)`, by `broadcast`: for reading only."""
    return broadcast(a, shape).reshape(-1)


# `clip(a, lo, hi)` is `np.clip(a, lo, hi)`: the ufunc itself, without the two Python layers
# in front of it (about 1.5 us of its 2 us on a dozen elements), nor a function of ours around
# it (a frame per call, ~130 calls a decision). For float or integer `a` and bounds inside its
# dtype's range (where `np.clip` passes them through).
clip = clip_ufunc


def count_at_most(values: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """How many of each row's values (last axis) are <= its limit: `np.add.reduce(values <=
    limits[..., None], axis=-1)`, the same integers.

    Summing booleans along a short last axis is one of numpy's slow reductions (a cast and an
    inner loop per row); a product of the 0/1 bytes with a row of ones, exact in uint8 for
    fewer than 256 columns, counts the same at 2-3x the speed on hundreds of rows.
    """
    mask = values <= limits[..., None]
    k = mask.shape[-1]
    if k >= 256:
        return np.add.reduce(mask, axis=-1)
    return mask.view(np.uint8) @ _ones_uint8(k)


def node_major_sum(x: np.ndarray) -> np.ndarray:
    """`np.add.reduce(y, axis=-1)` of y = `np.moveaxis(x, 0, -1)` laid out in rows (C order),
    the same bits, from `x` with the nodes on its first axis (each node's values contiguous).

    numpy sums a row of 8 to 128 values with eight accumulators (`pairwise_sum`: value j
    goes to accumulator j mod 8, the accumulators are added as ((0 + 1) + (2 + 3)) + ((4 + 5)
    + (6 + 7)), then the values past the last multiple of 8 one by one, the whole added to
    the reduction's initial +0.0). Along a short last
    axis that is one inner-loop call per row, most of the reduction's cost on thousands of
    rows; here the same additions run across rows, a handful of calls on whole node planes
    (2-3x faster on 10,000 x 25). Other lengths go to numpy on a row-major copy.
    """
    k = x.shape[0]
    if not 8 <= k <= 128:
        return np.add.reduce(np.ascontiguousarray(np.moveaxis(x, 0, -1)), axis=-1)
    whole = k - k % 8
    acc = x[0:8] + x[8:16] if whole > 8 else x[0:8].copy()
    for i in range(16, whole, 8):
        acc += x[i : i + 8]
    pairs = acc[0::2] + acc[1::2]  # (0 + 1), (2 + 3), (4 + 5), (6 + 7)
    out = pairs[0] + pairs[1]
    out += pairs[2] + pairs[3]
    for i in range(whole, k):
        out += x[i]
    out += 0.0  # the reduction starts from its identity, +0.0: a sum of -0.0s reads +0.0
    return out


def planes_of(nodes: np.ndarray) -> np.ndarray | None:
    """The node planes of `nodes` (nodes on its last axis) where its memory holds them so
    (`node_planes`): `np.moveaxis(nodes, -1, 0)` when that is C-contiguous and `nodes` itself
    is not (an array laid out either way reads as rows: the row forms are the reference).
    Strided or broadcast arrays are told apart by the last axis' stride, without a call."""
    if type(nodes) is not np.ndarray or nodes.ndim < 2 or nodes.flags.c_contiguous:
        return None
    if nodes.strides[-1] != nodes.itemsize * (nodes.size // max(nodes.shape[-1], 1)):
        return None
    planes = nodes.transpose(nodes.ndim - 1, *range(nodes.ndim - 1))
    return planes if planes.flags.c_contiguous else None


@functools.cache
def _ones_uint8(k: int) -> np.ndarray:
    ones = np.ones(k, dtype=np.uint8)
    ones.setflags(write=False)
    return ones


# Values this close count as one: the last bits of exp and log differ between CPUs (about
# 1e-16 relative, a few ulp after a chain of them), so a choice between two options whose values
# differ by less must not follow those bits (`tests/test_golden_outputs.py` moves them by 4 ulp).
TIE_REL = 1e-9


def first_best(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """`argmax` along `axis` that takes the first of near-equal maxima (within `TIE_REL`): the
    same option on every CPU where two options tie in exact arithmetic."""
    v = np.asarray(values, dtype=float)
    top = np.max(v, axis=axis, keepdims=True)
    near = v >= top - TIE_REL * np.abs(top)
    return np.argmax(near, axis=axis)


def map_fields(record, fn, skip: tuple[str, ...] = (), **given):
    """A dataclass `record` rebuilt with `fn` applied to each field that is not `given` (taken
    as is) or skipped (left to its default); a None field stays None. One way to take rows of
    a record of arrays, whatever its fields."""
    values = {
        f.name: None if getattr(record, f.name) is None else fn(getattr(record, f.name))
        for f in dataclasses.fields(record)
        if f.init and f.name not in given and f.name not in skip
    }
    return type(record)(**values, **given)
