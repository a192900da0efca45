"""A gain sweep rendered: the terminal table, the markdown report with its mermaid chart, and the
matplotlib plot (`--plot`), with the lengths where only one mode meets the SLO marked.

`sweep.py` computes the `SweepResult` these read.
"""

from __future__ import annotations

import math
from pathlib import Path

from disagg_decider.errors import UserError
from disagg_decider.sim.sweep import SweepResult


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
