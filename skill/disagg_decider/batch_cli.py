"""`decide batch`: many workload files at once, through `decide.decide_many`."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.cli_common import out, parse_sets, plain_text, write_output
from disagg_decider.errors import UserError
from disagg_decider.verdict import Verdict
from disagg_decider.verdict_text import gain_text


class BatchFormat(StrEnum):
    table = "table"
    jsonl = "jsonl"
    json = "json"


def batch_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="FILE_OR_DIR", help="Workload files, or folders of *.yaml."),
    ],
    fmt: Annotated[
        BatchFormat,
        typer.Option(
            "--format", "-f", help="table (default), jsonl (one verdict per line) or json."
        ),
    ] = BatchFormat.table,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="PARAM=VALUE", help="Override a rule parameter for every workload."
        ),
    ] = None,
    rules: Annotated[
        list[Path] | None,
        typer.Option("--rules", metavar="FILE", help="Extra rule file, as for `decide`."),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            metavar="FILE",
            help="Calibration file for every workload (replaces their own calibration:).",
        ),
    ] = None,
) -> None:
    """Decide many workloads at once: the fast path for sweeps and scripts.

    Workloads that share a model, GPU and engine are searched together, so hundreds of
    verdicts take about a second. Each verdict equals `decide --workload FILE --format json`.
    Every file is read and checked before anything is computed.

    \b
    Examples:
      decide batch examples/
      decide batch sweep/*.yaml --format jsonl > verdicts.jsonl
    """
    from disagg_decider.decide import decide_many
    from disagg_decider.workload import load_workload

    files = _workload_files(paths)
    workloads = [load_workload(f) for f in files]
    verdicts = decide_many(
        workloads,
        base_dir=[f.parent for f in files],
        rule_files=rules or [],
        overrides=parse_sets(sets or []),
        calibration=calibration,
    )
    if fmt is BatchFormat.json:
        items = [
            {"file": str(f), **v.model_dump(mode="json")}
            for f, v in zip(files, verdicts, strict=True)
        ]
        write_output(json.dumps(items, indent=2, allow_nan=False), out_file, force)
    elif fmt is BatchFormat.jsonl:
        lines = [
            json.dumps({"file": str(f), **v.model_dump(mode="json")}, allow_nan=False)
            for f, v in zip(files, verdicts, strict=True)
        ]
        write_output("\n".join(lines), out_file, force)
    elif out_file is None:
        console = out()
        console.print(_batch_table(files, verdicts, console.width))
    else:
        table = _batch_table(files, verdicts, FILE_WIDTH_CHARS)
        write_output(
            plain_text(lambda console: console.print(table), FILE_WIDTH_CHARS), out_file, force
        )


FILE_WIDTH_CHARS = 140  # a table written with --out: wide enough that nothing is cut


def _compact_split(d) -> str:
    if not d.feasible:
        return "-"
    return f"{d.prefill_replicas}x{d.prefill_layout} + {d.decode_replicas}x{d.decode_layout}"


def _workload_files(paths: list[Path]) -> list[Path]:
    """The files named, with folders expanded to their *.yaml and *.yml files, sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                raise UserError(f"{path}: folder has no *.yaml or *.yml workload files")
            files.extend(found)
        else:
            files.append(path)
    return files


def _batch_table(files: list[Path], verdicts: list[Verdict], width_chars: int):
    from disagg_decider.render.fit import Column, fitted_table

    columns = [
        Column("workload"),
        Column("decision", keep=True),
        Column("gain", keep=True, right=True),
        Column("colocated", right=True),
        Column("P + D", right=True),
        Column("crossover", keep=True, right=True),
    ]
    rows = []
    for f, v in zip(files, verdicts, strict=True):
        c, d = v.colocated, v.disaggregated
        crossover = v.metrics.crossover_prompt_tokens
        rows.append(
            [
                f.stem,
                v.decision if v.feasible else f"{v.decision}*",
                gain_text(v.metrics.gain),
                f"{c.replicas}x{c.layout}" if c.feasible else "-",
                _compact_split(d),
                f"{crossover:,}" if crossover else "-",
            ]
        )
    table = fitted_table(f"{len(verdicts)} workloads", columns, rows, width_chars)
    if any(not v.feasible for v in verdicts):
        table.caption = "* the chosen layout meets no target: see its `limits`"
        table.caption_justify = "left"
    return table
