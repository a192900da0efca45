"""Helpers every `decide` subcommand shares: consoles, `--set` pairs and `--out` files.

They live below the command modules (`cli`, `deploy.cli`, `sim.cli`, ...) so that those import
this and never each other. Rich is imported only when something is printed.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from disagg_decider.errors import UserError, excerpt


def choices(name: str, *values: str) -> type[StrEnum]:
    """The choices of a `--flag`, as typer takes them: a StrEnum whose members are `values`,
    each named as its value spelled as an identifier ("least-work" -> `least_work`)."""
    return StrEnum(name, [(value.replace("-", "_"), value) for value in values])


# `--format` of the commands that print a table, a JSON document or a markdown section.
ReportFormat = choices("ReportFormat", "text", "json", "markdown")


def out():
    """The stdout console; rich is imported only when something is printed with it."""
    from rich.console import Console

    return Console()


def err():
    from rich.console import Console

    return Console(stderr=True)


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """`--set name=value` pairs; values are typed later against the parameter."""
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(
                f"--set {excerpt(pair)}: expected PARAMETER=VALUE, e.g. --set min_gain=1.2"
            )
        result[name.strip()] = value.strip()
    return result


def write_output(text: str, out_path: Path | None, force: bool) -> None:
    """Print, or write a file; an existing file is only replaced with --force."""
    if out_path is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    from disagg_decider.outfiles import write_text

    write_text(out_path, text if text.endswith("\n") else text + "\n", force, "--out")
    from disagg_decider.render.text import terminal_text

    err().print(f"wrote {terminal_text(out_path)}", highlight=False)  # "out[/].md" is no markup


def plain_text(print_into: Callable[[Any], None], width: int) -> str:
    """What `print_into(console)` prints, as plain text for a file (no colours, fixed width)."""
    from rich.console import Console

    console = Console(record=True, width=width, file=io.StringIO())
    print_into(console)
    return console.export_text()
