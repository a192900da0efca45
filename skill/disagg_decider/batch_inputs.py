"""What `decide batch` reads: workload files, folders of them, globs and JSONL files, lazily.

A fleet sweep can name 100,000 workloads. Nothing here holds their contents: folders are
listed (names only), a JSONL file is read a line at a time, and the entries come out of a
generator in input order, to be cut into chunks for the workers (`batch_work`). Paths that do
not exist, folders without workloads and globs that match nothing are refused up front, before
anything is decided; a file that cannot be read or parsed becomes that workload's error row.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from disagg_decider.errors import UserError
from disagg_decider.userfiles import CONFIG_MAX_BYTES

WORKLOAD_SUFFIXES = (".yaml", ".yml")
JSONL_SUFFIX = ".jsonl"
GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Entry:
    """One workload to decide: a file to read, or a JSONL line already read."""

    label: str  # the row's "file": the path, or "FILE.jsonl:LINE"
    path: str | None = None  # a workload YAML file (read by the worker)
    text: str | None = None  # one JSONL line: the workload as a JSON object
    base_dir: str = "."  # where relative paths inside it (hf_config, calibration) start
    error: str | None = None  # what made it unreadable here (a JSONL line too long, bad UTF-8)


@dataclass(frozen=True)
class Source:
    """One command-line argument, expanded: files (a folder's, a glob's) or a JSONL file."""

    files: tuple[str, ...] = ()
    jsonl: Path | None = None
    count: int = 0


def plan(paths: list[Path]) -> list[Source]:
    """The arguments as sources, each with its number of workloads; refuses what holds none."""
    sources = []
    for path in paths:
        text = str(path)
        if path.suffix == JSONL_SUFFIX and not path.is_dir():
            sources.append(_jsonl_source(path))
        elif path.is_dir():
            names = _folder_files(path)
            if not names:
                raise UserError(f"{path}: folder has no *.yaml or *.yml workload files")
            sources.append(Source(files=tuple(names), count=len(names)))
        elif not path.exists() and any(c in text for c in GLOB_CHARS):
            matched = sorted(glob.iglob(text))
            if not matched:
                raise UserError(f"{text}: the pattern matches no file")
            sources.append(Source(files=tuple(matched), count=len(matched)))
        elif not path.exists():
            raise UserError(
                f"{path}: no such file or folder (give workload files, folders of *.yaml, "
                "glob patterns or a .jsonl file of workloads)"
            )
        else:
            sources.append(Source(files=(text,), count=1))
    return sources


def total(sources: list[Source]) -> int:
    return sum(s.count for s in sources)


def entries(sources: list[Source]) -> Iterator[Entry]:
    """Every workload of every source, in order, read no further ahead than asked for."""
    for source in sources:
        if source.jsonl is not None:
            yield from _jsonl_entries(source.jsonl)
        else:
            for name in source.files:
                yield Entry(label=name, path=name, base_dir=os.path.dirname(name) or ".")


def _folder_files(path: Path) -> list[str]:
    """A folder's workload files, sorted, as path strings (names are all that is kept)."""
    with os.scandir(path) as found:
        names = sorted(
            e.name for e in found if e.name.endswith(WORKLOAD_SUFFIXES) and not e.is_dir()
        )
    return [str(path / name) for name in names]


def _jsonl_source(path: Path) -> Source:
    """A JSONL file of workloads: its non-blank lines, counted without keeping them."""
    try:
        count = sum(1 for line in _lines(path) if line.strip())
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    if not count:
        raise UserError(f"{path}: has no workloads (one JSON object per line)")
    return Source(jsonl=path, count=count)


def _lines(path: Path) -> Iterator[bytes]:
    """The file's lines as bytes, each cut at CONFIG_MAX_BYTES + 1 (what follows is skipped)."""
    with open(path, "rb") as f:
        while True:
            line = f.readline(CONFIG_MAX_BYTES + 1)
            if not line:
                return
            if len(line) > CONFIG_MAX_BYTES and not line.endswith(b"\n"):
                while True:  # skip the rest of an over-long line a block at a time
                    rest = f.readline(CONFIG_MAX_BYTES)
                    if not rest or rest.endswith(b"\n"):
                        break
            yield line


def _jsonl_entries(path: Path) -> Iterator[Entry]:
    base = str(path.parent)
    number = 0
    for line in _lines(path):
        number += 1
        if not line.strip():
            continue
        label = f"{path}:{number}"
        if len(line) > CONFIG_MAX_BYTES:
            error = f"{label}: line longer than {CONFIG_MAX_BYTES:,} bytes (a workload is ~1 KB)"
            yield Entry(label=label, base_dir=base, error=error)
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            error = f"{label}: not UTF-8 text (byte {exc.start + 1} of the line)"
            yield Entry(label=label, base_dir=base, error=error)
            continue
        yield Entry(label=label, text=text, base_dir=base)
