"""Replay open-loop benchmark runs on the discrete-event simulator at candidate constants.

Why: the calculator's mean-field replica (`calc/replicas/benchmark.py`) holds the decode batch at
its mean. Near saturation the batch of a real (or simulated) server fluctuates far more than a
Poisson count - a large batch slows every step, so requests stay longer and the batch grows
further: the simulator's batch has variance 2.5-4x its mean at 40-60% of the mean-field
capacity, against 1x assumed - and since the step time and the load are convex in the batch, the
mean TPOT and TTFT sit above their mean-field values (the mean-field TPOT 3-7% below, TTFT up to
13% below). Fitting the mean-field model to such runs trades decode MBU against the step
overhead to absorb the gap, so MBU came back 8-17% low. The fit therefore corrects the
mean-field prediction of each open-loop run by the ratio simulator / mean-field at the current
constants (`fit.py`, `predict.py`), which the simulator computes with the run's own load,
request count and length spread.

What is replayed, per run: Poisson arrivals at the rate the run offered (a burst: every request
at time 0), the run's request count starting from an empty server as the benchmark tools
measure it, prompt and output lengths uniform around their means with the run's coefficients of
variation. Several independent replicates (at least `MIN_REQUESTS` requests in all) share one
simulation, spaced far apart so each starts empty. Seeds are fixed per run, so every candidate
constant sees the same arrivals and lengths (common random numbers) and the correction moves
smoothly with the constants.

Closed loops (`--max-concurrency`, AIPerf `--concurrency`) are not replayed: the simulator
takes arrival times, not clients that wait for their answers; a closed loop's batch is capped by
its client count, so its fluctuation is small and the mean-field figure is kept.

The simulator records each request's first and last token only, so a median ITL is replayed as
the median of per-request TPOT, and vLLM's and SGLang's mean ITL (over every gap) as total decode
time over total gaps; AIPerf's inter-token latency is per request ((latency - TTFT) / (output -
1)), so its mean is the mean per-request TPOT.
"""

from __future__ import annotations

import math

import numpy as np

from disagg_decider.calibrate.readers import Run
from disagg_decider.sim import colocated
from disagg_decider.sim.requests import Requests

MIN_REQUESTS = 2000  # simulated requests per run, over replicates
MAX_REQUESTS = 20000  # ... and at most this many, unless two copies of a run need more
MIN_COPIES = 3  # replicates at least: their spread is one run's scatter
MIN_REPLICATES = 2  # ... and two for runs so long that three would pass MAX_REQUESTS
APART_MS = 1e9  # replicates start this far apart (11.6 days): each finds the server empty
REPLAY_SEED = 16


def replayable(run: Run) -> bool:
    """Open-loop runs at a finite rate, and bursts (every request sent at once)."""
    return run.concurrency is None


def replay(target, eff, runs: list[Run], rates_per_s) -> dict[str, np.ndarray]:
    """What the simulator measures for each replayable run at constants `eff`, per metric
    (`ttft_ms`, `tpot_ms`, `output_tokens_per_s`, each in the statistic the run reported), and
    `<metric>_scatter`, the standard deviation of the log statistic from one replicate to the
    next (how much one run of this size scatters), and `drain_ms`, the time from the last
    arrival to the last answer; nan for runs that are not
    replayed. `target` is a `fit.Target`; `rates_per_s` the arrival rate of each run."""
    engine = target.engine_with(eff)
    cfg = colocated.ColocatedConfig(1, target.tp, target.chunk_tokens, target.max_batch)
    metrics = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
    names = (*metrics, *(f"{m}_scatter" for m in metrics), "drain_ms")
    out = {m: np.full(len(runs), np.nan) for m in names}
    for i, (run, rate) in enumerate(zip(runs, rates_per_s, strict=True)):
        if not replayable(run):
            continue
        req, replicate = _requests(run, rate, i)
        done = colocated.simulate(engine, req, cfg)
        for metric, value in _measure(run, req, done, replicate).items():
            out[metric][i] = value
    return out


def _requests(run: Run, rate_per_s: float, index: int) -> tuple[Requests, np.ndarray]:
    """The run's requests, replicated; also each request's replicate number."""
    n = max(int(run.requests), 1) if run.requests else 1000
    n = min(n, MAX_REQUESTS // MIN_REPLICATES)  # a run of a million: its first 10,000 replayed
    copies = max(math.ceil(MIN_REQUESTS / n), MIN_COPIES)
    copies = max(min(copies, MAX_REQUESTS // n), MIN_REPLICATES)  # long runs: fewer copies
    rng = np.random.default_rng([REPLAY_SEED, index])
    total = n * copies
    if math.isinf(rate_per_s):
        within = np.zeros((copies, n))
    else:
        gaps = rng.exponential(1.0, (copies, n))
        gaps[:, 0] = 0.0  # the first request of a run is sent at its start
        within = np.cumsum(gaps, axis=1)
        # Every replicate spans what the run's requests spanned at this rate: the arrival rate
        # is estimated from the run's own duration (`predict.arrival_rate`), not drawn afresh.
        span = within[:, -1:] if n > 1 else np.ones((copies, 1))
        within = within / np.maximum(span, 1e-12) * ((n - 1) * 1e3 / rate_per_s)
    arrivals = (within + APART_MS * np.arange(copies)[:, None]).ravel()
    prompt = _lengths(rng, run.prompt_tokens, run.prompt_cv, total, 1)
    output = _lengths(rng, run.output_tokens, run.output_cv, total, 2)
    replicate = np.repeat(np.arange(copies), n)
    return Requests(arrivals, prompt, output, np.zeros(total, dtype=int)), replicate


def _lengths(rng, mean: float, cv: float, count: int, least: int) -> np.ndarray:
    """Uniform lengths with this mean and coefficient of variation (what `--dataset-name random`
    draws); the half-width is capped at the mean."""
    half = min(cv * math.sqrt(3.0), 1.0) * mean
    values = rng.uniform(mean - half, mean + half, count) if half > 0 else np.full(count, mean)
    return np.maximum(np.rint(values), least).astype(int)


def _measure(run: Run, req: Requests, done, replicate: np.ndarray) -> dict[str, float]:
    """Each replicate measured as the run was (its statistic per metric); the figure is the
    replicates' mean, and their spread is how much one run of this size scatters."""
    per: dict[str, list[float]] = {m: [] for m in ("ttft_ms", "tpot_ms", "output_tokens_per_s")}
    drain = []
    ttft_all = done.first_token_ms - req.arrival_ms
    span_all = done.done_ms - done.first_token_ms
    for k in range(int(replicate.max()) + 1):
        mine = replicate == k
        ttft = ttft_all[mine]
        decoding = req.output[mine] > 1
        spans = span_all[mine][decoding]
        gaps = req.output[mine][decoding] - 1
        tpot = spans / gaps
        per["ttft_ms"].append(float(np.median(ttft) if run.ttft_stat == "median" else ttft.mean()))
        if run.tpot_stat.startswith("median"):
            per["tpot_ms"].append(float(np.median(tpot)) if tpot.size else math.nan)
        elif run.tpot_stat == "mean ITL" and run.format != "aiperf":
            per["tpot_ms"].append(float(spans.sum() / gaps.sum()) if gaps.size else math.nan)
        else:
            per["tpot_ms"].append(float(tpot.mean()) if tpot.size else math.nan)
        last_ms = float(done.done_ms[mine].max())
        tokens = float(req.output[mine].sum())
        per["output_tokens_per_s"].append(tokens / (last_ms - req.arrival_ms[mine].min()) * 1e3)
        drain.append(last_ms - float(req.arrival_ms[mine].max()))
    out = {"drain_ms": float(np.mean(drain))}
    for metric, values in per.items():
        v = np.asarray(values)
        out[metric] = float(v.mean())
        out[f"{metric}_scatter"] = float(np.log(v).std(ddof=1)) if v.size > 1 else math.nan
    return out
