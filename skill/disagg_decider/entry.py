"""The installed `decide` (and `python -m disagg_decider`): a verdict's fast lane, then typer.

The common call, `decide --workload FILE [--format text|json|markdown]`, is answered here
without importing typer: the framework, its parameter coercion (it builds pydantic
TypeAdapters per option) and the click command tree cost 60-90 ms of a 250 ms process, more
than anything else the verdict does not need. The fast lane takes only command lines it reads
exactly as typer would (each of those two options at most once, with a separate value; the
format one of its three names) and runs the same code (`cli_verdict.emit_verdict`) with the
same error reporting (`cli_verdict.report_error`); any other command line, including `--help`,
`--workload=FILE`, other options and every subcommand, goes to `cli.main` unchanged.

When the fast lane has answered, the process ends right there (`console`): the output is
flushed and the interpreter's teardown is skipped, with the cycle collector still paused. The
teardown frees every module (numpy's and pydantic's included) object by object, and the first
collection after the pause walks everything allocated since the start to free nothing: about
25 ms of a 200 ms verdict together, for memory the operating system reclaims anyway. (A tool
that records at exit, e.g. `coverage run`, sees no exit for a fast-lane verdict.)

Pydantic's plugin discovery is skipped too (for every command), unless PYDANTIC_DISABLE_PLUGINS
is already set: the first model it builds would otherwise import `importlib.metadata` and scan
every installed distribution's entry points (about 20 ms) for plugins that could only
instrument this program's own internal models.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_OPTIONS = {"--workload": "workload", "-w": "workload", "--format": "format", "-f": "format"}
FORMATS = ("text", "json", "markdown")


def verdict_request(args: list[str]) -> tuple[Path, str] | None:
    """(workload, format) when `args` is a plain verdict request, else None (typer's turn)."""
    if len(args) not in (2, 4):
        return None
    given: dict[str, str] = {}
    for option, value in zip(args[::2], args[1::2], strict=True):
        name = _OPTIONS.get(option)
        if name is None or name in given or not value or value.startswith("-"):
            return None
        given[name] = value
    if "workload" not in given or given.get("format", "text") not in FORMATS:
        return None
    return Path(given["workload"]), given.get("format", "text")


_DISABLED = ("__all__", "1", "true")  # the values with which pydantic loads no plugin


def skip_pydantic_plugin_discovery() -> None:
    """Set PYDANTIC_DISABLE_PLUGINS unless the user has, and then spare pydantic the import of
    its plugin loader, which imports `importlib.metadata` (and with it email, zipfile, csv,
    socket: ~13 ms) only to return no plugin when that variable is set.

    The stand-in answers exactly as pydantic's loader does with plugins disabled; if the
    variable is changed later in the process, or pydantic asks it for anything else, it hands
    over to the real loader. (pydantic 2.x imports the loader in one place, for `get_plugins`.)
    """
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        return
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
    name = "pydantic.plugin._loader"
    if name in sys.modules:
        return
    import types

    stand_in = types.ModuleType(name, "disagg_decider.entry: pydantic plugins disabled")

    def real_loader() -> types.ModuleType:
        import importlib

        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        return importlib.import_module(name)

    def get_plugins():
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in _DISABLED:
            return ()
        return real_loader().get_plugins()

    def other(attr: str):  # PEP 562; dunders (the import system asks for __path__) are absent
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(real_loader(), attr)

    stand_in.get_plugins = get_plugins
    stand_in.__getattr__ = other
    sys.modules[name] = stand_in


def main() -> None:
    """`decide` in this process: the fast lane, or the typer app (tests call this)."""
    request = verdict_request(sys.argv[1:])
    skip_pydantic_plugin_discovery()
    if request is None:
        from disagg_decider.cli import main as full

        full()
        return
    code = answer(request)
    if code:
        sys.exit(code)


def answer(request: tuple[Path, str], keep_collector_paused: bool = False) -> int:
    """Print the verdict (or the error) for a fast-lane request; the exit code.

    The cycle collector stays paused while it runs (`cli_verdict`), and after it only when
    `keep_collector_paused`: the process is about to end, and the first collection after the
    pause would walk everything allocated since the start (~15 ms) to free nothing."""
    from disagg_decider.cli_verdict import (
        emit_verdict,
        pause_collector_for_process,
        report_error,
        resume_collector,
    )

    pause_collector_for_process()
    try:
        emit_verdict(*request)
        return 0
    except KeyboardInterrupt:  # as click reports it: a new line, exit code 130
        sys.stderr.write("\n")
        return 130
    except Exception as exc:
        return report_error(exc)
    finally:
        if not keep_collector_paused:
            resume_collector()


def console() -> None:
    """The process entry point (`decide`, `python -m disagg_decider`): `main`, except that once
    the fast lane has answered, the process ends without the interpreter's teardown.

    Only for the fast lane: the typer commands (servers, batches, files written with `--out`)
    end the ordinary way. The exit code is the fast lane's; stdout and stderr are flushed
    first, and if that fails (a closed pipe) the ordinary shutdown takes over and reports it
    as it always has. Nothing else is pending at that point: the fast lane writes no file,
    starts no thread and registers no exit handler that does more than `gc.freeze`.
    """
    request = verdict_request(sys.argv[1:])
    if request is None:
        main()
        return
    skip_pydantic_plugin_discovery()
    code = answer(request, keep_collector_paused=True)
    end_process(code)
    from disagg_decider.cli_verdict import resume_collector  # a stream could not be flushed

    resume_collector()
    if code:
        sys.exit(code)


def end_process(code: int) -> None:
    """Flush stdout and stderr and end the process with `code`, skipping the teardown; return
    (leaving the ordinary shutdown to it) if a stream cannot be flushed."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


if __name__ == "__main__":
    console()
