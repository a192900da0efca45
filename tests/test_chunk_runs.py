"""The colocated TPOT tail on mixed traffic with long prompts (issue 18a), against the simulator.

A mix of short chat turns and a few 22K-token RAG prompts on Llama-3.3-70B (the seeded mix-58
of `benchmarks/conditional_vs_sim.py`, rounded): before issue 18a the calculator priced its
colocated pools at chunk 1024 for 7.10 req/s with a p99 TPOT of 25.0 ms, and the simulator,
on those pools at that rate, measured 40-41 ms, 7.5-9% of requests over the 25 ms target
(goodput 4.27 req/s, calc/sim 1.66). The requests that miss are short outputs decoded
wholly inside the prompt server's busy periods (`calc/replicas/chunk_runs.py`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from disagg_decider.calc.replicas import chunk_runs
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.sim.goodput import replay_at
from disagg_decider.workload import Workload, resolve, with_rate

CHAT = {
    "prompt_tokens": {"p50": 500, "p99": 1500},
    "output_tokens": {"p50": 160, "p99": 900},
    "prefix_cache_hit_rate": 0.25,
}
RAG = {
    "prompt_tokens": {"p50": 22000, "p99": 33000},
    "output_tokens": {"p50": 200, "p99": 1200},
    "prefix_cache_hit_rate": 0.15,
}


def _workload(classes: list[dict], chunks: list[int] | None = None) -> Workload:
    data = {
        "name": "long-rag-mix",
        "model": "llama-3.3-70b",
        "weights_dtype": "fp8",
        "engine": "vllm",
        "traffic": {"requests_per_second": 1000, "classes": classes},
        "slo": {"ttft_ms": 2000, "tpot_ms": 25},
        "cluster": {"gpu": "h200", "gpus": 16, "network": "ib-ndr-400"},
    }
    if chunks:
        data["efficiency"] = {"chunk_tokens": chunks}
    return Workload.model_validate(data)


def _long_rag_mix(chunks: list[int] | None = None) -> Workload:
    return _workload([{"share": 0.81, **CHAT}, {"share": 0.19, **RAG}], chunks)


def _at_priced_rate(w: Workload) -> tuple[float, list[tuple[float, float, float]]]:
    """The calculator's p99 TPOT at its colocated capacity, and per seed the simulated
    (p99 TPOT, share of steady requests over the TPOT target, share within both targets)
    of its colocated pools at that rate."""
    r, v = resolve(w), decide(w)
    rate = v.colocated.max_rate_per_s
    priced = decide(with_rate(w, rate * 0.999)).colocated.tpot_p99_ms
    setup = run.setup(r, v)
    measured = []
    for seed in (1, 2):
        reqs = replay_at(run.synthetic_requests(r, 3000, seed=seed), rate)
        out = run.simulate_mode(setup, "colocated", reqs)
        tpot = metrics.tpot_ms(out, reqs)[metrics.steady_window(3000)]
        tpot = tpot[np.isfinite(tpot)]
        attained = metrics.attainment(out, reqs, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]
        measured.append((float(np.percentile(tpot, 99)), float(np.mean(tpot > 25.0)), attained))
    return priced, measured


def test_long_rag_mix_colocated_pools_meet_the_targets_at_the_priced_rate() -> None:
    # Measured: 5.46 req/s (chunk 512, TTFT-bound); simulated p99 TPOT 23.6 ms, no request
    # over 25 ms, 99.0-99.5% within both targets (seeds 1-2). Before: 7.10 req/s at chunk
    # 1024, 7.5-9% over the TPOT target, 90-92% within both.
    _, measured = _at_priced_rate(_long_rag_mix())
    assert max(miss for _, miss, _ in measured) <= 0.01, measured
    assert float(np.mean([ok for _, _, ok in measured])) >= 0.985, measured


def test_long_rag_mix_tpot_tail_at_chunk_1024_follows_the_simulator() -> None:
    # The TPOT model itself, where it binds (chunk pinned to 1024): calculator 25.0 ms at 4.60
    # req/s, simulated 25.9-27.9 ms (1.3-1.4% over the target; goodput 4.24 req/s). Before:
    # 25.0 ms at 7.10 req/s against 40-41 ms simulated.
    priced, measured = _at_priced_rate(_long_rag_mix([1024]))
    simulated = float(np.mean([p99 for p99, _, _ in measured]))
    assert 0.85 < priced / simulated < 1.1, (priced, measured)
    assert max(miss for _, miss, _ in measured) <= 0.02, measured


def test_near_identical_classes_price_as_one_class() -> None:
    """The mixed-traffic terms grow with the spread between the classes' mean prompts from 0,
    so classes 2% apart price within a hair of the same traffic as one class (a gate on
    "mixed or not" would jump: long prompts at chunk 1024 are exactly where it would bite)."""
    prompt = {"p50": 8000, "p99": 24000}
    output = {"p50": 160, "p99": 900}
    one = _workload([{"share": 1.0, "prompt_tokens": prompt, "output_tokens": output}], [1024])
    near = [
        {"share": 0.5, "prompt_tokens": {"p50": p50, "p99": p50 * 3}, "output_tokens": output}
        for p50 in (7920, 8080)
    ]
    a = decide(one).colocated
    b = decide(_workload(near, [1024])).colocated
    assert b.max_rate_per_s == pytest.approx(a.max_rate_per_s, rel=0.01)
    assert b.tpot_p99_ms == pytest.approx(a.tpot_p99_ms, rel=0.01)


def test_class_spread_weight_is_zero_for_one_class_and_capped_at_one() -> None:
    one = Lengths.build(2000.0, 0.5, 0.2, 200.0, 0.5)  # chunk prompt = the mean prompt
    assert float(chunk_runs.class_spread_weight(one)) == 0.0
    from dataclasses import replace

    two = replace(one, chunk_prompt_tokens=one.uncached_mean * 1.3)
    assert float(chunk_runs.class_spread_weight(two)) == pytest.approx(0.3)
    far = replace(one, chunk_prompt_tokens=one.uncached_mean * 4.5)
    assert float(chunk_runs.class_spread_weight(far)) == 1.0


def test_runs_and_window_keep_the_one_class_convention_bit_for_bit() -> None:
    room, carrying = np.array([18.0, 3.0, 0.5]), np.array([0.16, 0.4, 0.05])
    t_full, t_empty = np.array([40.0, 20.0, 9.0]), np.array([6.0, 6.0, 6.0])
    plain = np.maximum(room, 1.0) / np.maximum(1.0 - carrying, 1e-3)
    for weight in (None, np.zeros(3)):
        runs = chunk_runs.run_iterations(room, carrying, t_full, t_empty, weight)
        assert np.array_equal(runs, plain)
        window = chunk_runs.tail_window_tokens(np.full(3, 160.0), np.full(3, 0.7), weight)
        assert np.array_equal(window, np.full(3, 160.0))


def test_runs_are_the_prompt_servers_size_biased_busy_period_on_mixed_traffic() -> None:
    # mix-58 at its old priced point: 16% of iterations carry a chunk of 40 ms against 6 ms
    # decode passes, so the prompt server is busy 56% of the time.
    busy = float(chunk_runs.prompt_server_busy(0.16, 40.0, 6.0))
    assert busy == pytest.approx(0.16 * 40 / (0.16 * 40 + 0.84 * 6))
    assert 0.55 < busy < 0.57
    runs = chunk_runs.run_iterations(17.0, 0.16, 40.0, 6.0, 1.0)
    assert float(runs) == pytest.approx(17.0 / (1.0 - busy) ** 2)  # ~88, against 20 before
    half = chunk_runs.run_iterations(17.0, 0.16, 40.0, 6.0, 0.5)
    assert float(half) == pytest.approx(math.sqrt(float(runs) * 17.0 / 0.84))


@pytest.mark.parametrize("sigma", [0.3, 0.5, 0.75, 1.0])
def test_tail_window_stands_for_the_p99_over_log_normal_outputs(sigma) -> None:
    """The share's spread goes as 1 / sqrt(output): over log-normal outputs the p99 of the
    normal scale mixture, solved here, equals the one at p50 x exp(-sigma^2) within 4% up to
    sigma 0.75; at 1 the window is shorter (the tail priced a little wider)."""
    z = np.linspace(-8.0, 8.0, 4001)
    weights = np.exp(-z * z / 2.0)
    weights /= weights.sum()
    n = np.exp(sigma * z)  # outputs over their median
    erfc = np.vectorize(math.erfc)

    def tail(x: float) -> float:
        return float((weights * 0.5 * erfc(x * np.sqrt(n) / math.sqrt(2.0))).sum())

    lo, hi = 0.1, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if tail(mid) > 0.01 else (lo, mid)
    exact = (2.3263478740408408 / lo) ** 2  # the window whose normal p99 is the mixture's
    window = float(chunk_runs.tail_window_tokens(1.0, sigma, 1.0))
    if sigma <= 0.75:
        assert window == pytest.approx(exact, rel=0.04)
    else:
        assert exact * 0.8 < window < exact


def test_single_class_examples_never_take_the_mixed_path(monkeypatch) -> None:
    """Every single-class example is priced by the one-class convention: the mixed-traffic
    runs and window are never asked for (their weight is None on every line searched)."""
    from disagg_decider.workload import load_workload
    from tests.conftest import EXAMPLES

    seen = []

    def one_class_only(original):
        def call(*args):
            seen.append(args[-1])
            assert args[-1] is None, "a one-class line took the mixed-traffic terms"
            return original(*args)

        return call

    for name in ("run_iterations", "tail_window_tokens"):
        monkeypatch.setattr(chunk_runs, name, one_class_only(getattr(chunk_runs, name)))
    singles = [w for w in map(load_workload, EXAMPLES) if not w.traffic.classes]
    assert len(singles) >= 8
    for w in singles:
        decide(w)
    assert seen  # the colocated model was priced through them
