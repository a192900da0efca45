"""The options every verdict-producing command takes, declared once: `decide`, `decide batch`
and `decide frontier` read a workload through the same rulebook, overrides and calibration, and
write to the same kind of `--out` file, so they name and explain those options the same way.

Kept apart from `cli_common` (which the verdict's fast path imports) because declaring an option
needs typer, which a plain verdict never loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

OutFile = Annotated[
    Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
]
ForceOut = Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")]


def repeatable(kind: type, flag: str, metavar: str, help: str) -> Any:
    """An option given any number of times (`--set a=1 --set b=2`): a list of `kind`, None
    where it is not given."""
    return Annotated[list[kind] | None, typer.Option(flag, metavar=metavar, help=help)]


RuleSets = repeatable(
    str, "--set", "PARAM=VALUE", "Override a rule parameter, e.g. --set min_gain=1.2 (repeatable)."
)
RuleFiles = repeatable(
    Path,
    "--rules",
    "FILE",
    "Extra rule file: adds rules, or replaces shipped ones with the same id.",
)
CalibrationFile = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        metavar="FILE",
        help="Calibration file from `decide calibrate`: its constants replace the defaults "
        "for a matching model/GPU/engine (overrides the workload's calibration:).",
    ),
]


def count(flag: str, top: int, help: str) -> Any:
    """A whole number from 1 to `top` (a limit or a server setting): typer refuses the rest,
    naming the flag and the range."""
    return Annotated[int, typer.Option(flag, min=1, max=top, help=help)]
