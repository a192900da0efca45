"""The simulator's step times are the calculator's: grid values come from `iteration_ms`, and
interpolating between them (and fast-forwarding runs of iterations) stays within a fraction of
a percent of calling it directly."""

from pathlib import Path

import numpy as np
import pytest

from disagg_decider.calc.physics.step import iteration_ms
from disagg_decider.sim.batch import DecodeBatch, run_ms, steps_within
from disagg_decider.sim.run import engine
from disagg_decider.sim.steps import DecodeTable, MixedTable
from disagg_decider.workload import load_workload, resolve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", params=["rag-8k-h200-rdma-dynamo", "deepseek-v3-32xh200-colocate"])
def eng(request):
    r = resolve(load_workload(ROOT / "examples" / f"{request.param}.yaml"))
    return engine(r, 8)


def test_decode_table_matches_iteration_ms(eng) -> None:
    table = DecodeTable(eng, 64, 20000)
    rng = np.random.default_rng(0)
    for _ in range(200):
        b, ctx = int(rng.integers(1, 65)), float(rng.uniform(0, 20000))
        direct = float(iteration_ms(eng, float(b), ctx, 0.0, 0.0))
        assert table.ms(b, ctx) == pytest.approx(direct, rel=2e-3)


def test_mixed_table_matches_iteration_ms(eng) -> None:
    table = MixedTable(eng, 64, 20000, 2048, 16000)
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(300):
        b = int(rng.integers(0, 65))
        ctx, tokens, s = rng.uniform(0, 20000), rng.uniform(1, 2048), rng.uniform(0, 16000)
        direct = float(iteration_ms(eng, float(b), ctx, tokens, s))
        worst = max(worst, abs(table.ms(b, ctx, tokens, s) / direct - 1.0))
    # The fitted pass (issue 24) is a sum of maxima (weights read against GEMMs, KV read
    # against attention FLOPs) whose kinks move with batch, context and prompt context at once,
    # which a multilinear table cannot follow exactly: on DeepSeek-V3 TP8 (MLA) the worst of
    # 300 points is 4.3% with the square-root context grid (16.8% with the even 9-point grid
    # it had); on Llama-3.3-70B 0.4% (0.8%). A table per side of each maximum would close it.
    assert worst < 0.05


def test_fast_forwarded_run_matches_iteration_by_iteration(eng) -> None:
    """A decode run of k iterations planned as one event lasts what k direct calls add up to."""
    table = DecodeTable(eng, 32, 10000)
    batch = DecodeBatch()
    for i in range(16):
        batch.join(i, 3000.0 + 50 * i, 400 + i)
    k = batch.steps_to_next_finish()
    first = table.ms(batch.size, batch.mean_context())
    last = table.ms(batch.size, batch.mean_context(k - 1))
    planned = run_ms(first, (last - first) / (k - 1), k)
    direct = sum(float(iteration_ms(eng, 16.0, batch.mean_context(j), 0.0, 0.0)) for j in range(k))
    assert k == 400
    assert planned == pytest.approx(direct, rel=2e-3)


def test_steps_within_never_cuts_an_iteration() -> None:
    first, slope = 10.0, 0.5
    for elapsed in (0.0, 5.0, 10.0, 10.1, 33.0, 1e6):
        m = steps_within(first, slope, elapsed, 50)
        assert 1 <= m <= 50
        assert run_ms(first, slope, m) >= min(elapsed, run_ms(first, slope, 50))
        if m > 1:
            assert run_ms(first, slope, m - 1) < elapsed


def test_decode_batch_tracks_contexts_and_finishes() -> None:
    batch = DecodeBatch()
    batch.join(0, 100.0, 3)
    batch.advance(1)
    batch.join(1, 200.0, 5)
    assert batch.mean_context() == pytest.approx((101 + 200) / 2)
    assert batch.steps_to_next_finish() == 2
    batch.advance(2)
    assert batch.pop_finished() == [0]
    assert batch.mean_context() == pytest.approx(202)
