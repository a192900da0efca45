"""Issue 27 (sixth round): `passes.paired_ms` prices a colocated line's pure decode pass and its
chunk-carrying pass in one call (`colocated.evaluate`, `colocated_prompts.prompt_queue`), and
each slice has the bits, and the shape, of the two `stacked_ms` calls it replaces: on the
fitted physics and the plain roofline, dense and MoE models; where it may not (shapes that
differ, passes that do not share their terms) it makes the two calls."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.physics import passes, step_split
from disagg_decider.calc.physics.passes import (
    paired_ms,
    pass_terms,
    stacked_ms,
    with_prefill_context,
)
from disagg_decider.workload import load_workload, resolve
from tests.conftest import ROOT

EXAMPLES = ("rag-8k-h200-rdma-dynamo", "deepseek-v3-32xh200-colocate", "two-gpu-colocate")


def _passes(name: str, roofline: bool):
    r = resolve(load_workload(ROOT / "examples" / f"{name}.yaml"))
    tp = np.array([1.0, 2.0, 4.0, 8.0]).reshape(-1, 1)
    engine = engine_for(r, tp, np.ones_like(tp), np.array([1.0, 1.0, 4.0, 8.0]).reshape(-1, 1))
    if roofline:  # the plain roofline (no fitted attention term)
        engine = replace(engine, eff=engine.eff.model_copy(update={"attention_mfu": None}))
    context = np.array([800.0, 4000.0, 9000.0, 200.0]).reshape(-1, 1)
    empty = pass_terms(engine, context, 0.0)
    return empty, with_prefill_context(empty, context / 2.0 + 300.0)


def _counted(ms, calls: list[int]):
    def counted(*args):
        calls.append(1)
        return ms(*args)

    return counted


def _bytes(arrays) -> list:
    return [(a.shape, a.tobytes()) for a in arrays]


@pytest.mark.parametrize("roofline", [False, True])
@pytest.mark.parametrize("name", EXAMPLES)
def test_one_call_gives_the_two_calls_bits(name, roofline, monkeypatch) -> None:
    empty, full = _passes(name, roofline)
    b = np.array([1.0, 2.0, 3.0, 8.0, 30.0, 120.0]) + np.zeros((4, 1))
    b99 = b + np.array([[0.5], [2.0], [7.0], [0.0]])
    room, room99 = np.maximum(2048.0 - b, 1.0), np.maximum(2048.0 - b99, 1.0)
    for batches, tokens in (((b, b + 1.0, b99), (room, room, room99)), ((b, b + 1.0), (room,) * 2)):
        want = stacked_ms(empty, batches, 0.0), stacked_ms(full, batches, tokens)
        calls: list[int] = []
        monkeypatch.setattr(passes.PassTerms, "ms", _counted(passes.PassTerms.ms, calls))
        got = paired_ms(empty, full, batches, batches, tokens)
        monkeypatch.undo()
        assert _bytes(got) == _bytes(want)
        assert len(calls) == 1  # one pass priced both
    # Terms worked out on their own (not shared) and prompts wider than the pure decode
    # batches: the two calls, the same answers.
    apart = pass_terms(empty.engine, empty.decode_context, full.prefill_context)
    got = paired_ms(empty, apart, (b,), (b,), (room,))
    assert _bytes(got) == _bytes((stacked_ms(empty, (b,), 0.0), stacked_ms(apart, (b,), (room,))))
    flat = b[0]  # (6,): the prompts' (4, 6) is wider
    got = paired_ms(empty, full, (flat,), (flat,), (room,))
    want = stacked_ms(empty, (flat,), 0.0), stacked_ms(full, (flat,), (room,))
    assert _bytes(got) == _bytes(want)


def test_large_passes_are_priced_apart(monkeypatch) -> None:
    """Past `PAIRED_MAX_POINTS` the prompt's terms on the pure decode slots cost more than a
    call: two calls, the same answers."""
    empty, full = _passes("rag-8k-h200-rdma-dynamo", roofline=False)
    b = np.linspace(1.0, 200.0, passes.PAIRED_MAX_POINTS // 4 + 1) + np.zeros((4, 1))
    room = np.maximum(2048.0 - b, 1.0)
    calls: list[int] = []
    monkeypatch.setattr(passes.PassTerms, "ms", _counted(passes.PassTerms.ms, calls))
    got = paired_ms(empty, full, (b, b + 1.0), (b, b + 1.0), (room, room))
    assert len(calls) == 2
    monkeypatch.undo()
    want = stacked_ms(empty, (b, b + 1.0), 0.0), stacked_ms(full, (b, b + 1.0), (room, room))
    assert _bytes(got) == _bytes(want)


@pytest.mark.parametrize("name", EXAMPLES)
def test_passes_that_all_carry_prompts_read_the_prefill_values_as_one_number(name) -> None:
    """Issue 27 (seventh round): where every element of a pass carries prompt tokens, the
    fitted pass takes the prefill MFU and all-to-all as one number instead of selecting them
    at each element: each element's bits are those it has beside a pure decode element
    (which keeps the selection), on dense and MoE (expert-parallel) layouts."""
    _, full = _passes(name, roofline=False)
    b = np.linspace(1.0, 600.0, 300) + np.zeros((4, 1))
    assert b.size >= step_split.ONE_NUMBER_MIN_POINTS  # (a batch's passes: smaller select)
    room = np.maximum(2048.0 - b, 1.0)
    alone = full.ms(b, room)
    with_decode = full.ms(np.concatenate([b, b[:, :1]], axis=1), np.pad(room, ((0, 0), (0, 1))))
    assert alone.shape == b.shape
    assert alone.tobytes() == np.ascontiguousarray(with_decode[:, :-1]).tobytes()
    assert not np.array_equal(with_decode[:, -1], full.ms(b[:, :1], room[:, :1])[:, 0])
