"""A progress bar on stderr for long commands (batches, simulations, sweeps).

Shown only on a terminal (and not with --quiet): in a pipe or a CI log it would be noise
between the output's lines. Rich is imported only when a bar is shown.
"""

from __future__ import annotations

import sys


class Progress:
    """A rich progress bar on stderr, shown only on a terminal and unless `quiet`."""

    def __init__(self, total: int, label: str, quiet: bool = False) -> None:
        self.bar = None
        if quiet or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = self.bar.add_task(label, total=total)

    def __enter__(self) -> Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def set(self, done: int, label: str | None = None) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, description=label)

    def advance(self, label: str | None = None, steps: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=steps, description=label)
