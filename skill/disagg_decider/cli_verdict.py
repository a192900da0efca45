"""What `decide --workload FILE` runs, without the command-line framework.

The typer app (`cli.py`) and the entry point's fast lane (`entry.py`) both print a verdict
through `emit_verdict` and report errors through `report_error`, so the two give the same
output, the same messages and the same exit codes. Nothing here imports typer or rich until
something is printed with rich: a JSON verdict loads neither.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from disagg_decider.cli_common import err, out, parse_sets, plain_text, write_output
from disagg_decider.errors import UserError

if TYPE_CHECKING:
    from disagg_decider.verdict import Verdict

FORMATS = ("text", "json", "markdown")


def verdict_json(verdict: Verdict) -> str:
    return json.dumps(verdict.model_dump(mode="json"), indent=2, allow_nan=False)


def emit_verdict(
    workload: Path,
    fmt: str = "text",
    out_file: Path | None = None,
    force: bool = False,
    sets: list[str] | None = None,
    rules: list[Path] | None = None,
    calibration: Path | None = None,
    step_source: str | None = None,
) -> None:
    """Decide `workload` and print (or write to `out_file`) the verdict in `fmt`;
    `step_source` (`--step-source`) replaces the workload's own."""
    from disagg_decider.decide import decide
    from disagg_decider.workload import load_workload

    w = load_workload(workload)
    if step_source is not None:
        w = w.model_copy(update={"step_source": step_source})
    verdict = decide(
        w,
        base_dir=workload.parent,
        rule_files=rules or [],
        overrides=parse_sets(sets or []),
        calibration=calibration,
    )
    from disagg_decider.plan_text import for_workload_file

    verdict = for_workload_file(verdict, str(workload))
    if fmt == "json":
        write_output(verdict_json(verdict), out_file, force)
    elif fmt == "markdown":
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


def report_error(exc: BaseException) -> int:
    """Say what went wrong on stderr and return the exit code: 2 for the user's input (a bad
    field, a path that cannot be read or written), 1 for a bug (one line, no traceback, unless
    DECIDE_DEBUG=1, which re-raises)."""
    from rich.markup import escape

    if isinstance(exc, UserError):
        # The message is the user's text (paths, ids, "[plot]"), never markup.
        err().print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    if isinstance(exc, OSError):  # a path the user gave that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        message = escape(f"{where}{exc.strerror or exc}")
        err().print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
        return 2
    if os.environ.get("DECIDE_DEBUG"):
        raise exc
    from disagg_decider.errors import clip

    sys.stderr.write(
        f"error: internal error ({type(exc).__name__}: {clip(str(exc), 200)}); please "
        "report it with the input that caused it (DECIDE_DEBUG=1 prints the traceback)\n"
    )
    return 1


# --- the process ---------------------------------------------------------------------------------
# `decide --workload` is a short process that allocates much (imports, 44 pydantic models, the
# calculator) and frees little: the cycle collector's passes over the growing heap cost 20-50 ms
# of it and find nothing to free. The entry point pauses the collector; the typer app's callback
# resumes it before any subcommand runs (`decide mcp` serves for hours, batches and sweeps run
# long), and the entry point resumes it when it returns (tests call it in-process).
_collector_paused = False


def pause_collector_for_process() -> None:
    import atexit
    import gc

    global _collector_paused
    atexit.unregister(_skip_final_collection)  # once per process, however often main runs
    atexit.register(_skip_final_collection)
    _collector_paused = gc.isenabled()
    gc.disable()


def resume_collector() -> None:
    global _collector_paused
    if _collector_paused:
        import gc

        _collector_paused = False
        gc.enable()


def _skip_final_collection() -> None:
    """At exit, leave what is still alive to the process's end instead of a last cycle-collector
    pass over it. Python's shutdown collects every generation; after a verdict that walks some
    45,000 objects (numpy, pydantic, typer, the calculator's caches) and frees nothing the OS
    would not: about 35-100 ms of a 0.3-0.5 s process. Atexit handlers, flushes and module
    teardown still run; `gc.freeze` only moves the survivors out of the collector's reach."""
    import gc

    gc.freeze()
