"""Issue 27 (fifth round): `passes.stacked_ms` prices a pass at several batches in one call, and
each slice has the bits its own `PassTerms.ms` call gives: on the roofline and the fitted
physics, dense and MoE models, pure decode and chunk-carrying passes, and operands with more
dimensions than the batches (the stacked axis must not pair with theirs)."""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.physics.passes import pass_terms, stacked_ms
from disagg_decider.workload import load_workload, resolve
from tests.conftest import ROOT

EXAMPLES = ("rag-8k-h200-rdma-dynamo", "deepseek-v3-32xh200-colocate", "two-gpu-colocate")


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_slice_is_its_own_call(name) -> None:
    r = resolve(load_workload(ROOT / "examples" / f"{name}.yaml"))
    # Three layouts down the first axis (TP 1, 2, 4), three contexts: operands (3, 1); the
    # batches are (5,) (the stacked axis must not pair with the layouts' 3) or (3, 5).
    tp = np.array([1.0, 2.0, 4.0]).reshape(-1, 1)
    engine = engine_for(r, tp, np.ones_like(tp), np.ones_like(tp))
    context = np.array([800.0, 4000.0, 9000.0]).reshape(-1, 1)
    empty = pass_terms(engine, context, 0.0)
    full = pass_terms(engine, context, context / 2.0)
    b = np.array([1.0, 3.0, 8.0, 30.0, 120.0])
    b99 = b + np.array([[0.5], [2.0], [7.0]])
    room = np.maximum(2048.0 - b, 1.0)
    got = stacked_ms(empty, (b, b + 1.0, b99), 0.0)
    for i, batch in enumerate((b, b + 1.0, b99)):
        np.testing.assert_array_equal(got[i], np.broadcast_to(empty.ms(batch, 0.0), got[i].shape))
    got = stacked_ms(full, (b, b99), (room, room + 3.0))
    for i, (batch, tokens) in enumerate(((b, room), (b99, room + 3.0))):
        np.testing.assert_array_equal(got[i], np.broadcast_to(full.ms(batch, tokens), got[i].shape))
    assert got.shape == (2, 3, 5)
    # Batches of one dimension against operands of two: the stacked axis stays apart.
    got = stacked_ms(empty, (b, b + 1.0), 0.0)
    assert got.shape == (2, 3, 5)
    np.testing.assert_array_equal(got[1], empty.ms(b + 1.0, 0.0))
