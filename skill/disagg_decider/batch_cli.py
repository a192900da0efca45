"""`decide batch`: many workloads at once, streamed through worker processes (`batch_stream`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.batch_stream import CHUNK_WORKLOADS
from disagg_decider.cli_common import choices, parse_sets
from disagg_decider.cli_options import CalibrationFile, ForceOut, OutFile, RuleFiles, RuleSets
from disagg_decider.errors import UserError

MAX_JOBS = 512
MAX_CHUNK = 10_000


BatchFormat = choices("BatchFormat", "table", "jsonl", "json", "csv")


def batch_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE_OR_DIR",
            help="Workload files, folders of *.yaml, quoted glob patterns, or .jsonl files "
            "(one workload as a JSON object per line).",
        ),
    ],
    fmt: Annotated[
        BatchFormat,
        typer.Option(
            "--format",
            "-f",
            help="table (default), jsonl (one verdict per line), json (an array) or csv (one "
            "summary row per workload).",
        ),
    ] = BatchFormat.table,
    out_file: OutFile = None,
    force: ForceOut = False,
    sets: RuleSets = None,
    rules: RuleFiles = None,
    calibration: CalibrationFile = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            help="Worker processes (default: the CPUs this process may use). 1 decides in "
            "this process; every N gives the same output.",
        ),
    ] = None,
    chunk: Annotated[
        int,
        typer.Option(
            "--chunk",
            metavar="N",
            help="Workloads sent to a worker at once (decided 64 of one kind at a time): the "
            "rows of 2 x jobs chunks are in flight.",
        ),
    ] = CHUNK_WORKLOADS,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Decide many workloads at once: the fast path for sweeps, fleets and scripts.

    Workloads are read lazily and decided in chunks by worker processes; each chunk's rows are
    written in input order as soon as it is done, so memory stays bounded and rows appear
    while the rest are decided. Each verdict equals `decide --workload FILE --format json`.
    A workload that cannot be read or decided gets a row with its "error" (exit code 2 at the
    end). Ctrl-C keeps the complete rows and says how far it got (exit code 130).

    \b
    Examples:
      decide batch examples/
      decide batch 'sweep/*.yaml' --format jsonl > verdicts.jsonl
      decide batch fleet.jsonl --format csv --out fleet.csv --jobs 8
    """
    from disagg_decider.batch_inputs import plan
    from disagg_decider.batch_stream import open_target, run, summary_lines
    from disagg_decider.batch_work import Options
    from disagg_decider.pool import cpu_count

    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise UserError(f"--jobs {jobs}: expected 1 to {MAX_JOBS} worker processes")
    if not 1 <= chunk <= MAX_CHUNK:
        raise UserError(f"--chunk {chunk}: expected 1 to {MAX_CHUNK:,} workloads per chunk")
    options = Options(
        fmt=fmt.value,
        rule_files=tuple(str(p) for p in rules or []),
        overrides=tuple(parse_sets(sets or []).items()),
        calibration=str(calibration) if calibration else None,
    )
    _check_shared(options)
    sources = plan(paths)
    sink = open_target(out_file, force) if out_file is not None else sys.stdout
    width = shutil.get_terminal_size().columns if out_file is None else FILE_WIDTH_CHARS
    try:
        outcome = run(sources, options, sink, jobs=jobs or cpu_count(), chunk=chunk,
                      width_chars=width, quiet=quiet)  # fmt: skip
    finally:
        if out_file is not None:
            sink.close()
    where = str(out_file) if out_file is not None else "stdout"
    for line in summary_lines(outcome, where):
        sys.stderr.write(line + "\n")
    if out_file is not None and not outcome.interrupted:
        sys.stderr.write(f"wrote {out_file}\n")
    if outcome.interrupted:
        raise typer.Exit(130)
    if outcome.errors:
        raise typer.Exit(2)


FILE_WIDTH_CHARS = 140  # a table written with --out: wide enough that nothing is cut


def _check_shared(options) -> None:
    """The flags every workload shares (--rules, --set) are checked once, before the batch:
    a typo there is one message and exit code 2, not an error on every row."""
    from disagg_decider.batch_work import _rulebook
    from disagg_decider.rules.loader import apply_overrides

    loaded = _rulebook(options.rule_files)
    apply_overrides(loaded, loaded.param_values(), dict(options.overrides), "--set")
