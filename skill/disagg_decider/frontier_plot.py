"""PNG charts for `decide frontier --plot` (matplotlib, the optional `plot` extra).

`plot_data` is what is drawn, kept apart from matplotlib so tests can read it: every mode's
Pareto points (a point where only one layout meets the targets is drawn like any other, and
the interval is shaded and labelled), the band, and the workload's own target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from disagg_decider.errors import UserError
from disagg_decider.frontier_map import WinnerMap, cell_text
from disagg_decider.frontier_rows import Frontier

COLOURS = {"colocated": "tab:blue", "disaggregated": "tab:red", "conditional": "tab:green"}
MARKERS = {"colocated": "o", "disaggregated": "s", "conditional": "^"}


@dataclass(frozen=True)
class PlotData:
    series: dict[str, list[tuple[float, float]]]  # mode -> (tokens/s/user, tokens/s/GPU)
    only: list[tuple[float, float, str]]  # (low, high, mode) where one layout alone serves
    band: tuple[float, float] | None
    target_tps_user: float
    title: str


def plot_data(f: Frontier) -> PlotData:
    series = {
        fr.mode: [(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu) for p in fr.points]
        for fr in f.fronts
    }
    only = [
        (o.low_tokens_per_s_per_user, o.high_tokens_per_s_per_user, o.mode)
        for o in f.only_one_meets
    ]
    band = None
    if f.band is not None:
        band = (f.band.low_tokens_per_s_per_user, f.band.high_tokens_per_s_per_user)
    title = f"{f.workload}: {f.model} on {f.gpus} x {f.gpu}, TTFT {f.ttft_target_ms:g} ms"
    return PlotData(series, only, band, f.target_tokens_per_s_per_user, title)


def require_matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise UserError(
            "--plot needs matplotlib, an optional extra: pip install 'disagg-decider[plot]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_frontier_png(f: Frontier, path: Path) -> None:
    plt = require_matplotlib()
    d = plot_data(f)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    top = max([y for pts in d.series.values() for _, y in pts] + [1.0]) * 1.15
    if d.band is not None:
        ax.axvspan(*d.band, color="tab:red", alpha=0.08, lw=0)
        ax.annotate(
            f"split >= {f.band.margin:g}x" if f.band else "",
            (math.sqrt(d.band[0] * d.band[1]), top * 0.97),
            ha="center",
            fontsize=8,
            color="tab:red",
        )
    for low, high, mode in d.only:
        lo, hi = (low / 1.06, high * 1.06)
        ax.axvspan(lo, hi, ymax=0.06, color=COLOURS[mode], alpha=0.35, lw=0)
        ax.annotate(
            f"only {mode}",
            (math.sqrt(lo * hi), top * 0.02),
            ha="center",
            fontsize=7,
            color=COLOURS[mode],
            xytext=(0, 8),
            textcoords="offset points",
        )
    for mode, pts in d.series.items():
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker=MARKERS[mode], color=COLOURS[mode], label=mode, lw=1.5, ms=5)
    ax.axvline(d.target_tps_user, color="black", ls=":", lw=1)
    ax.annotate(
        f"your target\n{d.target_tps_user:.0f} tok/s/user",
        (d.target_tps_user, top * 0.55),
        fontsize=8,
        xytext=(4, 0),
        textcoords="offset points",
    )
    ax.set_xscale("log")
    ax.set_ylim(0, top)
    ax.set_xlabel("interactivity: output tokens/s per user (1000 / TPOT ms)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{d.title}\nbasis: {f.basis}", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower left")
    _save(fig, plt, path)


def write_map_png(m: WinnerMap, path: Path) -> None:
    """A heat map of log2(best split / colocated), cells labelled with the winner."""
    plt = require_matplotlib()
    import numpy as np

    cap = 2.0  # +-2: 4x either way
    heat = np.full((len(m.ttft_targets_ms), len(m.tokens_per_s_per_user)), np.nan)
    for i, line in enumerate(m.cells):
        for j, c in enumerate(line):
            if c.split_over_colocated is not None:
                heat[i, j] = max(-cap, min(cap, math.log2(c.split_over_colocated)))
            elif c.winner == "colocated":
                heat[i, j] = -cap
            elif c.winner is not None:
                heat[i, j] = cap
    fig, ax = plt.subplots(figsize=(9, 5.2))
    cmap = plt.get_cmap("RdBu_r").copy()
    cmap.set_bad("lightgrey")
    im = ax.imshow(
        np.ma.masked_invalid(heat), cmap=cmap, vmin=-cap, vmax=cap, origin="lower", aspect="auto"
    )
    for i, line in enumerate(m.cells):
        for j, c in enumerate(line):
            dark = abs(heat[i, j]) > 1.2 if heat[i, j] == heat[i, j] else False
            ax.text(
                j,
                i,
                cell_text(c),
                ha="center",
                va="center",
                fontsize=7,
                color="white" if dark else "black",
            )
    ax.set_xticks(
        range(len(m.tokens_per_s_per_user)), [f"{u:.0f}" for u in m.tokens_per_s_per_user]
    )
    ax.set_yticks(range(len(m.ttft_targets_ms)), [f"{t:.0f}" for t in m.ttft_targets_ms])
    ax.set_xlabel("TPOT target as tokens/s per user (1000 / TPOT ms)")
    ax.set_ylabel("p99 TTFT target (ms)")
    ax.set_title(
        f"{m.workload}: which layout wins (C colocated, D always-split, K conditional; "
        "ratio = best split / colocated, grey: none meets)",
        fontsize=8,
    )
    bar = fig.colorbar(im, ax=ax)
    bar.set_label("log2(split / colocated): red split, blue colocated")
    _save(fig, plt, path)


def _save(fig, plt, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
