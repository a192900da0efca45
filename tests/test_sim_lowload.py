"""At low load the simulator and the calculator agree on TTFT and TPOT (within 15%).

The comparison is of like quantities. Every example runs with deterministic lengths (p99 = p50
for prompts and outputs) at a rate so low that no queue forms (prefill utilisation 0.3%) and
the decode batch is almost always one request. All requests are then alike, so the simulated
p50 is each request's latency and equals the calculator's p99 (which, with p99 = p50, is also
each request's latency):

- disaggregated: the verdict's `ttft_p99_ms` (prefill_ms + KV transfer + one decode step, with
  an M/G/1 wait that is zero at this load) and `tpot_p99_ms` (decode step at the batch the load
  settles at), from `decide()` on the low-rate workload;
- colocated: the calculator's cost of a lone request, built from its own primitives: the
  chunked prefill iterations that carry the prompt (`iteration_ms` per chunk) and the decode
  step at batch 1 and the request's mean context (`decode_step_ms`). The verdict's colocated
  figures are not used here: they are read off the calculator's batch grid, whose lowest point
  (batch 1) already carries a rate with queueing, so at very low load they stay at that floor
  (README, "Simulator": where they differ).
"""

from pathlib import Path

import pytest

from disagg_decider.calc.physics.step import iteration_ms
from disagg_decider.calc.replicas.decode import decode_step_ms
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.workload import load_workload, resolve, with_rate

ROOT = Path(__file__).resolve().parents[1]
# Heterogeneous examples have their own check (tests/test_sim_hetero.py); mixed traffic has no
# single length to fix at p99 = p50 (tests/test_conditional.py checks it against the simulator).
EXAMPLES = [
    p
    for p in sorted((ROOT / "examples").glob("*.yaml"))
    if "prefill_gpu" not in p.read_text() and "classes:" not in p.read_text()
]
TOLERANCE = 0.15


def _low_load(path: Path):
    w = load_workload(path)
    t = w.traffic
    fixed = t.model_copy(
        update={
            "prompt_tokens": t.prompt_tokens.model_copy(update={"p99": t.prompt_tokens.p50}),
            "output_tokens": t.output_tokens.model_copy(update={"p99": t.output_tokens.p50}),
        }
    )
    w = w.model_copy(update={"traffic": fixed})
    v = decide(w)
    prefill_s = v.metrics.prefill_ms / 1e3
    decode_s = t.output_tokens.p50 * v.metrics.decode_step_ms / 1e3
    rate = min(0.003 / prefill_s, 0.02 / decode_s)
    w = with_rate(w, rate)
    return w, resolve(w), decide(w)


def _simulate(r, v, mode):
    s = run.setup(r, v)
    requests = run.synthetic_requests(r, 300, seed=11)
    outcome = run.simulate_mode(s, mode, requests)
    return s, metrics.summarize(outcome, requests, 1e9, 1e9, 1.0)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_disaggregated_matches_verdict_at_low_load(path: Path) -> None:
    _, r, v = _low_load(path)
    _, m = _simulate(r, v, "disaggregated")
    assert m.ttft_ms.p50 == pytest.approx(v.disaggregated.ttft_p99_ms, rel=TOLERANCE)
    assert m.tpot_ms.p50 == pytest.approx(v.disaggregated.tpot_p99_ms, rel=TOLERANCE)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_colocated_matches_calculator_primitives_at_low_load(path: Path) -> None:
    w, r, v = _low_load(path)
    s, m = _simulate(r, v, "colocated")
    engine = s.colocated_engine
    prompt = round(w.traffic.prompt_tokens.p50)
    output = round(w.traffic.output_tokens.p50)
    cached = int(prompt * w.traffic.prefix_cache_hit_rate)
    chunk = s.colocated.chunk_tokens
    ttft, done = 0.0, 0
    while done < prompt - cached:
        piece = min(chunk, prompt - cached - done)
        ttft += float(iteration_ms(engine, 0.0, 0.0, float(piece), float(cached + done)))
        done += piece
    tpot = float(decode_step_ms(engine, 1.0, prompt + output / 2.0))
    assert m.ttft_ms.p50 == pytest.approx(ttft, rel=TOLERANCE)
    assert m.tpot_ms.p50 == pytest.approx(tpot, rel=TOLERANCE)


def test_verdict_colocated_figures_are_conservative_at_low_load() -> None:
    """The calculator's colocated p99 never reads below its batch-1 operating point."""
    _, r, v = _low_load(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml")
    _, m = _simulate(r, v, "colocated")
    assert v.colocated.ttft_p99_ms > m.ttft_ms.p99
