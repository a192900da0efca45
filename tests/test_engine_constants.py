"""Engine-level constants shared between equal engines (`engine_cache.shared_property`).

Sharing may only save work: every constant equals, bit for bit, what an engine computes on
its own; engines that differ in any field (efficiency by value, layout, dtype, model, GPU)
never share; shared arrays are read-only copies, so neither a user of the cache nor the
owner of a TP array can change what another engine reads.
"""

import numpy as np
import pytest

from disagg_decider import catalog
from disagg_decider.calc.physics import engine_cache
from disagg_decider.calc.physics.step import Engine
from disagg_decider.workload import Efficiency

NAMES = (
    "gpus",
    "peak_flops",
    "hbm_bytes_per_s",
    "ms_per_byte",
    "ms_per_flop",
    "dense_weights_ms",
    "expert_parallel",
    "linear_flops_per_token",
    "extra_weight_bytes",
    "allreduce_coefficients",
    "decode_alltoall",
    "prefill_alltoall",
    "_kv_copies",
    "fixed_step_ms",
)


def _engines():
    v3, llama = catalog.get_model("deepseek-v3"), catalog.get_model("llama-3.3-70b")
    h200, b200 = catalog.get_gpu("h200"), catalog.get_gpu("b200")
    tp = np.array([1, 2, 4, 8])
    yield Engine(llama, h200, "bf16", "bf16", tp, Efficiency())
    yield Engine(llama, b200, "fp8", "fp8", 4, Efficiency(decode_mbu=0.7))
    yield Engine(v3, h200, "fp8", "bf16", 1, Efficiency(), dp=8, ep=8, rdma_gb_per_s=40.0)
    yield Engine(v3, h200, "fp8", "bf16", np.array([8, 16]), Efficiency(), dp=1, ep=1)


def _values(engine: Engine) -> dict:
    out = {name: getattr(engine, name) for name in NAMES}
    out["kv_capacity_bytes"] = engine.kv_capacity_bytes()
    return out


def _same_bits(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(map(_same_bits, a, b))
    if a is None or b is None:
        return a is b
    return np.asarray(a).tobytes() == np.asarray(b).tobytes() and np.shape(a) == np.shape(b)


def test_shared_constants_are_the_engines_own(monkeypatch):
    engine_cache._shared.clear()
    for engine in _engines():
        fresh = Engine(**{f: getattr(engine, f) for f in engine.__dataclass_fields__})
        first, again = _values(engine), _values(fresh)  # the second one reads the cache
        assert fresh._constants is engine._constants is not None
        monkeypatch.setattr(engine_cache, "_SHARED_MAX_CANDIDATES", 0)
        alone = Engine(**{f: getattr(engine, f) for f in engine.__dataclass_fields__})
        assert alone._constants is None
        own = _values(alone)
        monkeypatch.undo()
        for name, value in own.items():
            assert _same_bits(first[name], value), name
            assert _same_bits(again[name], value), name


def test_engines_that_differ_do_not_share():
    engine_cache._shared.clear()
    llama, h200 = catalog.get_model("llama-3.3-70b"), catalog.get_gpu("h200")
    base = Engine(llama, h200, "bf16", "bf16", 4, Efficiency())
    others = [
        Engine(llama, h200, "bf16", "bf16", 4, Efficiency(decode_mbu=0.71)),
        Engine(llama, h200, "bf16", "bf16", 4, Efficiency(chunk_tokens=[512])),
        Engine(llama, h200, "fp8", "bf16", 4, Efficiency()),
        Engine(llama, h200, "bf16", "bf16", 8, Efficiency()),
        Engine(llama, h200, "bf16", "bf16", np.array(4), Efficiency()),  # same value, other type
        Engine(llama, h200, "bf16", "bf16", 4.0, Efficiency()),
        Engine(llama, catalog.get_gpu("b200"), "bf16", "bf16", 4, Efficiency()),
        Engine(catalog.get_model("deepseek-v3"), h200, "bf16", "bf16", 4, Efficiency()),
    ]
    tables = [e._constants for e in [base, *others]]
    assert all(t is not None for t in tables)
    assert len({id(t) for t in tables}) == len(tables)
    assert base.ms_per_byte != others[0].ms_per_byte  # a changed efficiency is seen


def test_shared_arrays_are_read_only_copies():
    engine_cache._shared.clear()
    tp = np.array([1.0, 2.0, 4.0])
    v3, h200 = catalog.get_model("deepseek-v3"), catalog.get_gpu("h200")
    mla = Engine(v3, h200, "fp8", "bf16", tp, Efficiency())
    copies = mla._kv_copies  # MLA: the KV copies are the TP degrees themselves
    assert np.array_equal(copies, tp) and copies is not tp
    tp[0] = 3.0  # the owner may still write its array; the shared value does not move
    assert copies[0] == 1.0 and tp.flags.writeable
    with pytest.raises(ValueError):
        mla.gpus[0] = 5
    with pytest.raises(ValueError):
        mla.kv_capacity_bytes()[0] = 0.0


def test_large_layouts_are_not_shared():
    many = np.arange(1, engine_cache._SHARED_MAX_CANDIDATES + 2)
    llama, h200 = catalog.get_model("llama-3.3-70b"), catalog.get_gpu("h200")
    assert Engine(llama, h200, "bf16", "bf16", many, Efficiency())._constants is None


def test_an_efficiency_changed_in_place_gets_its_own_constants():
    """The efficiency's key is kept per object (a decision builds dozens of engines on one):
    a field or a list changed in place since must not reuse the old values' constants."""
    engine_cache._shared.clear()
    llama, h200 = catalog.get_model("llama-3.3-70b"), catalog.get_gpu("h200")
    eff = Efficiency()
    first = Engine(llama, h200, "bf16", "bf16", 4, eff)
    before = first.ms_per_byte
    assert Engine(llama, h200, "bf16", "bf16", 4, eff)._constants is first._constants
    eff.chunk_tokens.append(12345)
    listed = Engine(llama, h200, "bf16", "bf16", 4, eff)
    assert listed._constants is not first._constants
    eff.decode_mbu = 0.5
    changed = Engine(llama, h200, "bf16", "bf16", 4, eff)
    assert changed._constants is not listed._constants
    assert changed.ms_per_byte == 1e3 / (changed.hbm_bytes_per_s * 0.5) != before
