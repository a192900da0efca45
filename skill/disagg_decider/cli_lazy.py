"""The `decide` subcommands, loaded only when named, and the help text's value names.

`decide --workload w.yaml` is the common call and must start fast: importing every
subcommand's module up front would load the simulator, rule lint, deploy emitters, renderers
and calibration code that a verdict never runs. So the top-level group holds a table of
names; a command's module is imported when that command is invoked (or when `decide --help`
lists them all), through a thin registrar that imports its module inside.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path

import typer
from typer.core import TyperGroup

# Subcommands that are one typer command: name -> (module, the command function in it). A
# module is named by its full dotted name, which `tests/import_graph.py` counts as an import.
COMMANDS: dict[str, tuple[str, str]] = {
    "batch": ("disagg_decider.batch_cli", "batch_command"),
    "frontier": ("disagg_decider.frontier_cli", "frontier_command"),
    "catalog": ("disagg_decider.catalog_cli", "catalog_command"),
    "schema": ("disagg_decider.rules.cli", "schema_command"),
    "deploy": ("disagg_decider.deploy.cli", "deploy_command"),
    "render": ("disagg_decider.render.cli", "render_command"),
    "calibrate": ("disagg_decider.calibrate.cli", "calibrate_command"),
}


def _command(name: str) -> Callable[[typer.Typer], None]:
    """The registrar of a plain subcommand: imports its module only when it runs."""

    def register(app: typer.Typer) -> None:
        module, function = COMMANDS[name]
        app.command(name)(getattr(importlib.import_module(module), function))

    return register


def _rules(app: typer.Typer) -> None:
    from disagg_decider.rules.cli import rules_app

    app.add_typer(rules_app, name="rules")


def _mcp(app: typer.Typer) -> None:
    from disagg_decider.mcp_cli import mcp_app, mcp_command

    # A plain command, so `decide mcp --help` shows options only (no COMMAND to give).
    app.command("mcp", help=mcp_app.info.help)(mcp_command)


def _simulator(app: typer.Typer) -> None:
    from disagg_decider.sim.cli import register

    register(app)  # decide simulate, decide sweep, decide trace summarize


# In the order `decide --help` lists them (typer listed commands first, then groups).
SUBCOMMANDS: dict[str, Callable[[typer.Typer], None]] = {
    "batch": _command("batch"),
    "catalog": _command("catalog"),
    "schema": _command("schema"),
    "deploy": _command("deploy"),
    "render": _command("render"),
    "mcp": _mcp,
    "simulate": _simulator,
    "sweep": _simulator,
    "frontier": _command("frontier"),
    "calibrate": _command("calibrate"),
    "rules": _rules,
    "trace": _simulator,
}


def _noop() -> None:
    """Group callback: makes typer build a group, so each command keeps its own name."""


def build_command(name: str):
    """The click command for one subcommand, built as the eager `decide` app built it."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    holder.callback()(_noop)
    SUBCOMMANDS[name](holder)
    command = typer.main.get_command(holder).commands[name]
    readable_metavars(command)
    return command


class LazyCommands(MutableMapping):
    """Subcommand name -> click command, building each on first access (names need none)."""

    def __init__(self, eager: MutableMapping | None = None) -> None:
        self._built = dict(eager or {})

    def __getitem__(self, name: str):
        if name not in self._built:
            if name not in SUBCOMMANDS:
                raise KeyError(name)
            self._built[name] = build_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from SUBCOMMANDS
        yield from (n for n in self._built if n not in SUBCOMMANDS)

    def __len__(self) -> int:
        return len(SUBCOMMANDS) + sum(1 for n in self._built if n not in SUBCOMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in SUBCOMMANDS or name in self._built


class LazyGroup(TyperGroup):
    """The `decide` group: its subcommands come from `SUBCOMMANDS`, each loaded when used."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.commands)


def readable_metavars(command) -> None:
    """Name values FILE, DIR, N, NUMBER, TEXT in --help, where typer 0.29 prints Python types
    (`<list[Path]>`, `<int range>`); a metavar a module set itself is kept. Lazily loaded
    subcommands are skipped here: `build_command` treats each as it loads."""
    from typing import get_args

    for param in command.params:
        descriptor = getattr(param, "type_descriptor", None)
        if param.param_type_name == "argument" and descriptor is not None:
            param.metavar = param.metavar or (param.name or "value").upper()
            if not descriptor.is_choice:  # the name says it all; choices keep <a|b|c>
                param.display_type_rich = lambda ctx: None
            continue
        if param.metavar is not None or descriptor is None or getattr(param, "is_flag", False):
            continue
        if descriptor.is_choice:
            continue  # typer's <text|json> already lists the values
        element = get_args(descriptor.annotation)[0] if descriptor.is_list else None
        if descriptor.is_path or element is Path:
            param.metavar = "DIR" if "dir" in (param.name or "") else "FILE"
        else:
            kind = element or descriptor.annotation
            param.metavar = {int: "N", float: "NUMBER"}.get(kind, "TEXT")
    commands = getattr(command, "commands", {})
    if not isinstance(commands, LazyCommands):
        for sub in commands.values():
            readable_metavars(sub)
