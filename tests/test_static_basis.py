"""slo.basis: static sizes both modes as static-batch planners do (calc/static.py)."""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.replicas import benchmark, decode, prefill
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.decide import decide
from disagg_decider.workload import load_workload_text, resolve

WORKLOAD = """
name: static-case
model: llama-3.1-8b
traffic: {prompt_tokens: 4000, output_tokens: 500, requests_per_second: 4}
slo: {ttft_ms: 600, tpot_ms: 25, basis: BASIS}
cluster: {gpu: h200, gpus: 8}
"""


def _verdict(basis: str):
    return decide(load_workload_text(WORKLOAD.replace("BASIS", basis)))


def test_static_basis_reports_figures_without_queueing():
    v = _verdict("static")
    assert v.slo_basis == "static"
    c, d = v.colocated, v.disaggregated
    w = load_workload_text(WORKLOAD.replace("BASIS", "static"))
    r = resolve(w)
    lengths = Lengths.of(w)
    # Colocated TTFT is the prompt's own chunk iterations at the chosen batch, nothing queued.
    runs = benchmark.Runs(
        np.array([float(lengths.uncached_mean)]),
        np.array([float(lengths.output_mean)]),
        np.zeros(1),
        np.array([np.inf]),
        np.array([np.nan]),
    )
    rep = benchmark.at_batch(engine_for(r, c.tp), runs, float(c.chunk_tokens), float(c.max_batch))
    assert c.ttft_p99_ms == pytest.approx(float(rep.prefill_service_ms[0]), rel=1e-6)
    assert c.tpot_p99_ms <= w.slo.tpot_ms and c.ttft_p99_ms <= w.slo.ttft_ms
    # Disaggregated TTFT is one prompt's prefill + exposed KV transfer + one decode step.
    pre = float(np.ravel(prefill.prefill_ms(engine_for(r, d.prefill_tp), 4000.0, 0.0))[0])
    step = float(
        np.ravel(
            decode.decode_step_ms(
                engine_for(r, d.decode_tp), d.max_batch, lengths.decode_context_mean
            )
        )[0]
    )
    assert d.ttft_p99_ms == pytest.approx(pre + d.transfer_ms_p99 + step, rel=1e-6)
    assert d.tpot_p99_ms == pytest.approx(step, rel=1e-6)
    assert any("slo.basis static" in w for w in v.warnings)


def test_static_basis_admits_more_than_p99_under_load_for_a_tight_ttft():
    """Without queueing a tight TTFT target costs nothing; under Poisson load it does."""
    p99, static = _verdict("p99-under-load"), _verdict("static")
    assert static.colocated.max_rate_per_s > p99.colocated.max_rate_per_s
    assert p99.slo_basis == "p99-under-load"


@pytest.mark.parametrize("rate", [0.5, 4, 400])
def test_static_sizing_states_the_gpus_its_own_rate_needs(rate):
    """The static basis sizes its own pools: `gpus_needed_for_rate` is the static figure, never
    the p99 basis's, and a mode that fits uses exactly what it needs."""
    text = WORKLOAD.replace("BASIS", "static").replace(
        "requests_per_second: 4", f"requests_per_second: {rate}"
    )
    v = decide(load_workload_text(text))
    for mode in (v.colocated, v.disaggregated):
        if not mode.feasible:
            assert mode.gpus_needed_for_rate is None
            continue
        assert mode.gpus_needed_for_rate >= mode.gpus
        assert mode.fits_cluster == (mode.gpus_needed_for_rate <= 8)
        if mode.fits_cluster:
            assert mode.gpus_needed_for_rate == mode.gpus


LONG_PROMPTS = """
name: long-prompts
model: qwen3-32b
traffic: {prompt_tokens: 16000, output_tokens: 500, requests_per_second: 1}
slo: {ttft_ms: 4000, tpot_ms: 25, basis: static}
cluster: {gpu: h100, gpus: 16}
"""


def test_static_colocated_batch_keeps_its_prompts_fed():
    """A static colocated batch is kept only while its prompt chunks fit in the iterations
    there are: 16K-token prompts at TP4 with 256-token chunks and 14 decoding needed the prompt
    channel busy 151% of the time (AIConfigurator's agg, on the same case, is prefill-bound
    at that limit; `benchmarks/aiconfigurator_compare.py`'s Qwen3-32B 16K case)."""
    w = load_workload_text(LONG_PROMPTS, "long")
    c = decide(w).colocated
    runs = benchmark.Runs(
        np.array([16000.0]), np.array([500.0]), np.zeros(1), np.array([np.inf]), np.array([np.nan])
    )
    rep = benchmark.at_batch(
        engine_for(resolve(w), c.tp), runs, float(c.chunk_tokens), float(c.max_batch)
    )
    assert float(rep.prefill_busy[0]) < 1.0
