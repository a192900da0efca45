"""The `decide` command line.

`decide --workload w.yaml` prints the verdict; subcommands list catalogs, manage the rulebook,
simulate, render reports and emit deployments. Every user error exits with code 2 and a
message naming the file, field or id; `--json`-style output goes to stdout only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider import __version__
from disagg_decider.cli_common import ReportFormat, choices, out
from disagg_decider.cli_lazy import LazyGroup, readable_metavars
from disagg_decider.cli_options import CalibrationFile, ForceOut, OutFile, RuleFiles, RuleSets
from disagg_decider.cli_verdict import (
    emit_verdict,
    pause_collector_for_process,
    report_error,
    resume_collector,
    verdict_json,  # noqa: F401 (re-exported: the verdict's JSON as `decide` prints it)
)
from disagg_decider.errors import UserError

app = typer.Typer(
    # subcommands load their module only when named (or listed by --help): see cli_lazy
    cls=LazyGroup,
    name="decide",
    help=(
        "Should prefill and decode run on separate GPU pools (NVIDIA Dynamo, llm-d) or stay "
        "colocated? Give a workload file (model, prompt/output lengths, rate, p99 TTFT/TPOT "
        "targets, GPUs, network, team) and get the verdict, the reasons (rules that fired), "
        "the numbers for both modes and the pool sizes."
    ),
    # \b keeps click from re-wrapping the examples into one paragraph
    epilog=(
        "\b\nExamples:\n"
        "  decide --workload examples/rag-8k-h200-rdma-dynamo.yaml\n"
        "  decide -w w.yaml --format json --set min_gain=1.2\n"
        "  decide batch examples/ --format jsonl\n"
        "  decide catalog models\n"
        "  decide schema workload > workload.schema.json"
    ),
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


StepSource = choices("StepSource", "default", "silicon")


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    workload: Annotated[
        Path | None,
        typer.Option("--workload", "-w", metavar="FILE", help="Workload YAML (see examples/)."),
    ] = None,
    fmt: Annotated[
        ReportFormat, typer.Option("--format", "-f", help="text (default), json or markdown.")
    ] = ReportFormat.text,
    out_file: OutFile = None,
    force: ForceOut = False,
    sets: RuleSets = None,
    rules: RuleFiles = None,
    calibration: CalibrationFile = None,
    step_source: Annotated[
        StepSource | None,
        typer.Option(
            "--step-source",
            help="Where step times come from (overrides the workload's step_source): default "
            "(fitted to measured silicon) or silicon (aiconfigurator-core's measured kernels; "
            "needs "
            "pip install 'disagg-decider[silicon]').",
        ),
    ] = None,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out().print(f"disagg-decider {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is not None:
        resume_collector()
        given = [
            name
            for name, value in (
                ("--workload", workload),
                ("--format", fmt is not ReportFormat.text),
                ("--out", out_file),
                ("--force", force),
                ("--set", sets),
                ("--rules", rules),
                ("--calibration", calibration),
                ("--step-source", step_source),
            )
            if value
        ]
        if given:
            raise UserError(
                f"{', '.join(given)} before `{ctx.invoked_subcommand}` would be ignored: those "
                "options belong to `decide --workload FILE`; give a subcommand its own options "
                f"after its name (decide {ctx.invoked_subcommand} --help)"
            )
        return
    if workload is None:
        out().print(ctx.get_help())
        raise typer.Exit(code=2)
    emit_verdict(
        workload,
        fmt.value,
        out_file,
        force,
        sets,
        rules,
        calibration,
        step_source.value if step_source else None,
    )


# The other subcommands live beside what they drive; `cli_lazy.SUBCOMMANDS` names them and
# `LazyGroup` imports a module only when its command runs, so a verdict loads none of them.


def _suggest_workload_option(args: list[str]) -> None:
    """`decide w.yaml` reads as a command named w.yaml: say how to give a workload instead."""
    first = next((a for a in args if not a.startswith("-")), None)
    if first is not None and args and args[0] == first and first.endswith((".yaml", ".yml")):
        raise UserError(
            f"{first!r} is not a command; to decide a workload file: decide --workload {first}"
        )


def main() -> None:
    """Entry point: user errors become a message and exit code 2, never a traceback.

    (`entry.main`, the installed `decide`, serves a plain `decide --workload FILE [--format F]`
    without typer and hands every other command line to this.)"""
    pause_collector_for_process()  # back on for subcommands and when main returns
    try:
        _suggest_workload_option(sys.argv[1:])
        # without standalone mode click returns the code of a typer.Exit instead of exiting
        command = typer.main.get_command(app)
        readable_metavars(command)
        code = command(prog_name="decide", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except (UserError, OSError) as exc:
        sys.exit(report_error(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code
        import click

        # typer >= 0.23 vendors click: its usage errors are not the installed click's
        if isinstance(exc, click.ClickException | typer.TyperException) and hasattr(exc, "show"):
            exc.show()
            sys.exit(exc.exit_code)
        sys.exit(report_error(exc))
    finally:
        resume_collector()
