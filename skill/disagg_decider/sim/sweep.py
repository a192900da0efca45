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


# --- rendering ----------------------------------------------------------------------------------


def _fmt(g: float) -> str:
    """A gain as the table shows it; where one mode or neither meets the SLO, say which."""
    if math.isnan(g):
        return "- (neither)"
    if math.isinf(g):
        return "split only"
    if g == 0:
        return "colocated only"
    return f"{g:.2f}x"


def text(res: SweepResult) -> str:
    head = f"{'prompt p50':>10}  {'analytic gain':>14}"
    if res.simulated_gain is not None:
        head += f"  {'simulated gain':>14}  {'colo gp/GPU':>11}  {'disagg gp/GPU':>13}"
    lines = [f"{res.workload}: disaggregated / colocated goodput per GPU", head]
    for i, p in enumerate(res.prompt_tokens):
        line = f"{p:>10,}  {_fmt(res.analytic_gain[i]):>14}"
        if res.simulated_gain is not None:
            line += (
                f"  {_fmt(res.simulated_gain[i]):>14}  {res.colocated_goodput_per_gpu[i]:>11.3f}"
                f"  {res.disaggregated_goodput_per_gpu[i]:>13.3f}"
            )
        lines.append(line)
    if res.conditional is not None:
        lines += _conditional_text(res)
    lines.append(f"crossover (analytic, as in the verdict): {_crossover(res.crossover_analytic)}")
    if res.simulated_gain is not None:
        lines.append(
            f"crossover (simulated, {res.attainment:.0%} attainment): "
            f"{_crossover(res.crossover_simulated)}"
        )
    return "\n".join(lines) + "\n"


def _threshold(layout: str, t: int | None) -> str:
    if layout == "conditional":
        return f"T={t:,}"
    return {"colocated": "colocated", "disaggregated": "always split"}.get(layout, "-")


def _conditional_rows(res: SweepResult) -> tuple[list[str], list[list[str]]]:
    """Columns and rows of the conditional layout's part of the sweep."""
    c = res.conditional
    cols = ["prompt p50", "layout (threshold)", "share to prefill", "analytic gain"]
    sim = c.get("simulated_gain") is not None
    if sim:
        cols += ["simulated gain", "cond gp/GPU"]
    rows = []
    for i, p in enumerate(res.prompt_tokens):
        share = c["share_to_prefill"][i] if c["layout"][i] != "none" else None
        row = [
            f"{p:,}",
            _threshold(c["layout"][i], c["threshold_tokens"][i]),
            "-" if share is None else f"{share:.0%}",
            _fmt(c["analytic_gain"][i]),
        ]
        if sim:
            row += [_fmt(c["simulated_gain"][i]), f"{c['goodput_per_gpu_simulated'][i]:.3f}"]
        rows.append(row)
    return cols, rows


def _conditional_text(res: SweepResult) -> list[str]:
    cols, rows = _conditional_rows(res)
    widths = [max(len(col), *(len(r[j]) for r in rows)) for j, col in enumerate(cols)]
    policy = res.conditional.get("policy")
    lines = [
        "conditional layout / colocated goodput per GPU (the calculator's threshold search"
        + (f"; simulated with {policy}" if policy else "")
        + ")",
        "  ".join(col.rjust(wd) for col, wd in zip(cols, widths, strict=True)),
    ]
    lines += ["  ".join(x.rjust(wd) for x, wd in zip(r, widths, strict=True)) for r in rows]
    return lines


def _crossover(x: int | None) -> str:
    return f"{x:,} prompt tokens" if x is not None else "none"


def markdown(res: SweepResult) -> str:
    cols = ["prompt p50", "analytic gain"]
    if res.simulated_gain is not None:
        cols += ["simulated gain", "colocated goodput/GPU", "disaggregated goodput/GPU"]
    from disagg_decider.render.text import chart_text, md

    out = [f"## Gain of disaggregation: {md(res.workload)}", ""]
    out.append("| " + " | ".join(cols) + " |")
    out.append("|" + "---|" * len(cols))
    for i, p in enumerate(res.prompt_tokens):
        row = [f"{p:,}", _fmt(res.analytic_gain[i])]
        if res.simulated_gain is not None:
            row += [
                _fmt(res.simulated_gain[i]),
                f"{res.colocated_goodput_per_gpu[i]:.3f}",
                f"{res.disaggregated_goodput_per_gpu[i]:.3f}",
            ]
        out.append("| " + " | ".join(row) + " |")
    if res.conditional is not None:
        cond_cols, cond_rows = _conditional_rows(res)
        out += ["", "Conditional layout over colocated (the calculator's threshold search):", ""]
        out.append("| " + " | ".join(cond_cols) + " |")
        out.append("|" + "---|" * len(cond_cols))
        out += ["| " + " | ".join(r) + " |" for r in cond_rows]
    out += ["", f"Crossover (analytic, as in the verdict): {_crossover(res.crossover_analytic)}."]
    if res.simulated_gain is not None:
        out.append(f"Crossover (simulated): {_crossover(res.crossover_simulated)}.")
    curves = [("analytic", res.analytic_gain)]
    if res.simulated_gain is not None:
        curves.append(("simulated", res.simulated_gain))
    # Lengths where a curve has neither mode meeting the SLO are left out: a gap, not a zero.
    shown = [
        i for i in range(len(res.prompt_tokens)) if all(not math.isnan(c[i]) for _, c in curves)
    ]
    gaps = [res.prompt_tokens[i] for i in range(len(res.prompt_tokens)) if i not in shown]
    finite = [c[i] for _, c in curves for i in shown if math.isfinite(c[i])]
    top = max([*finite, 1.0]) * 1.2
    if shown:
        labels = [_chart_label(res.prompt_tokens[i], [c[i] for _, c in curves]) for i in shown]
        out += ["", "```mermaid", "xychart-beta"]
        name = chart_text(res.workload)
        out.append(f'    title "Disaggregated / colocated goodput per GPU ({name})"')
        out.append(f'    x-axis "prompt tokens (p50)" [{", ".join(labels)}]')
        out.append(f'    y-axis "gain" 0 --> {top:.2f}')
        for _, curve in curves:
            # Where only the split meets the SLO the gain is unbounded: drawn at the top.
            values = [min(curve[i], top) for i in shown]
            out.append(f"    line [{', '.join(f'{v:.3f}' for v in values)}]")
        out.append("```")
        legend = "first line: analytic" + (", second: simulated" if len(curves) > 1 else "")
        notes = [f"{legend}; gain 1 is the break-even line"]
        if any(math.isinf(c[i]) for _, c in curves for i in shown):
            notes.append('"split only": only disaggregation meets the SLO, drawn at the top')
        if any(c[i] == 0 for _, c in curves for i in shown):
            notes.append('"colocated only": only colocation meets the SLO, drawn at 0')
        out += [f"({'; '.join(notes)}.)", ""]
    if gaps:
        listed = ", ".join(f"{p:,}" for p in gaps)
        out += [
            f"Neither mode meets the SLO at {listed} prompt tokens (left out of the chart).",
            "",
        ]
    return "\n".join(out)


def _chart_label(prompt_tokens: int, gains: list[float]) -> str:
    """An x-axis category: the length, marked where only one mode meets the SLO."""
    label = str(prompt_tokens)
    if any(math.isinf(g) for g in gains):
        label += " split only"
    elif any(g == 0 for g in gains):
        label += " colocated only"
    return f'"{label}"'


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(
            "--plot needs matplotlib, an optional extra: pip install 'disagg-decider[plot]'"
        ) from None


def write_plot(res: SweepResult, path: Path) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    finite = [g for g in res.analytic_gain + (res.simulated_gain or []) if math.isfinite(g)]
    top = max([*finite, 1.0]) * 1.15
    ax.plot(res.prompt_tokens, _plottable(res.analytic_gain), "o-", label="analytic (calculator)")
    if res.simulated_gain is not None:
        ax.plot(res.prompt_tokens, _plottable(res.simulated_gain), "s--", label="simulated")
    _mark_regions(ax, res.prompt_tokens, res.analytic_gain, top)
    ax.axhline(1.0, color="grey", lw=0.8)
    for x, name in ((res.crossover_analytic, "analytic"), (res.crossover_simulated, "simulated")):
        if x is not None:
            ax.axvline(x, color="grey", ls=":", lw=0.8)
            ax.annotate(
                f"crossover {name}\n{x:,}",
                (x, 1.0),
                fontsize=8,
                xytext=(4, 6),
                textcoords="offset points",
            )
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0, top=top * 1.05)
    ax.set_xlabel("prompt tokens (p50)")
    ax.set_ylabel("goodput per GPU, disaggregated / colocated")
    ax.set_title(res.workload)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plottable(gains: list[float]) -> list[float]:
    """Gains a line can carry: where one mode or neither meets the SLO the line breaks (the
    regions are marked by `_mark_regions` instead)."""
    return [g if math.isfinite(g) and g > 0 else float("nan") for g in gains]


def _mark_regions(ax, prompts: list[int], gains: list[float], top: float) -> None:
    """Shade the lengths where only one mode, or neither, meets the SLO, with a legend entry."""
    kinds = (
        ("only disaggregation meets the SLO", lambda g: math.isinf(g), "tab:green"),
        ("only colocation meets the SLO", lambda g: g == 0, "tab:orange"),
        ("neither meets the SLO", lambda g: math.isnan(g), "lightgrey"),
    )
    for label, test, color in kinds:
        first = True
        for i, g in enumerate(gains):
            if not test(g):
                continue
            lo = math.sqrt(prompts[i - 1] * prompts[i]) if i > 0 else prompts[i] / 1.2
            hi = (
                math.sqrt(prompts[i] * prompts[i + 1]) if i + 1 < len(prompts) else prompts[i] * 1.2
            )
            ax.axvspan(lo, hi, color=color, alpha=0.25, lw=0, label=label if first else None)
            first = False
