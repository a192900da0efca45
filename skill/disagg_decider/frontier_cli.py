"""`decide frontier`: the command line over `frontier_sweep` and `frontier_map` (thin)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.cli_common import ReportFormat, parse_sets, write_output
from disagg_decider.cli_options import CalibrationFile, OutFile, RuleFiles, RuleSets
from disagg_decider.errors import UserError


class BasisChoice(StrEnum):
    p99 = "p99-under-load"
    static = "static"
    rate_matched = "rate-matched"


def frontier_command(
    workload: Annotated[
        Path, typer.Option("--workload", "-w", metavar="FILE", help="Workload YAML.")
    ],
    basis: Annotated[
        BasisChoice,
        typer.Option(
            "--basis",
            help="p99-under-load (Poisson arrivals, default), static (no queueing) or "
            "rate-matched (NVIDIA: fractional ctx:gen ratio, no queueing).",
        ),
    ] = BasisChoice.p99,
    low: Annotated[
        float, typer.Option("--low", help="Lowest tokens/s per user (1000 / TPOT ms).")
    ] = 10.0,
    high: Annotated[float, typer.Option("--high", help="Highest tokens/s per user.")] = 400.0,
    points: Annotated[
        int | None,
        typer.Option("--points", help="Log-spaced TPOT targets (default 16; 8 with --map)."),
    ] = None,
    do_map: Annotated[
        bool, typer.Option("--map", help="Winner over a grid of (TTFT target, TPOT target).")
    ] = False,
    ttft_low: Annotated[
        float, typer.Option("--ttft-low", help="--map: lowest p99 TTFT target, ms.")
    ] = 100.0,
    ttft_high: Annotated[
        float, typer.Option("--ttft-high", help="--map: highest p99 TTFT target, ms.")
    ] = 5000.0,
    fmt: Annotated[
        ReportFormat, typer.Option("--format", "-f", help="text (default), json or markdown.")
    ] = ReportFormat.text,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE",
            help="Write a PNG chart here (needs matplotlib: pip install 'disagg-decider[plot]').",
        ),
    ] = None,
    out_file: OutFile = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out / --plot.")] = False,
    sets: RuleSets = None,
    rules: RuleFiles = None,
    calibration: CalibrationFile = None,
) -> None:
    """Throughput per GPU against interactivity for colocated, always-disaggregated and
    conditional layouts: Pareto fronts, the winner at each TPOT target and where it changes.

    The TPOT target is swept over a log grid of tokens/s per user (your own target added) and
    the verdict is computed at each point; with --map, over TTFT targets too.

    \b
    Examples:
      decide frontier -w examples/rag-8k-h200-rdma-dynamo.yaml
      decide frontier -w w.yaml --basis rate-matched --format json
      decide frontier -w w.yaml --plot frontier.png
      decide frontier -w w.yaml --map --plot map.png
    """
    from disagg_decider.frontier_sweep import Sweep
    from disagg_decider.workload import load_workload

    if plot is not None:
        if plot.suffix.lower() != ".png":
            raise UserError(f"--plot {plot}: expected a .png file name, e.g. --plot frontier.png")
        from disagg_decider.frontier_plot import require_matplotlib
        from disagg_decider.outfiles import check_target

        check_target(plot, force, "--plot")
        require_matplotlib()
    n = points if points is not None else (8 if do_map else 16)
    sweep = Sweep(low, high, n, basis.value)
    w = load_workload(workload)
    options = {
        "rule_files": rules or [],
        "overrides": parse_sets(sets or []),
        "calibration": calibration,
    }
    if do_map:
        _emit_map(
            w, workload.parent, sweep, ttft_low, ttft_high, options, fmt, plot, out_file, force
        )
        return
    from disagg_decider.frontier_sweep import frontier

    f = frontier(w, workload.parent, sweep, options)
    if plot is not None:
        from disagg_decider.frontier_plot import write_frontier_png

        _write_png(plot, force, lambda tmp: write_frontier_png(f, tmp))
    if fmt is ReportFormat.json:
        text = json.dumps(f.model_dump(mode="json"), indent=2, allow_nan=False)
    else:
        from disagg_decider.frontier_text import frontier_markdown, frontier_text

        text = frontier_markdown(f) if fmt is ReportFormat.markdown else frontier_text(f)
    write_output(text, out_file, force)


def _emit_map(w, base_dir, sweep, ttft_low, ttft_high, options, fmt, plot, out_file, force):
    from disagg_decider.frontier_map import winner_map
    from disagg_decider.frontier_text import map_text

    m = winner_map(w, base_dir, sweep, ttft_low, ttft_high, options)
    if plot is not None:
        from disagg_decider.frontier_plot import write_map_png

        _write_png(plot, force, lambda tmp: write_map_png(m, tmp))
    if fmt is ReportFormat.json:
        text = json.dumps(m.model_dump(mode="json"), indent=2, allow_nan=False)
    else:
        text = map_text(m, markdown=fmt is ReportFormat.markdown)
    write_output(text, out_file, force)


def _write_png(path: Path, force: bool, draw) -> None:
    from disagg_decider.cli_common import err
    from disagg_decider.outfiles import write_with

    write_with(path, draw, force, "--plot")
    err().print(f"wrote {path}")
