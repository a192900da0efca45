"""Fit the calculator's efficiency constants to measured runs (numpy only).

The constants: prefill MFU (what prompts reach of peak FLOP/s), decode MBU (what decode steps
reach of HBM bandwidth) and the fixed per-step overhead (launch, sampling, scheduling). They
enter every figure through `step.iteration_ms`; `calc/replicas/benchmark.py` turns them into what
each run would measure (`predict.py`). The fit minimises the squared log ratio predicted / measured
over every measured mean TTFT, TPOT and output throughput: a coarse grid, then
Levenberg-Marquardt with forward-difference Jacobians, on the mean-field model; then, for
open-loop runs, the same search on the mean-field model scaled by what the simulator replays at
the current constants (`replay.py`), repeated until the constants settle. Small and transparent
on purpose: three parameters, a few dozen runs, a few hundred mean-field evaluations and a few
rounds of replays.

A constant the runs cannot pin (no TTFT measured: prefill MFU; a single load: MBU against the
overhead) is kept at its default or flagged, never silently extrapolated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from disagg_decider.calibrate import replay
from disagg_decider.calibrate.predict import (
    METRICS,
    Correction,
    Residual,
    Target,
    correction,
    initial_rates,
    measured_values,
    predict_runs,
)
from disagg_decider.calibrate.readers import Run
from disagg_decider.workload import Efficiency

__all__ = ["FITTED", "Fit", "Residual", "Target", "fit", "predict_runs", "summary"]

FITTED = ("prefill_mfu", "decode_mbu", "step_overhead_ms")
BOUNDS = {"prefill_mfu": (0.02, 1.0), "decode_mbu": (0.05, 1.0), "step_overhead_ms": (0.0, 50.0)}
MISSING_PENALTY = 3.0  # log-error charged where a candidate predicts no value (saturated)
POOR_FIT = 0.25
LOOSE = 0.05  # relative standard error above which a fitted constant is reported as loose
REPLAY_ROUNDS = 6  # simulator corrections at most (two to four are typical)
REPLAY_TOLERANCE = 0.005  # relative change of every constant that ends the corrections ...
SETTLED_SE = 0.2  # ... or this share of its standard error, if larger
IDLE_SENSITIVITY = 1e-4  # |d log prediction / d log constant| below which nothing responds
NOISE_FLOOR = 0.01  # log error every residual is allowed (model and measurement), weighting
FLAT = 1e-6  # singular value (of the largest) below which a direction of the fit is flat
IN_FLAT = 0.1  # a constant's share of a flat direction that leaves it unpinned


@dataclass(frozen=True)
class Fit:
    efficiency: Efficiency
    fitted: dict[str, float]  # the constants that were fitted, by name
    held: dict[str, str]  # constants kept at their default, with why
    residuals: list[Residual]
    warnings: list[str]
    uncertainty: dict[str, float] = field(default_factory=dict)  # 1-sigma, relative to value


def _log_errors(residuals: list[Residual]) -> np.ndarray:
    return np.array(
        [
            MISSING_PENALTY if r.predicted is None else math.log(r.predicted / r.measured)
            for r in residuals
        ]
    )


def _weights(runs: list[Run], fixed: Correction | None) -> np.ndarray | float:
    """Each residual's weight, in `predict_runs`' order: FLOOR / sqrt(scatter^2 + FLOOR^2).

    A run near saturation scatters from one run to the next far more than one at half load
    (its TTFT by 30% or more for 400 requests): weighted least squares lets such runs count
    for what they can tell, so one unlucky run does not drag the constants. The scatter is the
    simulator's, replicate to replicate (`replay.py`); runs not replayed weigh 1."""
    if fixed is None:
        return 1.0
    out = []
    for i, run in enumerate(runs):
        for metric in measured_values(run):
            spread = float(fixed.scatter[metric][i])
            spread = spread if math.isfinite(spread) else 0.0
            out.append(NOISE_FLOOR / math.hypot(spread, NOISE_FLOOR))
    return np.array(out)


def fit(runs: list[Run], target: Target, *, simulate: bool = True) -> Fit:
    """Fit the constants; open-loop runs are matched through the simulator unless `simulate`
    is off (then the mean-field model alone, which reads MBU low near saturation)."""
    if not any(measured_values(r) for r in runs):
        from disagg_decider.errors import UserError

        raise UserError("no run has a usable TTFT, TPOT/ITL or output throughput to fit")
    warnings = _coverage_warnings(runs)
    names = list(FITTED)
    held: dict[str, str] = {}
    if not any("ttft_ms" in measured_values(r) for r in runs):
        names.remove("prefill_mfu")
        held["prefill_mfu"] = "no TTFT measured (or only from bursts): kept at its default"

    def eff_of(x: np.ndarray) -> Efficiency:
        values = {n: _clip(n, v) for n, v in zip(names, x, strict=True)}
        return target.base.model_copy(update=values)

    fixed: Correction | None = None  # the simulator's correction, once taken

    def errors(x: np.ndarray) -> np.ndarray:
        residuals = predict_runs(target, eff_of(x), runs, fixed, simulate=False)
        return _log_errors(residuals) * _weights(runs, fixed)

    x = _grid_start(names, errors)
    x = _levenberg_marquardt(errors, x, names)
    if simulate and any(replay.replayable(r) and measured_values(r) for r in runs):
        # Fixed point: correct the mean-field model by the simulator at the current constants
        # (and re-estimate the arrival rates with its drain), refit, repeat until the constants
        # stop moving. Where the simulator generated the runs, the constants it ran with are a
        # fixed point. Settled: no constant moves by more than a fifth of its standard error
        # (or 0.5%). The simulator's answers are piecewise smooth in the constants, so a loosely
        # determined constant may wander a little from round to round; only a wander of half a
        # standard error or more is reported.
        rates = initial_rates(runs)
        for _ in range(REPLAY_ROUNDS):
            fixed = correction(target, eff_of(x), runs, rates)
            rates = fixed.rates_per_s
            previous, x = x, _levenberg_marquardt(errors, x, names)
            spread = _relative_std_errors(errors, x, names, NOISE_FLOOR)
            se = np.array([spread.get(n, 0.0) for n in names])
            moved = np.abs(x - previous) / np.maximum(previous, 1e-3)
            if np.all(moved <= np.maximum(SETTLED_SE * se, REPLAY_TOLERANCE)):
                break
        if np.any(moved > np.maximum(2.5 * SETTLED_SE * se, REPLAY_TOLERANCE)):
            warnings.append(
                f"the simulator-corrected fit did not settle in {REPLAY_ROUNDS} rounds: the "
                "constants may be off by more than their standard errors"
            )
        again = correction(target, eff_of(x), runs, rates)
        fixed = Correction(again.ratio, rates, again.scatter)
    uncertainty, idle_set = _spread(errors, x, names, NOISE_FLOOR if fixed else 0.0)
    eff = eff_of(x)
    residuals = predict_runs(target, eff, runs, fixed, simulate=False)
    fitted = {n: float(getattr(eff, n)) for n in names}
    for n, v in fitted.items():
        lo, hi = BOUNDS[n]
        if n == "step_overhead_ms":
            if v < 0.05:
                warnings.append(
                    "step_overhead_ms fitted to 0: decode MBU absorbs the fixed cost of a step "
                    "(it reads low); runs at more loads and context lengths separate the two"
                )
        elif math.isclose(v, lo) or math.isclose(v, hi):
            warnings.append(f"{n} = {v:.3g} is at the edge of its range: the fit is not reliable")
    worst = max((abs(r.error) for r in residuals if r.error is not None), default=math.inf)
    if worst > POOR_FIT:
        warnings.append(
            f"worst residual {worst:.0%}: the calculator's step model does not reproduce these "
            "runs well (speculative decoding, prefix caching, CPU-bound serving or a different "
            "batch/chunk setting than --max-batch/--chunk-tokens can cause this)"
        )
    idle = [n for n in names if n in idle_set]
    flat = [n for n, u in uncertainty.items() if math.isinf(u) and n not in idle_set]
    if flat:
        values = sum(len(measured_values(r)) for r in runs)
        warnings.append(
            f"{', '.join(flat)} cannot be pinned by these runs ({values} measured values for "
            f"{len(names)} constants, or runs that repeat one another): they trade off along a "
            "direction no measurement moves, so they are unbounded, and the residual says only "
            "that the fit passes through the points; add runs at other loads and prompt lengths"
        )
    for n in idle:
        warnings.append(
            f"{n} moves no prediction for these runs (the step model bounds those passes by "
            f"something else, e.g. decode by compute): {fitted[n]:.3g} is where the search "
            "started, not a measurement; do not use it"
        )
    loose = {
        n: u
        for n, u in uncertainty.items()
        if n != "step_overhead_ms" and LOOSE < u < math.inf and n not in idle
    }
    if loose:
        spread = ", ".join(f"{n} +/-{u:.0%}" for n, u in loose.items())
        warnings.append(
            f"loosely determined by these runs ({spread}, one standard error): decode MBU and the "
            "step overhead trade off along the step time; runs at more loads and longer contexts "
            "pin them"
        )
    return Fit(eff, fitted, held, residuals, warnings, uncertainty)


def _relative_std_errors(
    errors, x: np.ndarray, names: list[str], floor: float = 0.0
) -> dict[str, float]:
    """`_spread`'s standard errors alone."""
    return _spread(errors, x, names, floor)[0]


def _spread(
    errors, x: np.ndarray, names: list[str], floor: float = 0.0
) -> tuple[dict[str, float], set[str]]:
    """One standard error of each constant, relative to its value: s^2 (J^T J)^-1 with s^2 the
    residual variance (log errors), the usual least-squares estimate, or `floor`^2 if larger:
    residuals weighted by their expected scatter have that variance, and a fit that happens to
    pass closer than the noise allows does not know the constants better. A constant the runs
    cannot pin (no prediction responds to it, or it lies along a flat direction of the fit:
    fewer independent measured values than constants) is infinite, however small the residual:
    a fit through every point with a free direction left says nothing of where on it the truth
    is. Others are left out when the runs give no degrees of freedom. Also returns the
    constants no prediction responds to at all (idle), a subset of the infinite ones."""
    r = errors(x)
    jac = np.empty((r.size, x.size))
    for j in range(x.size):
        h = max(abs(x[j]) * 1e-4, 1e-6)
        if x[j] + h > BOUNDS[names[j]][1]:
            h = -h  # at the upper bound a forward step is clipped away: step back into range
        step = x.copy()
        step[j] += h
        jac[:, j] = (errors(step) - r) / h
    # A constant no prediction responds to is not determined at all (pinv would report 0).
    moves = np.linalg.norm(jac, axis=0) * np.abs(x) > IDLE_SENSITIVITY
    free = _flat_constants(jac * np.abs(x), names)
    idle = {n for i, n in enumerate(names) if not moves[i]}
    unbounded = {n: math.inf for n in names if n in idle or n in free}
    dof = r.size - x.size
    if dof <= 0:
        return unbounded, idle
    try:
        cov = np.linalg.pinv(jac.T @ jac) * max(float(r @ r) / dof, floor**2)
    except np.linalg.LinAlgError:
        return unbounded, idle
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    spread = {
        n: float(se[i] / abs(x[i])) if abs(x[i]) > 1e-9 and n not in unbounded else math.inf
        for i, n in enumerate(names)
    }
    return spread, idle


def _flat_constants(scaled_jac: np.ndarray, names: list[str]) -> set[str]:
    """The constants along a direction no measured value responds to: the right singular
    vectors of the Jacobian (per relative change of each constant) beyond its rank, or with a
    singular value below FLAT of the largest. Fewer measured values than constants always
    leave one."""
    if scaled_jac.size == 0:
        return set(names)
    _, sv, vt = np.linalg.svd(scaled_jac, full_matrices=True)
    top = float(sv.max()) if sv.size else 0.0
    flat = [k for k in range(len(names)) if k >= sv.size or sv[k] <= FLAT * top]
    return {n for i, n in enumerate(names) if any(abs(vt[k, i]) > IN_FLAT for k in flat)}


def _clip(name: str, value: float) -> float:
    lo, hi = BOUNDS[name]
    return float(min(max(value, lo), hi))


def _grid_start(names: list[str], errors) -> np.ndarray:
    """Best point of a coarse grid: keeps the local search away from a poor basin."""
    axes = {
        "prefill_mfu": (0.2, 0.4, 0.6, 0.8),
        "decode_mbu": (0.3, 0.5, 0.7, 0.9),
        "step_overhead_ms": (0.5, 2.0, 6.0),
    }
    best, best_cost = None, math.inf
    for point in product(*(axes[n] for n in names)):
        x = np.array(point, dtype=float)
        cost = float(np.sum(errors(x) ** 2))
        if cost < best_cost:
            best, best_cost = x, cost
    return best


def _levenberg_marquardt(errors, x: np.ndarray, names: list[str], rounds: int = 40):
    """Damped Gauss-Newton on the log errors; steps clipped to each constant's range."""
    lam = 1e-2
    r = errors(x)
    cost = float(r @ r)
    for _ in range(rounds):
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            h = max(abs(x[j]) * 1e-4, 1e-6)
            step = x.copy()
            step[j] += h
            jac[:, j] = (errors(step) - r) / h
        jtj = jac.T @ jac
        grad = jac.T @ r
        improved = False
        for _ in range(8):
            a = jtj + lam * np.diag(np.diag(jtj) + 1e-12)
            try:
                delta = np.linalg.solve(a, -grad)
            except np.linalg.LinAlgError:
                lam *= 10
                continue
            trial = np.array([_clip(n, v) for n, v in zip(names, x + delta, strict=True)])
            rt = errors(trial)
            ct = float(rt @ rt)
            if ct < cost:
                x, r, lam, improved = trial, rt, max(lam / 3, 1e-7), True
                gain, cost = cost - ct, ct
                break
            lam *= 10
        if not improved or gain < 1e-12 * max(cost, 1e-12):
            break
    return x


def _coverage_warnings(runs: list[Run]) -> list[str]:
    """Say what the runs cannot support, so nobody extrapolates silently."""
    out = []
    loads = {(r.request_rate_per_s, r.concurrency) for r in runs if not r.burst}
    if len(loads) <= 1:
        out.append(
            "fit from one load point: decode MBU and the per-step overhead both set the step "
            "time and cannot be told apart; the constants reproduce this load, not others"
        )
    prompts = sorted(r.prompt_tokens for r in runs)
    if prompts[-1] <= prompts[0] * 1.05:
        out.append(
            f"fit from one prompt length (~{prompts[0]:.0f} tokens): prefill MFU is read at that "
            "length only; verdicts on much shorter or longer prompts extrapolate it"
        )
    bursts = [r for r in runs if r.burst]
    if bursts:
        out.append(
            f"{len(bursts)} run(s) sent every request at once (request rate inf, no "
            "max concurrency): their TTFT is queueing of the burst and is not fitted"
        )
    return out


def summary(residuals: list[Residual]) -> dict[str, float | None]:
    """Median and worst absolute relative error, overall and per metric."""
    out: dict[str, float | None] = {}
    groups = {"all": residuals, **{m: [r for r in residuals if r.metric == m] for m in METRICS}}
    for name, group in groups.items():
        errs = [abs(r.error) for r in group if r.error is not None]
        out[f"{name}_median_abs_error"] = float(np.median(errs)) if errs else None
        out[f"{name}_worst_abs_error"] = float(max(errs)) if errs else None
    return out
