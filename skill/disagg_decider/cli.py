"""The `decide` command line.

`decide --workload w.yaml` prints the verdict; subcommands list catalogs, manage the rulebook,
simulate, render reports and emit deployments. Every user error exits with code 2 and a
message naming the file, field or id; `--json`-style output goes to stdout only.
"""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from disagg_decider import __version__
from disagg_decider.cli_common import err, out, parse_sets, plain_text, write_output
from disagg_decider.cli_lazy import LazyGroup, readable_metavars
from disagg_decider.errors import UserError

if TYPE_CHECKING:
    from disagg_decider.verdict import Verdict

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


class Format(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def verdict_json(verdict: Verdict) -> str:
    return json.dumps(verdict.model_dump(mode="json"), indent=2, allow_nan=False)


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    workload: Annotated[
        Path | None,
        typer.Option("--workload", "-w", metavar="FILE", help="Workload YAML (see examples/)."),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="text (default), json or markdown.")
    ] = Format.text,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="PARAM=VALUE",
            help="Override a rule parameter, e.g. --set min_gain=1.2 (repeatable).",
        ),
    ] = None,
    rules: Annotated[
        list[Path] | None,
        typer.Option(
            "--rules",
            metavar="FILE",
            help="Extra rule file: adds rules, or replaces shipped ones with the same id.",
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            metavar="FILE",
            help="Calibration file from `decide calibrate`: its constants replace the defaults "
            "for a matching model/GPU/engine (overrides the workload's calibration:).",
        ),
    ] = None,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out().print(f"disagg-decider {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is not None:
        _resume_collector()
        given = [
            name
            for name, value in (
                ("--workload", workload),
                ("--format", fmt is not Format.text),
                ("--out", out_file),
                ("--force", force),
                ("--set", sets),
                ("--rules", rules),
                ("--calibration", calibration),
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
    from disagg_decider.decide import decide
    from disagg_decider.workload import load_workload

    w = load_workload(workload)
    verdict = decide(
        w,
        base_dir=workload.parent,
        rule_files=rules or [],
        overrides=parse_sets(sets or []),
        calibration=calibration,
    )
    if fmt is Format.json:
        write_output(verdict_json(verdict), out_file, force)
    elif fmt is Format.markdown:
        from disagg_decider.calibrate.apply import apply_calibration, calibrated_workload
        from disagg_decider.render.report import render_report
        from disagg_decider.workload import resolve

        # the report states the constants the verdict used
        shown = (
            apply_calibration(w, calibration).workload
            if calibration is not None
            else calibrated_workload(w, workload.parent)
        )
        write_output(render_report(verdict, resolve(shown, workload.parent)), out_file, force)
    elif out_file is not None:
        from disagg_decider.verdict_text import print_verdict

        text = plain_text(lambda console: print_verdict(verdict, console), 110)
        write_output(text, out_file, force)
    else:
        from disagg_decider.verdict_text import print_verdict

        print_verdict(verdict, out())


# The other subcommands live beside what they drive; `cli_lazy.SUBCOMMANDS` names them and
# `LazyGroup` imports a module only when its command runs, so a verdict loads none of them.


def _suggest_workload_option(args: list[str]) -> None:
    """`decide w.yaml` reads as a command named w.yaml: say how to give a workload instead."""
    first = next((a for a in args if not a.startswith("-")), None)
    if first is not None and args and args[0] == first and first.endswith((".yaml", ".yml")):
        raise UserError(
            f"{first!r} is not a command; to decide a workload file: decide --workload {first}"
        )


# `decide --workload` is a short process that allocates much (imports, 44 pydantic models, the
# calculator) and frees little: the cycle collector's passes over the growing heap cost 20-50 ms
# of it and find nothing to free. `main` pauses the collector; the top-level callback resumes it
# before any subcommand runs (`decide mcp` serves for hours, batches and sweeps run long), and
# `main` resumes it when it returns (tests call it in-process).
_COLLECTOR_PAUSED = False


def _resume_collector() -> None:
    global _COLLECTOR_PAUSED
    if _COLLECTOR_PAUSED:
        import gc

        _COLLECTOR_PAUSED = False
        gc.enable()


def _skip_final_collection() -> None:
    """At exit, leave what is still alive to the process's end instead of a last cycle-collector
    pass over it. Python's shutdown collects every generation; after a verdict that walks some
    45,000 objects (numpy, pydantic, typer, the calculator's caches) and frees nothing the OS
    would not: about 35-100 ms of a 0.3-0.5 s process. Atexit handlers, flushes and module
    teardown still run; `gc.freeze` only moves the survivors out of the collector's reach."""
    import gc

    gc.freeze()


def main() -> None:
    """Entry point: user errors become a message and exit code 2, never a traceback."""
    import atexit
    import gc

    atexit.unregister(_skip_final_collection)  # once per process, however often main runs
    atexit.register(_skip_final_collection)
    global _COLLECTOR_PAUSED
    _COLLECTOR_PAUSED = gc.isenabled()
    gc.disable()  # see _COLLECTOR_PAUSED; back on for subcommands and when main returns
    try:
        _suggest_workload_option(sys.argv[1:])
        # without standalone mode click returns the code of a typer.Exit instead of exiting
        command = typer.main.get_command(app)
        readable_metavars(command)
        code = command(prog_name="decide", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except UserError as exc:
        from rich.markup import escape

        # The message is the user's text (paths, ids, "[plot]"), never markup.
        err().print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # a path the user gave that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        from rich.markup import escape

        message = escape(f"{where}{exc.strerror or exc}")
        err().print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code
        import click

        # typer >= 0.23 vendors click: its usage errors are not the installed click's
        if isinstance(exc, click.ClickException | typer.TyperException) and hasattr(exc, "show"):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("DECIDE_DEBUG"):
            raise
        # A bug, not the user's input: one line, no traceback (DECIDE_DEBUG=1 shows it).
        from disagg_decider.errors import clip

        sys.stderr.write(
            f"error: internal error ({type(exc).__name__}: {clip(str(exc), 200)}); please "
            "report it with the input that caused it (DECIDE_DEBUG=1 prints the traceback)\n"
        )
        sys.exit(1)
    finally:
        _resume_collector()


if __name__ == "__main__":
    main()
