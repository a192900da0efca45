"""Benchmark result files written from the simulator, with efficiency constants one chose.

Used by the tests and `benchmarks/calibration_roundtrip.py`: a fit on these files must give
back the constants they were simulated with. Runs are open-loop Poisson arrivals at a request
rate on one colocated replica (`sim/colocated.py`), lengths drawn the way `vllm bench serve
--dataset-name random` draws them (uniform between `range_ratio` x L and L). The simulator
records each request's first and last token, so per-request inter-token gaps are written as
that request's mean gap repeated (vLLM's TPOT is computed from the same two times).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas import benchmark
from disagg_decider.sim import colocated
from disagg_decider.sim.metrics import tpot_ms, ttft_ms
from disagg_decider.sim.requests import Requests


@dataclass(frozen=True)
class SimulatedRun:
    rate_per_s: float
    prompt: np.ndarray
    output: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    duration_s: float
    concurrency: float | None = None  # closed loop of this many clients


def calculated_run(
    engine: Engine,
    prompt_tokens: int,
    output_tokens: int,
    *,
    rate_per_s: float | None = None,
    concurrency: float | None = None,
    requests: int = 200,
    chunk_tokens: int = 8192,
    max_batch: int = 256,
) -> SimulatedRun:
    """A run as the calculator's mean-field replica (`calc/replicas/benchmark.py`) predicts it:
    every request at the mean. Open loop at `rate_per_s` or closed loop of `concurrency` clients."""
    runs = benchmark.Runs(
        prompt_tokens=np.array([float(prompt_tokens)]),
        output_tokens=np.array([float(output_tokens)]),
        prompt_cv=np.zeros(1),
        request_rate_per_s=np.array([math.inf if rate_per_s is None else rate_per_s]),
        concurrency=np.array([math.nan if concurrency is None else concurrency]),
    )
    p = benchmark.predict(engine, runs, chunk_tokens, max_batch)
    rate = float(p.request_rate_per_s[0])
    duration_s = requests / rate
    if rate_per_s is not None:
        # Measured as a benchmark measures it: the arrival span, then the last request's drain.
        latency_ms = float(p.ttft_ms[0]) + (output_tokens - 1) * float(p.tpot_ms[0])
        duration_s = (requests - 1) / rate + latency_ms / 1e3
    return SimulatedRun(
        rate_per_s=math.inf if rate_per_s is None else rate_per_s,
        prompt=np.full(requests, prompt_tokens),
        output=np.full(requests, output_tokens),
        ttft_ms=np.full(requests, float(p.ttft_ms[0])),
        tpot_ms=np.full(requests, float(p.tpot_ms[0])),
        duration_s=duration_s,
        concurrency=concurrency,
    )


def simulate_run(
    engine: Engine,
    rate_per_s: float,
    prompt_tokens: int,
    output_tokens: int,
    *,
    requests: int = 400,
    range_ratio: float = 1.0,
    chunk_tokens: int = 8192,
    max_batch: int = 256,
    seed: int = 0,
) -> SimulatedRun:
    """One run measured the way `vllm bench serve` measures it: the first request sent at the
    start, every request counted (ramp-up and drain included), duration from the start to the
    last token."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1e3 / rate_per_s, requests)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps)

    def lengths(top: int) -> np.ndarray:
        low = max(round(top * range_ratio), 1)
        return rng.integers(low, top + 1, requests) if low < top else np.full(requests, top)

    prompt, output = lengths(prompt_tokens), np.maximum(lengths(output_tokens), 2)
    req = Requests(arrivals, prompt, output, np.zeros(requests))
    out = colocated.simulate(
        engine,
        req,
        colocated.ColocatedConfig(1, int(np.ravel(engine.tp)[0]), chunk_tokens, max_batch),
    )
    return SimulatedRun(
        rate_per_s=rate_per_s,
        prompt=prompt,
        output=output,
        ttft_ms=ttft_ms(out, req),
        tpot_ms=tpot_ms(out, req),
        duration_s=float(out.done_ms.max()) / 1e3,
    )


def vllm_json(run: SimulatedRun, *, detailed: bool, model: str = "simulated") -> str:
    n = len(run.prompt)
    doc = {
        "date": "simulated",
        "backend": "vllm",
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": n,
        "request_rate": _rate(run),
        "burstiness": 1.0,
        "max_concurrency": run.concurrency,
        "duration": run.duration_s,
        "completed": n,
        "total_input_tokens": int(run.prompt.sum()),
        "total_output_tokens": int(run.output.sum()),
        "request_throughput": n / run.duration_s,
        "output_throughput": float(run.output.sum()) / run.duration_s,
        "mean_ttft_ms": float(run.ttft_ms.mean()),
        "median_ttft_ms": float(np.median(run.ttft_ms)),
        "p99_ttft_ms": float(np.percentile(run.ttft_ms, 99)),
        "mean_tpot_ms": float(run.tpot_ms.mean()),
        "median_tpot_ms": float(np.median(run.tpot_ms)),
        "p99_tpot_ms": float(np.percentile(run.tpot_ms, 99)),
    }
    if detailed:
        doc.update(
            input_lens=run.prompt.tolist(),
            output_lens=run.output.tolist(),
            ttfts=(run.ttft_ms / 1e3).round(6).tolist(),
            itls=[
                [round(t / 1e3, 6)] * int(o - 1)
                for t, o in zip(run.tpot_ms, run.output, strict=False)
            ],
        )
        for key in ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"):
            doc.pop(key)  # detailed files are read from the per-request records
    return json.dumps(doc)


def sglang_jsonl_line(run: SimulatedRun) -> str:
    n = len(run.prompt)
    e2e = run.ttft_ms + run.tpot_ms * (run.output - 1)
    return json.dumps(
        {
            "backend": "sglang",
            "dataset_name": "random",
            "request_rate": _rate(run),
            "max_concurrency": run.concurrency,
            "total_input_tokens": int(run.prompt.sum()),
            "total_output_tokens": int(run.output.sum()),
            "mean_e2e_latency_ms": float(e2e.mean()),
            "median_e2e_latency_ms": float(np.median(e2e)),
            "median_ttft_ms": float(np.median(run.ttft_ms)),
            "median_itl_ms": float(np.median(run.tpot_ms)),
            "output_throughput": float(run.output.sum()) / run.duration_s,
            "duration": run.duration_s,
            "completed": n,
        }
    )


def aiperf_json(run: SimulatedRun) -> str:
    def metric(unit: str, values: np.ndarray) -> dict:
        return {
            "unit": unit,
            "avg": float(values.mean()),
            "p50": float(np.median(values)),
            "p99": float(np.percentile(values, 99)),
            "std": float(values.std()),
        }

    n = len(run.prompt)
    return json.dumps(
        {
            "request_throughput": {"unit": "requests/sec", "avg": n / run.duration_s},
            "request_count": {"unit": "requests", "avg": float(n)},
            "time_to_first_token": metric("ms", run.ttft_ms),
            "inter_token_latency": metric("ms", run.tpot_ms),
            "output_token_throughput": {
                "unit": "tokens/sec",
                "avg": float(run.output.sum()) / run.duration_s,
            },
            "input_sequence_length": metric("tokens", run.prompt.astype(float)),
            "output_sequence_length": metric("tokens", run.output.astype(float)),
            "input_config": {"phases": [_aiperf_phase(run)]},
        },
        indent=1,
    )


def _rate(run: SimulatedRun) -> float | str:
    return "inf" if math.isinf(run.rate_per_s) else run.rate_per_s


def _aiperf_phase(run: SimulatedRun) -> dict:
    if run.concurrency is not None:
        return {"name": "profiling", "type": "concurrency", "concurrency": run.concurrency}
    return {"name": "profiling", "type": "request_rate", "request_rate": run.rate_per_s}
