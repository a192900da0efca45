"""`decide batch` as a stream: chunks of workloads through the worker pool, rows out in order.

The inputs are read lazily (`batch_inputs`), cut into chunks of `chunk` workloads, decided in
`jobs` processes (`pool.WorkerPool`: one chunk per worker at a time, at most two chunks per
worker drawn and not yet written) and each chunk's rows are written, in input order, as soon
as it and the chunks before it are done. So memory is bounded by chunk x jobs whatever the
batch's length, and the first rows appear while the rest are being decided.

Ctrl-C stops the workers and keeps what is complete: every line (JSONL, CSV, the table) that
was written is whole, a JSON array is closed, and stderr says how far it got; exit code 130.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO

from disagg_decider.batch_inputs import Entry, Source, entries, total
from disagg_decider.batch_work import CSV_COLUMNS, Done, Options, csv_line, decide_chunk
from disagg_decider.errors import UserError

CHUNK_WORKLOADS = 512  # per call to a worker; decided in slices of batch_work.GROUP_WORKLOADS
FILE_WIDTH_CHARS = 140  # a table written with --out: wide enough that nothing is cut
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
TABLE_COLUMNS = (  # header, never cut, right-justified, narrowest width
    ("workload", False, False, 8),
    ("decision", True, False, 9),
    ("gain", True, True, 6),
    ("colocated", False, True, 9),
    ("P + D", False, True, 17),
    ("crossover", True, True, 9),
)
INFEASIBLE_NOTE = "* the chosen layout meets no target: see its `limits`"


@dataclass
class Outcome:
    """How the batch ended: workloads written, errors among them, whether Ctrl-C stopped it."""

    total: int
    written: int = 0
    errors: int = 0
    first_error: str | None = None
    interrupted: bool = False


class CtrlC:
    """SIGINT handler for the batch: the first Ctrl-C asks the loop to stop after the rows in
    hand (nothing is cut mid-line); a second one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._old = None

    def __enter__(self) -> CtrlC:
        try:
            self._old = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread (an embedding program): no handler
            self._old = None
        return self

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


def chunks(items: Iterator[Entry], size: int, options: Options) -> Iterator[tuple]:
    """(entries, options) jobs of `size` entries each, drawn from `items` only as needed."""
    while batch := list(islice(items, size)):
        yield batch, options


def run(
    sources: list[Source],
    options: Options,
    sink: IO[str],
    *,
    jobs: int,
    chunk: int = CHUNK_WORKLOADS,
    width_chars: int = FILE_WIDTH_CHARS,
    quiet: bool = False,
) -> Outcome:
    """Decide every workload of `sources` and write its row to `sink`, in order, as it comes."""
    from disagg_decider.heap import keep_heap_grown
    from disagg_decider.pool import WorkerPool
    from disagg_decider.progress import Progress

    outcome = Outcome(total=total(sources))
    writer = RowWriter(options.fmt, sink, outcome.total, width_chars)
    jobs = max(1, min(jobs, -(-outcome.total // chunk)))  # no idle workers for a short batch
    if jobs > 1:
        import disagg_decider.decide  # noqa: F401 - imported once here, inherited by the forks
    keep_heap_grown()  # a batch's searches stop faulting their arrays in (`heap.py`); forks too
    writer.begin()
    infeasible = 0
    with (
        CtrlC() as ctrl_c,
        WorkerPool(jobs) as pool,
        Progress(outcome.total, "deciding", quiet) as bar,
    ):
        jobs_in = chunks(entries(sources), chunk, options)
        for done in pool.ordered(decide_chunk, jobs_in, stop=lambda: ctrl_c.requested):
            writer.rows(done)
            outcome.written += len(done.rows)
            outcome.errors += len(done.errors)
            infeasible += done.infeasible
            if done.errors and outcome.first_error is None:
                outcome.first_error = done.errors[0]
            bar.advance(steps=len(done.rows))
        outcome.interrupted = ctrl_c.requested
    writer.end(infeasible > 0)
    return outcome


class RowWriter:
    """Writes each format's header, rows (flushed a chunk at a time) and closing lines."""

    def __init__(self, fmt: str, sink: IO[str], count: int, width_chars: int) -> None:
        self.fmt, self.sink, self.count, self.width_chars = fmt, sink, count, width_chars
        self.widths: list[int] | None = None
        self.first = True

    def begin(self) -> None:
        if self.fmt == "csv":
            self._write(csv_line(list(CSV_COLUMNS)) + "\n")
        elif self.fmt == "json":
            self._write("[\n")

    def rows(self, done: Done) -> None:
        if self.fmt == "table":
            lines = self._table_lines(done.rows)
        elif self.fmt == "json":
            lines = [(",\n" if i or not self.first else "") + r for i, r in enumerate(done.rows)]
            self._write("".join(lines))
            self.first = self.first and not done.rows
            return
        else:
            lines = [r + "\n" for r in done.rows]
        self._write("".join(lines))

    def end(self, any_infeasible: bool) -> None:
        if self.fmt == "json":
            self._write("\n]\n" if not self.first else "]\n")
        elif self.fmt == "table" and any_infeasible:
            self._write(INFEASIBLE_NOTE + "\n")

    def _table_lines(self, rows: list[list[str]]) -> list[str]:
        """Table rows at widths fixed by the first chunk (later cells are cut to them)."""
        from disagg_decider.render.fit import column_widths

        lines = []
        if self.widths is None:
            natural = [
                max([len(header), floor, *(len(r[i]) for r in rows)])
                for i, (header, _, _, floor) in enumerate(TABLE_COLUMNS)
            ]
            keep = [k for _, k, _, _ in TABLE_COLUMNS]
            self.widths = column_widths(natural, keep, self.width_chars)
            headers = [header for header, _, _, _ in TABLE_COLUMNS]
            lines.append(f"{self.count:,} workloads\n")
            lines.append(self._line(headers))
            lines.append("   ".join("─" * w for w in self.widths) + "\n")
        lines.extend(self._line(r) for r in rows)
        return lines

    def _line(self, cells: list[str]) -> str:
        from disagg_decider.render.fit import cut
        from disagg_decider.render.text import one_line

        assert self.widths is not None
        parts = []
        for text, width, (_, keep, right, _) in zip(cells, self.widths, TABLE_COLUMNS, strict=True):
            text = one_line(text) if keep else cut(one_line(text), width)
            parts.append(text.rjust(width) if right else text.ljust(width))
        return "   ".join(parts).rstrip() + "\n"

    def _write(self, text: str) -> None:
        self.sink.write(text)
        self.sink.flush()


def open_target(path: Path, force: bool):
    """The --out file, opened for streaming: refused if it exists (unless `force`), a symlink
    replaced by a file (never written through), a new file created exclusively."""
    from disagg_decider.outfiles import check_target

    check_target(path, force, "--out")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        return open(path, "w" if force else "x", encoding="utf-8", newline="")
    except FileExistsError:
        raise UserError(f"{path}: already exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UserError(f"--out {path}: cannot write ({exc.strerror})") from None


def summary_lines(outcome: Outcome, where: str) -> list[str]:
    """What stderr says after the rows: how far an interrupted batch got, and the errors."""
    lines = []
    if outcome.errors:
        lines.append(
            f"error: {outcome.errors:,} of {outcome.written:,} workloads could not be decided; "
            f'their rows carry the "error" (first: {outcome.first_error})'
        )
    if outcome.interrupted:
        lines.append(
            f"interrupted after {outcome.written:,} of {outcome.total:,} workloads; "
            f"partial output in {where}"
        )
    return lines


def stdout_sink() -> IO[str]:
    return sys.stdout
