"""Engine-level constants shared between equal engines, and the cached properties they use.

Peak FLOPs, ms per byte, all-reduce and all-to-all coefficients, KV room, ... depend only on
the model, GPU, dtypes, parallel layout and efficiency; a decision builds dozens of engines
for the same few candidates (`replace(engine, tp=...)` in each search). `step.Engine` shares
them between equal engines through `shared_table`, computed once per process. Only for
layouts of a few candidates (a single decision's scale; a batch's arrays amortise the
computation anyway), and never anything that depends on a workload's traffic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from disagg_decider.catalog import Gpu, ModelSpec
from disagg_decider.workload import Efficiency

_SHARED_MAX_ENTRIES = 1024  # cleared when full
_SHARED_MAX_CANDIDATES = 64
_shared: dict[tuple, tuple[ModelSpec, Gpu, dict[str, object]]] = {}


def shared_table(
    model: ModelSpec, gpu: Gpu, layout: tuple, eff: Efficiency, rest: tuple, steps: Any
) -> dict[str, object] | None:
    """The shared table of an engine of this model and GPU, TP/DP/EP values (`layout`),
    efficiency and other fields (`rest`: dtypes, scale-up domain, RDMA figure), step source;
    None where a layout holds too many candidates to share.

    Keyed by the model and GPU objects themselves (the entry holds them, so their ids cannot
    be reused while it lives; the calculator never changes a model or GPU in place: it
    copies), the layout's values, the efficiency by value and the rest as given.
    """
    keys = (_layout_key(layout[0]), _layout_key(layout[1]), _layout_key(layout[2]))
    if None in keys:
        return None
    key = (id(model), id(gpu), keys, _efficiency_key(eff), rest, id(steps))
    entry = _shared.get(key)
    if entry is None:
        if len(_shared) >= _SHARED_MAX_ENTRIES:
            _shared.clear()
        entry = _shared[key] = (model, gpu, {})
    return entry[2]


def _layout_key(value) -> tuple | None:
    """The value of a TP/DP/EP field as a key (its type, dtype, shape and bytes; a plain int
    by itself), or None when it holds too many candidates to share."""
    if type(value) is int and _SHARED_MAX_CANDIDATES > 0:
        return (int, value)
    a = value if type(value) is np.ndarray else np.asarray(value)
    if a.size > _SHARED_MAX_CANDIDATES:
        return None
    return (type(value), a.dtype.str, a.shape, a.tobytes())


# `_efficiency_key` per efficiency object: a decision builds dozens of engines on the same
# object (`replace(engine, tp=...)`). Held by id with the object itself (so the id is not
# reused while the entry lives) and a copy of its fields, compared on every hit: an object
# changed in place since gets a fresh key.
_efficiency_keys: dict[int, tuple[Efficiency, dict[str, object], tuple]] = {}
_EFFICIENCY_KEYS_MAX = 256  # cleared when full


def _efficiency_key(eff: Efficiency) -> tuple:
    """Every field of the efficiency settings, by value (lists as tuples)."""
    fields = vars(eff)
    hit = _efficiency_keys.get(id(eff))
    if hit is not None and hit[0] is eff and hit[1] == fields:
        return hit[2]
    snapshot = {k: list(v) if isinstance(v, list) else v for k, v in fields.items()}
    key = (type(eff), *(tuple(v) if isinstance(v, list) else v for v in snapshot.values()))
    if len(_efficiency_keys) >= _EFFICIENCY_KEYS_MAX:
        _efficiency_keys.clear()
    _efficiency_keys[id(eff)] = (eff, snapshot, key)
    return key


def _frozen(value):
    """A shared value, read-only: arrays copied (a value may be a field's own array, which
    its owner may still write) and marked read-only, so no user of the cache can change it."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.setflags(write=False)
        return value
    if isinstance(value, tuple):
        return tuple(_frozen(v) for v in value)
    return value


class once:
    """`functools.cached_property` without its lock and double lookup (Python 3.11's holds an
    RLock per property): computed on first access, then stored in the instance's `__dict__`,
    which every later access reads before the class. The calculator builds dozens of engines
    and hundreds of pass terms per decision and reads each value once or twice, so the first
    access is most of them; a decision runs on one thread."""

    def __init__(self, compute) -> None:
        self.compute, self.name = compute, compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


class shared_property(once):
    """A cached property whose value is shared between engines equal in every field
    (`Engine._constants`); computed by `compute` the first time, exactly as before."""

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        table, name = instance._constants, self.name
        if table is None:
            value = self.compute(instance)
        elif name in table:
            value = table[name]
        else:
            value = table[name] = _frozen(self.compute(instance))
        instance.__dict__[name] = value
        return value
