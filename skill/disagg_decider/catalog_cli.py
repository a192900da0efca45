"""`decide catalog gpus|models|links`: what the calculator knows, with aliases and sources.

`decide catalog calibration FILE` shows the entries of a calibration file from `decide calibrate`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider import catalog
from disagg_decider.cli_common import choices, out
from disagg_decider.errors import UserError

CATALOG_COLUMNS = {
    "gpus": [
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "hbm_gb",
        "hbm_tb_per_s",
        "scaleup_gb_per_s",
        "scaleup_domain_gpus",
        "scaleout_gbps",
    ],
    "models": [
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "head_dim",
        "params_total_b",
        "params_active_b",
        "max_context_tokens",
    ],
    "links": ["kind", "gbps", "rdma", "latency_us", "efficiency"],
}


CatalogKind = choices("CatalogKind", "gpus", "models", "links", "calibration")


def catalog_command(
    kind: Annotated[CatalogKind, typer.Argument(help="gpus, models, links or calibration")],
    file: Annotated[
        Path | None,
        typer.Argument(metavar="FILE", help="With `calibration`: the calibration file to show."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON with sources.")] = False,
) -> None:
    """List the GPUs, models and network links the calculator knows, with their figures.

    `decide catalog calibration FILE` shows the calibrated entries of a calibration file.
    """
    if kind is CatalogKind.calibration:
        _show_calibration(file, as_json)
        return
    table_of = {"gpus": catalog.gpus, "models": catalog.models, "links": catalog.links}
    records = {r.id: r for r in table_of[kind.value]().values()}
    if as_json:
        payload = [r.model_dump(mode="json") for r in records.values()]
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    fields = CATALOG_COLUMNS[kind.value]
    aliases: dict[str, list[str]] = {r.id: [] for r in records.values()}
    for key, r in table_of[kind.value]().items():
        if key != r.id:
            aliases[r.id].append(key)
    from rich import box
    from rich.table import Table

    # The id (what a workload names) never wraps or truncates; headers wrap between words and
    # no column is narrower than its longest value, so an 80-column terminal shows it all.
    table = Table(
        title=f"catalog: {kind.value} (sources: --json)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
    )
    widths = [max(len(i) for i in records)]
    table.add_column("id", no_wrap=True, min_width=widths[0])
    for f in fields:
        header = f.replace("_", " ")
        values = [_catalog_value(getattr(r, f)) for r in records.values()]
        widths.append(max(len(v) for v in [*values, *header.split()]))
        table.add_column(header, justify="right", min_width=widths[-1])
    shapes = {r.id: _model_shape(r) for r in records.values()} if kind.value == "models" else {}
    if shapes:
        widths.append(max(len(word) for v in shapes.values() for word in v.split()))
        table.add_column("attention / MoE")
    for r in records.values():
        row = [r.id, *(_catalog_value(getattr(r, f)) for f in fields)]
        if shapes:
            row.append(shapes[r.id])
        table.add_row(*row)
    console = out()
    # Each column takes its width, a space of padding either side and one separator (the
    # outer edges count as separators): a narrower terminal would crop figures ("0.8" as "0").
    if sum(widths) + 3 * len(widths) <= console.width:
        console.print(table)
    else:  # too narrow for a table that shows every figure: one block per record instead
        console.print(table.title, highlight=False)
        for r in records.values():
            figures = [f"{f.replace('_', ' ')} {_catalog_value(getattr(r, f))}" for f in fields]
            if shapes:
                figures.append(shapes[r.id])
            console.print(f"[bold]{r.id}[/]", highlight=False)
            console.print("  " + "; ".join(figures), highlight=False)
    listed = [f"{i}: {', '.join(names)}" for i, names in aliases.items() if names]
    if listed:
        console.print("accepted aliases (a workload may name either):", highlight=False)
        for line in listed:
            console.print(f"  {line}", highlight=False, overflow="fold")


def _show_calibration(file: Path | None, as_json: bool) -> None:
    """One line per entry: what it applies to, its constants and how well they fit."""
    if file is None:
        raise UserError("decide catalog calibration FILE: give the calibration file to show")
    from disagg_decider.calibrate.file import load_calibration
    from disagg_decider.render.text import terminal_text as safe

    cal = load_calibration(file)
    if as_json:
        sys.stdout.write(json.dumps(cal.model_dump(mode="json"), indent=2) + "\n")
        return
    console = out()
    console.print(f"[bold]calibrated entries[/] in {safe(str(file))}", highlight=False)
    for e in cal.entries:
        c = e.efficiency
        files = ", ".join(d.file for d in e.data)
        console.print(
            f"{e.label()}: prefill_mfu {c.prefill_mfu:.3g}, decode_mbu {c.decode_mbu:.3g}, "
            f"step_overhead_ms {c.step_overhead_ms:.3g}; {e.residual_text()}; "
            f"from {safe(files)}",
            highlight=False,
        )
        for w in e.warnings:
            console.print(f"[yellow]warning:[/] {safe(w)}", highlight=False)


def _catalog_value(value: object) -> str:
    return "-" if value is None else str(value)


def _model_shape(m: catalog.ModelSpec) -> str:
    if m.mla:
        attention = "MLA"
    elif m.kv_heads == m.heads:
        attention = "MHA"  # one KV head per query head (OPT), no grouping
    else:
        attention = "GQA"
    parts = [attention]
    if m.sliding_window_layers:
        parts.append(f"{m.sliding_window_layers} SWA-{m.sliding_window} layers")
    if m.moe:
        parts.append(f"MoE {m.moe.experts_active}/{m.moe.experts}")
    return ", ".join(parts)
