"""What each benchmark run would measure at given constants: the mean-field replica, corrected
by the simulator's replay for open-loop runs.

`fit.py` searches the constants; this module says, for one set of them, what every run would
have measured (`predict_runs`) and how the mean-field figures compare with the simulator's
(`correction`, from `replay.py`). The arrival rate each open-loop run is predicted at is
estimated here too (`arrival_rate`), from the run's own duration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.replicas import benchmark
from disagg_decider.calibrate import replay
from disagg_decider.calibrate.readers import Run
from disagg_decider.catalog import Gpu, ModelSpec
from disagg_decider.workload import Efficiency

METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
RATE_SLACK = 0.3  # an arrival-rate estimate stays within this share of the nominal rate
SATURATED = 0.8  # an open-loop run that completed less than this share of its rate saturated


@dataclass(frozen=True)
class Target:
    """What is calibrated: one model on one GPU type, engine and TP degree."""

    model: ModelSpec
    gpu: Gpu
    engine: str
    tp: int
    weights_dtype: str
    kv_dtype: str
    chunk_tokens: int  # max_num_batched_tokens the runs used
    max_batch: int  # max_num_seqs the runs used
    base: Efficiency = field(default_factory=Efficiency)

    def engine_with(self, eff: Efficiency) -> Engine:
        return Engine(self.model, self.gpu, self.weights_dtype, self.kv_dtype, self.tp, eff)


@dataclass(frozen=True)
class Residual:
    run: Run
    metric: str
    measured: float
    predicted: float | None
    by: str = "mean-field"  # what predicted it: "simulator" (replayed) or "mean-field"

    @property
    def error(self) -> float | None:
        """Relative error, predicted / measured - 1."""
        return None if self.predicted is None else self.predicted / self.measured - 1.0


def measured_values(run: Run) -> dict[str, float]:
    """The metrics of a run the fit can use. TTFT of bursts is a transient: left out."""
    out = {}
    if run.ttft_ms and not run.burst:
        out["ttft_ms"] = run.ttft_ms
    if run.tpot_ms:
        out["tpot_ms"] = run.tpot_ms
    if run.output_tokens_per_s and _throughput_informative(run):
        out["output_tokens_per_s"] = run.output_tokens_per_s
    return out


def _throughput_informative(run: Run) -> bool:
    """Throughput says something about the engine only where the engine set it: closed loops,
    bursts and open-loop runs it could not keep up with. Below saturation an open loop carries
    the offered rate whatever the constants, so its throughput measures the load generator."""
    if run.concurrency is not None or math.isinf(run.request_rate_per_s):
        return True
    return carried_rate(run) < SATURATED * run.request_rate_per_s


def carried_rate(run: Run) -> float:
    """Requests per second the run completed (nan when the file does not say)."""
    if not run.output_tokens_per_s:
        return math.nan
    return run.output_tokens_per_s / max(run.output_tokens, 1.0)


def arrival_rate(run: Run, drain_ms: float | None = None) -> float:
    """The rate the run's requests really arrived at (inf for closed loops and bursts).

    A run sends its first request at the start and measures until the last answer, so its
    duration is the arrival span plus the drain after the last arrival. Poisson draws make the
    span differ from the nominal (n - 1) / rate by about 1/sqrt(n) (5% for 400 requests), which
    near saturation moves TPOT several times as much; requests / duration is no better, short
    by the drain (15% for 400 requests near saturation). So: (n - 1) / (duration - drain), the
    drain replayed on the simulator (`drain_ms`) or, before that, the measured mean latency.
    Saturated runs, whose duration the server set, keep the nominal rate.
    """
    nominal = run.request_rate_per_s
    if run.concurrency is not None or not math.isfinite(nominal):
        return math.inf
    carried = carried_rate(run)
    if run.requests < 2 or not math.isfinite(carried) or carried < SATURATED * nominal:
        return nominal
    duration_ms = run.requests / carried * 1e3
    if drain_ms is None:
        drain_ms = (run.ttft_ms or 0.0) + (run.output_tokens - 1.0) * (run.tpot_ms or 0.0)
    span_ms = duration_ms - drain_ms
    if span_ms <= 0:
        return nominal
    estimate = (run.requests - 1) / span_ms * 1e3
    return min(max(estimate, (1 - RATE_SLACK) * nominal), (1 + RATE_SLACK) * nominal)


def initial_rates(runs: list[Run]) -> np.ndarray:
    return np.array([arrival_rate(r) for r in runs])


def runs_array(runs: list[Run], rates_per_s: np.ndarray) -> benchmark.Runs:
    """Runs as the calculator's arrays. A burst behaves as a closed loop of all its requests
    (capped by the batch the engine admits, the rest waiting)."""

    def concurrency(r: Run) -> float:
        if r.concurrency is not None:
            return r.concurrency
        return float(max(r.requests, 1)) if r.burst else math.nan

    return benchmark.Runs(
        prompt_tokens=np.array([r.prompt_tokens for r in runs]),
        output_tokens=np.array([r.output_tokens for r in runs]),
        prompt_cv=np.array([r.prompt_cv for r in runs]),
        request_rate_per_s=np.asarray(rates_per_s, dtype=float),
        concurrency=np.array([concurrency(r) for r in runs]),
    )


def mean_field(
    target: Target, eff: Efficiency, runs: list[Run], rates_per_s: np.ndarray
) -> dict[str, np.ndarray]:
    """The calculator's mean-field figures for every run, per metric (nan: past saturation)."""
    pred = benchmark.predict(
        target.engine_with(eff),
        runs_array(runs, rates_per_s),
        target.chunk_tokens,
        target.max_batch,
    )
    return {
        "ttft_ms": pred.ttft_ms,
        "tpot_ms": pred.tpot_ms,
        "output_tokens_per_s": pred.output_tokens_per_s,
    }


@dataclass(frozen=True)
class Correction:
    """Simulator / mean-field per run and metric at some constants (1 where a run is not
    replayed), and the arrival rates re-estimated with the simulator's drain."""

    ratio: dict[str, np.ndarray]
    rates_per_s: np.ndarray
    scatter: dict[str, np.ndarray]  # one run's log scatter per run and metric (nan: unknown)


def correction(
    target: Target, eff: Efficiency, runs: list[Run], rates_per_s: np.ndarray
) -> Correction:
    simulated = replay.replay(target, eff, runs, rates_per_s)
    model = mean_field(target, eff, runs, rates_per_s)
    ratio = {}
    for metric in METRICS:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = simulated[metric] / model[metric]
        ratio[metric] = np.where(np.isfinite(r) & (r > 0), r, 1.0)
    scatter = {m: simulated[f"{m}_scatter"] for m in METRICS}
    drain = simulated["drain_ms"]
    rates = np.array(
        [
            arrival_rate(run, float(d)) if np.isfinite(d) else rate
            for run, d, rate in zip(runs, drain, rates_per_s, strict=True)
        ]
    )
    return Correction(ratio, rates, scatter)


def predict_runs(
    target: Target,
    eff: Efficiency,
    runs: list[Run],
    fixed: Correction | None = None,
    *,
    simulate: bool = True,
) -> list[Residual]:
    """Predicted versus measured for every usable metric of every run.

    Open-loop runs are replayed on the simulator at `eff` (`replay.py`) unless `simulate` is
    off (mean-field only). With `fixed`, a correction taken at other constants scales the
    mean-field figures instead: what the fit's inner search moves along.
    """
    by = ["mean-field"] * len(runs)
    if fixed is None and simulate and any(replay.replayable(r) for r in runs):
        rates = correction(target, eff, runs, initial_rates(runs)).rates_per_s
        again = correction(target, eff, runs, rates)
        fixed = Correction(again.ratio, rates, again.scatter)
    if fixed is None:
        columns = mean_field(target, eff, runs, initial_rates(runs))
    else:
        base = mean_field(target, eff, runs, fixed.rates_per_s)
        columns = {m: v * fixed.ratio[m] for m, v in base.items()}
        by = ["simulator" if replay.replayable(r) else "mean-field" for r in runs]
    out = []
    for i, run in enumerate(runs):
        for metric, value in measured_values(run).items():
            p = float(columns[metric][i])
            valid = p if math.isfinite(p) and p > 0 else None
            out.append(Residual(run, metric, value, valid, by[i]))
    return out
