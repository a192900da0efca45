"""Gain against prompt length: the calculator's curve, optionally measured by simulation.

The analytic gain is `calc.compare.gain_curve`: disaggregated over colocated goodput per GPU on
the whole cluster, every mode re-optimised at every prompt length. The simulated gain replays
the same requests (prompt p50 moved, the p99/p50 spread kept) through each mode on the pools
the verdict sizes for that mode's max rate at that length (its best layout on the cluster, the
one the analytic gain compares) and bisects its goodput per GPU simulated.

The analytic crossover is the calculator's (`Analysis.crossover_prompt_tokens`), the number the
verdict, the report and the MCP `find_crossover` tool give, whatever lengths the sweep shows;
the simulated one is read from the simulated curve by `calc.crossover.crossover_from_curve`.
Lengths where neither mode meets the SLO are gaps, and lengths where only one does are marked,
in the table, the mermaid chart and the plot.

With `conditional` the sweep adds the conditional layout: at each length the calculator's
threshold search (`calc.modes.conditional`: its chosen layout, threshold T, share sent to prefill
and goodput per GPU over colocated) and, simulated, the verdict's conditional pools behind the
router (`sim.conditional`, T and policy as asked). Where the search chose colocated or always-
disaggregated there are no conditional pools; the simulated conditional goodput is then that
mode's, as the layout would deploy it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from disagg_decider.calc.compare import analyze, gain_curve
from disagg_decider.calc.crossover import crossover_from_curve
from disagg_decider.errors import UserError
from disagg_decider.workload import Workload, resolve

_MODES = ("colocated", "disaggregated")


@dataclass(frozen=True)
class SweepResult:
    workload: str
    prompt_tokens: list[int]
    analytic_gain: list[float]  # inf: only disaggregated meets the SLO; nan: neither does
    simulated_gain: list[float] | None
    colocated_goodput_per_gpu: list[float] | None  # simulated, req/s per GPU
    disaggregated_goodput_per_gpu: list[float] | None
    crossover_analytic: int | None
    crossover_simulated: int | None
    attainment: float | None
    conditional: dict | None = None  # per length: layout, threshold, share, gains (see above)

    def as_dict(self) -> dict:
        extra = {} if self.conditional is None else {"conditional": _json_conditional(self)}
        return extra | {
            "workload": self.workload,
            "prompt_tokens": self.prompt_tokens,
            "analytic_gain": _json_gains(self.analytic_gain),
            "simulated_gain": _json_gains(self.simulated_gain) if self.simulated_gain else None,
            "colocated_goodput_per_gpu": self.colocated_goodput_per_gpu,
            "disaggregated_goodput_per_gpu": self.disaggregated_goodput_per_gpu,
            "crossover_prompt_tokens": {
                "analytic": self.crossover_analytic,
                "simulated": self.crossover_simulated,
            },
            "attainment_target": self.attainment,
            "note": (
                "analytic_gain is null where only disaggregation meets the SLO (see outcome) or "
                "neither does; 0 where only colocation does; the analytic crossover is the "
                "calculator's, the verdict's"
            ),
            "outcome": [_outcome(g) for g in self.analytic_gain],
        }


def _json_conditional(res: SweepResult) -> dict:
    c = dict(res.conditional)
    for key in ("analytic_gain", "simulated_gain"):
        if c.get(key) is not None:
            c[key] = _json_gains(c[key])
    return c


def _outcome(g: float) -> str:
    if math.isnan(g):
        return "neither-meets-slo"
    if math.isinf(g):
        return "disaggregated-only"
    return "colocated-only" if g == 0 else "both-meet-slo"


def _json_gains(gains: list[float]) -> list[float | None]:
    return [g if math.isfinite(g) else None for g in gains]


def _at_prompt(w: Workload, p50: float) -> Workload:
    """The workload with prompt p50 moved to `p50`, its p99/p50 ratio kept."""
    ratio = w.traffic.prompt_tokens.p99 / w.traffic.prompt_tokens.p50
    prompt = w.traffic.prompt_tokens.model_copy(update={"p50": p50, "p99": p50 * ratio})
    traffic = w.traffic.model_copy(update={"prompt_tokens": prompt})
    return w.model_copy(update={"traffic": traffic})


def run_sweep(
    w: Workload,
    base_dir: Path | None,
    low: float,
    high: float,
    steps: int,
    *,
    simulate: bool = False,
    requests: int = 2000,
    attainment: float = 0.99,
    seed: int = 0,
    policy: str = "chunked",
    on_point: Callable[[float], None] | None = None,
    jobs: int = 1,
    conditional: bool = False,
    pd_threshold: int | None = None,
    router_policy: str = "isl_bounding",
    prefill_busy_threshold: float = 1.0,
) -> SweepResult:
    """The analytic gain curve over log-spaced prompt lengths and, with `simulate`, the
    simulated one: each (prompt length, mode) goodput bisection is independent, so with
    `jobs` >= 2 they run in that many worker processes (`sim.parallel`), with equal results.
    `on_point(prompt)` hears each prompt length once both its modes are done."""
    if w.traffic.classes:
        raise UserError(
            f"traffic.classes: the sweep moves one prompt length, and this workload has "
            f"{len(w.traffic.classes)} request classes; sweep a single-class workload (its "
            "prompt_tokens), or compare layouts on the mix with decide simulate --layout all"
        )
    r = resolve(w, base_dir)
    prompts = np.unique(np.round(np.geomspace(low, high, steps)))
    analytic = np.asarray(gain_curve(r, prompts), dtype=float)
    own = w.traffic.prompt_tokens.p50  # the crossover is read from the workload's own length
    sim_gain = colo_gp = dis_gp = cond_gp = None
    modes = ("colocated", "disaggregated", "conditional") if conditional else _MODES
    router = (pd_threshold, router_policy, prefill_busy_threshold)
    if simulate:
        from disagg_decider.sim.parallel import run_all

        calls = [
            (_at_prompt(w, float(p)), base_dir, requests, attainment, seed, policy, mode, router)
            for p in prompts
            for mode in modes
        ]
        modes_done = [0] * len(prompts)
        per = len(modes)

        def finished(i: int) -> None:
            modes_done[i // per] += 1
            if modes_done[i // per] == per and on_point is not None:
                on_point(float(prompts[i // per]))

        goodputs = run_all(_mode_goodput_per_gpu, calls, jobs, finished)
        colo_gp, dis_gp = goodputs[0::per], goodputs[1::per]
        sim_gain = [_gain(c, d) for c, d in zip(colo_gp, dis_gp, strict=True)]
        if conditional:
            cond_gp = goodputs[2::per]
    extra = None
    if conditional:
        extra = _conditional_points(w, base_dir, prompts, pd_threshold)
        if cond_gp is not None:
            # no conditional pools at a length: the layout the search chose, simulated
            chosen = [
                {"colocated": c, "disaggregated": d}.get(layout, k)
                for c, d, k, layout in zip(colo_gp, dis_gp, cond_gp, extra["layout"], strict=True)
            ]
            extra["goodput_per_gpu_simulated"] = chosen
            extra["simulated_gain"] = [_gain(c, k) for c, k in zip(colo_gp, chosen, strict=True)]
            extra["policy"] = router_policy
    return SweepResult(
        workload=w.name,
        prompt_tokens=[int(p) for p in prompts],
        analytic_gain=[float(g) for g in analytic],
        simulated_gain=sim_gain,
        colocated_goodput_per_gpu=colo_gp,
        disaggregated_goodput_per_gpu=dis_gp,
        crossover_analytic=analyze(r).crossover_prompt_tokens,
        crossover_simulated=(
            crossover_from_curve(prompts, np.asarray(sim_gain), own)
            if sim_gain is not None
            else None
        ),
        attainment=attainment if simulate else None,
        conditional=extra,
    )


def _gain(base: float, other: float) -> float:
    """other / base goodput; inf where only `other` meets the SLO, nan where neither does."""
    return other / base if base > 0 else (math.inf if other > 0 else math.nan)


def _conditional_points(w: Workload, base_dir, prompts, pd_threshold: int | None) -> dict:
    """The calculator's threshold search at each length (one decision per length)."""
    from disagg_decider.decide import decide

    layouts, thresholds, shares, gains, per_gpu = [], [], [], [], []
    for p in prompts:
        k = decide(_at_prompt(w, float(p)), base_dir=base_dir).conditional
        layouts.append(k.layout if k is not None and k.feasible else "none")
        thresholds.append(None if k is None else k.threshold_tokens)
        shares.append(None if k is None else k.share_to_prefill)
        per_gpu.append(None if k is None or not k.feasible else k.goodput_per_gpu)
        if k is None or not k.feasible:
            gains.append(math.nan)
        else:
            gains.append(math.inf if k.gain_over_colocated is None else k.gain_over_colocated)
    return {
        "layout": layouts,
        "threshold_tokens": thresholds,
        "share_to_prefill": shares,
        "goodput_per_gpu_analytic": per_gpu,
        "analytic_gain": gains,
        "simulated_threshold_tokens": pd_threshold,
        "note": (
            "analytic_gain: the conditional layout's goodput per GPU over colocated (inf/null "
            "where colocated does not meet the SLO); threshold_tokens: the calculator's chosen "
            "T (0 = always disaggregated, null = no prefill pool)"
        ),
    }


def _mode_goodput_per_gpu(
    w: Workload,
    base_dir: Path | None,
    requests: int,
    attainment: float,
    seed: int,
    policy: str,
    mode: str,
    router: tuple = (None, "isl_bounding", 1.0),
) -> float:
    """One mode's simulated goodput per GPU at the workload's prompt length (the conditional
    layout's on the verdict's conditional pools; nan where it has none)."""
    from disagg_decider.decide import decide
    from disagg_decider.sim import run

    r = resolve(w, base_dir)
    verdict = decide(w, base_dir=base_dir)
    base = run.synthetic_requests(r, requests, seed, rate_per_s=1.0)
    if mode == "conditional":
        from disagg_decider.sim import conditional as sim_conditional

        threshold, router_policy, busy = router
        cfg = sim_conditional.config_of(r, verdict, router_policy, threshold, busy)
        if cfg is None:
            return math.nan
        start = max(verdict.conditional.max_rate_per_s, 0.05)
        return sim_conditional.goodput(r, cfg, base, attainment, start) / cfg.gpus
    result = verdict.colocated if mode == "colocated" else verdict.disaggregated
    # Each mode on the layout the analytic gain compares: its best on the cluster, i.e.
    # the pools the verdict sizes for (just under) the mode's max rate. Goodput is divided
    # by the GPUs those pools use, as simulated.
    top = result.max_rate_per_s or 0.0
    _, sized = run.at_max_rate(w, verdict, mode, base_dir)
    s = run.setup(r, sized, policy=policy)  # type: ignore[arg-type]
    gpus = run.gpus_of(s, mode)
    start = max(top * gpus / w.cluster.gpus, 0.05)
    return run.goodput(s, mode, base, attainment, start) / gpus
