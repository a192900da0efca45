"""The colocated model on mixed traffic (issue 14g), pinned against the simulator.

On a 70/30 chat/RAG mix the colocated mode read 1.07x the simulator's goodput (median over
`benchmarks/conditional_vs_sim.py`) and its p99 TPOT at its priced rate ~12% low. Two things
the one-log-normal pricing missed: a chunk's attention reads the prompt before it, and most
prompt tokens belong to the long class (the size-biased prompt, ~4x the mean one); and the
decode batch's KV read varies with which classes hold the seats (the decode pools' formula,
`decode.read_context`). One class keeps its pricing bit for bit (`tests/golden_outputs.py`).
"""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider.calc.replicas import decode
from disagg_decider.classes import Component, class_size_biased
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.sim.goodput import replay_at
from disagg_decider.workload import resolve, with_rate
from tests.test_conditional import bimodal


@pytest.fixture(scope="module")
def colocated_at_capacity():
    """The bimodal mix's colocated pools, simulated at the calculator's colocated capacity."""
    w = bimodal()
    r, v = resolve(w), decide(w)
    rate = v.colocated.max_rate_per_s
    priced = decide(with_rate(w, rate * 0.999)).colocated
    setup = run.setup(r, v)
    tpot, attained = [], []
    for seed in (1, 2, 3):
        reqs = replay_at(run.synthetic_requests(r, 3000, seed=seed), rate)
        out = run.simulate_mode(setup, "colocated", reqs)
        steady = metrics.tpot_ms(out, reqs)[metrics.steady_window(3000)]
        tpot.append(float(np.percentile(steady[np.isfinite(steady)], 99)))
        attained.append(metrics.attainment(out, reqs, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0])
    return priced, tpot, attained


def test_mixed_colocated_tpot_tail_agrees_with_the_simulator(colocated_at_capacity) -> None:
    # Measured: calculator 19.5 ms at 15.15 req/s; simulated 19.7-19.8 ms (seeds 1-3). Before
    # issue 14g the calculator read 17.7 ms at its then capacity, 17.66 req/s (simulated 20.2).
    priced, tpot, _ = colocated_at_capacity
    simulated = float(np.mean(tpot))
    assert 0.93 < priced.tpot_p99_ms / simulated < 1.07, (priced.tpot_p99_ms, tpot)


def test_mixed_colocated_capacity_is_not_optimistic(colocated_at_capacity) -> None:
    # At the priced capacity the simulated pools keep 99% of steady-state requests within both
    # targets (measured 99.3-99.95%, seeds 1-3); before issue 14g the priced 17.66 req/s
    # missed the TTFT target on ~13% (simulated goodput 16.6 req/s).
    _, _, attained = colocated_at_capacity
    assert float(np.mean(attained)) >= 0.99, attained


def test_size_biased_prompt_counts_the_spread_between_classes_only() -> None:
    chat = Component(0.7, 400.0, 0.47, 0.0, 150.0, 0.47)
    rag = Component(0.3, 16000.0, 0.17, 0.0, 300.0, 0.47)
    mean = lambda c: c.prompt_p50 * np.exp(c.prompt_sigma**2 / 2)  # noqa: E731
    mix_mean = 0.7 * mean(chat) + 0.3 * mean(rag)
    # Two identical classes: the mean (the one-class convention); the bimodal mix: most
    # prompt tokens belong to RAG prompts, ~3x the mean prompt.
    half = Component(0.5, 400.0, 0.47, 0.0, 150.0, 0.47)
    assert class_size_biased([half, half]) == pytest.approx(mean(half), rel=1e-12)
    biased = class_size_biased([chat, rag])
    assert biased == pytest.approx((0.7 * mean(chat) ** 2 + 0.3 * mean(rag) ** 2) / mix_mean)
    assert biased > 2.5 * mix_mean  # 2.95x


def test_read_context_widens_only_with_a_context_spread() -> None:
    ctx, b = np.array([2000.0]), np.array([40.0])
    b99 = b + 10.0
    cap = np.array([200.0])
    plain = decode.read_context(ctx, b, b99 - b, b99, cap, 0.0)
    assert plain == pytest.approx(ctx)
    wide = decode.read_context(ctx, b, b99 - b, b99, cap, 1.0)
    # KV read at b + 10 sqrt(2) seats of mean context, spread over b99 seats
    assert wide == pytest.approx(ctx * (40.0 + 10.0 * np.sqrt(2.0)) / 50.0)
    capped = decode.read_context(ctx, b, b99 - b, b99, np.array([52.0]), 3.0)
    assert capped == pytest.approx(ctx * 52.0 / 50.0)
