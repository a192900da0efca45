"""Azure LLM inference traces (CSV): `TIMESTAMP,ContextTokens,GeneratedTokens`.

Timestamps are ISO date-times (2023: naive, 2024: with +00:00; both UTC) or plain seconds.
Rows are read in chunks: a plain chunk (no quotes, every row as wide as the header, every value
valid) is parsed by numpy, any other row by row with Python's csv reader, which names the line
at fault. Why: one Python parse per cell took 4.3 CPU-s for a 20 MB (544,000-row) trace; the
chunks take about 1. A header of more than `MAX_COLUMNS` columns is not a trace.
"""

from __future__ import annotations

import csv
import math
import re
import warnings
from datetime import UTC, datetime

import numpy as np

from disagg_decider.errors import UserError, excerpt
from disagg_decider.sim.trace_fields import (
    MAX_TIMESTAMP_S,
    Trace,
    build_trace,
    check_order,
    checked_timestamp,
    checked_tokens,
)
from disagg_decider.workload import MAX_TOKENS

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MAX_COLUMNS = 64  # Azure traces have 3
AZURE_CHUNK_ROWS = 8192
_SUBMICRO = re.compile(r"(\.\d{6})\d+")  # datetime takes at most microseconds


def read_azure(lines: list[str], source: str) -> Trace:
    try:
        return _azure_rows(lines, source)
    except csv.Error as exc:
        raise UserError(f"{source}: not a readable CSV ({exc})") from None


def _azure_rows(lines: list[str], source: str) -> Trace:
    """Rows in chunks: each chunk parsed with numpy when it is plain (no quotes, every row with
    the header's columns, every value valid), else row by row, which names the line at fault.
    Why: one Python parse per cell took 4.3 CPU-s for a 20 MB (544,000-row) trace."""
    header = next(csv.reader(lines[:1]), [])
    if len(header) > MAX_COLUMNS:
        raise UserError(
            f"{source} line 1: {len(header):,} columns; an Azure trace has "
            f"{len(AZURE_COLUMNS)} ({','.join(AZURE_COLUMNS)}), at most {MAX_COLUMNS} are read"
        )
    names = {name.strip().lower(): i for i, name in enumerate(header)}
    missing = [c for c in AZURE_COLUMNS if c.lower() not in names]
    if missing:
        raise UserError(
            f"{source} line 1: missing column(s) {', '.join(missing)}; an Azure trace starts "
            f"with the header {','.join(AZURE_COLUMNS)} (a Mooncake trace is JSON lines)"
        )
    cols = tuple(names[c.lower()] for c in AZURE_COLUMNS)
    plain = not any('"' in line for line in lines)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    previous = -math.inf
    for start in range(1, len(lines), AZURE_CHUNK_ROWS):
        chunk = lines[start : start + AZURE_CHUNK_ROWS]
        got = _azure_fast(chunk, cols, len(header)) if plain else None
        if got is None:
            got = _azure_slow(chunk, start + 1, header, cols, source)
        times = got[0]
        if times.size:
            _check_chunk_order(times, previous, chunk, source, start + 1)
            previous = float(times[-1])
        parts.append(got)
    times, prompts, outputs = (
        np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in range(3)
    )
    return build_trace(
        source, "azure", times, prompts, outputs, np.zeros(len(times), dtype=np.int64)
    )


def _azure_fast(chunk: list[str], cols: tuple[int, int, int], width: int):
    """The chunk's (times, prompts, outputs) arrays, or None when any row needs a closer look."""
    if any(n != width - 1 for n in map(_commas, chunk)):  # blank lines, short or ragged rows
        return None
    cells = ",".join(chunk).split(",")  # one flat list of strings: no list per row for the GC
    it, ip, io = cols
    try:
        prompts = np.array(cells[ip::width]).astype(np.float64)
        outputs = np.array(cells[io::width]).astype(np.float64)
    except ValueError:
        return None
    for tokens in (prompts, outputs):
        if not (np.isfinite(tokens) & (tokens >= 0) & (tokens <= MAX_TOKENS)).all():
            return None
        if (tokens != np.floor(tokens)).any():
            return None
    times = _fast_times([c.strip() for c in cells[it::width]])
    if times is None:
        return None
    return times, prompts.astype(np.int64), outputs.astype(np.int64)


def _commas(line: str) -> int:
    return line.count(",")


def _fast_times(cells: list[str]) -> np.ndarray | None:
    """Seconds since the epoch, from plain numbers or ISO date-times (UTC, naive or +00:00)."""
    try:
        seconds = np.array(cells).astype(np.float64)
    except ValueError:
        seconds = None
    if seconds is None:
        if cells[0].endswith("+00:00") and all(c.endswith("+00:00") for c in cells):
            cells = [c[:-6] for c in cells]
        if min(map(len, cells)) < 10:
            return None  # a year or a month alone: the row-by-row path says what is wrong
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a time zone numpy would drop: row by row
                stamps = np.array(cells).astype("datetime64[ns]").astype("datetime64[us]")
        except (ValueError, UserWarning, DeprecationWarning):
            return None
        if np.isnat(stamps).any():
            return None
        seconds = stamps.astype(np.int64) / 1e6
    if not (np.isfinite(seconds) & (np.abs(seconds) <= MAX_TIMESTAMP_S)).all():
        return None
    return seconds


def _azure_slow(chunk: list[str], first_line: int, header, cols, source: str):
    """Row by row with Python's csv reader: quoted cells, blank lines, and exact errors."""
    it, ip, io = cols
    times, prompts, outputs = [], [], []
    for line_no, row in enumerate(csv.reader(chunk), start=first_line):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) <= max(cols) or len(row) > MAX_COLUMNS:
            raise UserError(
                f"{source} line {line_no}: {len(row):,} field(s), expected {len(header)} "
                f"({excerpt(','.join(header))})"
            )
        times.append(_azure_time(row[it], source, line_no))
        prompts.append(checked_tokens(row[ip], "ContextTokens", source, line_no))
        outputs.append(checked_tokens(row[io], "GeneratedTokens", source, line_no))
        check_order(times, source, line_no)
    return (
        np.asarray(times, dtype=float),
        np.asarray(prompts, dtype=np.int64),
        np.asarray(outputs, dtype=np.int64),
    )


def _check_chunk_order(times: np.ndarray, previous: float, chunk, source, first_line) -> None:
    back = np.flatnonzero(np.diff(np.concatenate(([previous], times))) < 0)
    if back.size:  # the row's line: count non-blank lines up to it
        row, seen = int(back[0]), -1
        for offset, line in enumerate(chunk):
            seen += bool(line.strip())
            if seen == row:
                earlier = previous if row == 0 else float(times[row - 1])
                check_order([earlier, float(times[row])], source, first_line + offset)


def _azure_time(cell: str, source: str, line_no: int) -> float:
    """Seconds: an ISO date-time (Azure writes 7 fractional digits) or a plain number."""
    value = cell.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        return checked_timestamp(seconds, value, "TIMESTAMP", source, line_no)
    try:
        stamp = datetime.fromisoformat(_SUBMICRO.sub(r"\1", value[:64]))
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError, OSError):
        raise UserError(
            f"{source} line {line_no}: TIMESTAMP {excerpt(value)} is neither a date-time "
            "(2023-11-16 18:15:46.680590) nor a number of seconds"
        ) from None
