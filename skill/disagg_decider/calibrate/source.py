"""Benchmark result files read under the same file rules as workloads, bounded in work.

Why: `decide calibrate` is pointed at files a benchmark wrote, often by a script, and every run
it finds is fitted (about a quarter of a CPU-second each). So each file goes through
`userfiles.open_regular` (regular files only: a FIFO or /dev/zero is refused before a read,
confined under an MCP policy, size-capped), and the work is capped up front:
- at most `Limits.max_files` files and `Limits.max_runs` runs in all (JSON Lines lines and
  JSON list items), each cap named with the flag that raises it;
- JSON Lines are parsed line by line from the stream, so a big file is never held whole (only
  its runs are); a single JSON document is parsed whole, within the size cap;
- nesting deeper than `MAX_DEPTH` levels is refused (a JSON bomb of 100,000 brackets is a
  message, not a RecursionError), and so is an integer beyond Python's 4,300 digits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disagg_decider.errors import UserError, clip
from disagg_decider.userfiles import decode_utf8, open_regular

MAX_BLANK_LINES = 100_000
MAX_DEPTH = 32  # AIPerf's input_config nests 4 levels
WHAT = "a benchmark result file (vllm bench serve or AIPerf JSON, SGLang bench_serving JSONL)"


@dataclass(frozen=True)
class Limits:
    """Caps on one `decide calibrate`; the CLI's --max-files, --max-runs, --max-file-mb and
    --max-values. Why the last: a parse builds a Python object per JSON value (32-64 bytes
    each), so a 64 MB file of `[],` would take 1.4 GB; values are counted on the raw bytes
    (commas and brackets, a C-speed count) before any object is built."""

    max_files: int = 64
    max_runs: int = 64
    max_file_bytes: int = 64_000_000
    max_values: int = 2_000_000  # JSON values per file: bounds the objects a parse builds

    def check_files(self, count: int) -> None:
        if count > self.max_files:
            raise UserError(
                f"{count:,} result files; at most {self.max_files:,} (each run in them is "
                "fitted); raise the cap with --max-files"
            )


class RunBudget:
    """Runs left under `Limits.max_runs`, counted across every file read."""

    def __init__(self, limits: Limits) -> None:
        self.limits, self.used = limits, 0

    def take(self, count: int, source: str, where: str) -> None:
        self.used += count
        if self.used > self.limits.max_runs:
            raise UserError(
                f"{source}: {where}: more than {self.limits.max_runs:,} runs in all (each is "
                "fitted, about 0.25 CPU-s apiece); raise the cap with --max-runs"
            )


class ResultFile:
    """One file's result objects, streamed; `sha256` is set once they have all been read."""

    def __init__(self, path: Path, limits: Limits, budget: RunBudget) -> None:
        self.path, self.limits, self.budget = path, limits, budget
        self.source = path.name
        self.sha256 = ""
        self.values = self.blank_lines = 0

    def records(self) -> Iterator[tuple[str, dict]]:
        digest = hashlib.sha256()
        with open_regular(
            self.path,
            what=WHAT,
            max_bytes=self.limits.max_file_bytes,
            raise_with="--max-file-mb",
        ) as stream:
            first, line_no = b"", 0
            for raw in stream:
                digest.update(raw)
                line_no += 1
                if raw.strip():
                    first = raw
                    break
                self._blank(line_no)
            if not first:
                raise UserError(f"{self.path}: no benchmark runs found (the file is empty)")
            head = self._try_line(first, line_no)
            if isinstance(head, dict):  # JSON Lines (or a one-line document): stream the rest
                yield from self._lines(stream, digest, head, line_no)
            else:
                rest = stream.read()
                digest.update(rest)
                self.values = 0  # the first line is counted again with the document
                yield from self._document(first + rest, line_no)
        self.sha256 = digest.hexdigest()

    def _lines(self, stream, digest, head: dict, line_no: int) -> Iterator[tuple[str, dict]]:
        """JSON Lines from the stream; a file of one line is a document ("run 1")."""
        pending: tuple[str, dict] | None = (f"line {line_no}", head)
        for raw in stream:
            digest.update(raw)
            line_no += 1
            if not raw.strip():
                self._blank(line_no)
                continue
            if pending is not None:
                self.budget.take(1, self.source, pending[0])
                yield pending
                pending = None
            where = f"line {line_no}"
            self.budget.take(1, self.source, where)
            self._count_values(raw, where)
            obj = loads(raw, self.source, where, jsonl=True)
            yield where, expect_object(obj, self.source, where)
        if pending is not None:
            self.budget.take(1, self.source, "run 1")
            yield "run 1", head

    def _document(self, data: bytes, first_line: int) -> Iterator[tuple[str, dict]]:
        self._count_values(data, "")
        text = decode_utf8(data, str(self.path)[:300], WHAT)
        del data
        doc = loads(text, self.source, "", first_line=first_line)
        if isinstance(doc, list):
            self.budget.take(len(doc), self.source, f"a list of {len(doc):,} runs")
            for i, obj in enumerate(doc):
                yield f"run {i + 1}", expect_object(obj, self.source, f"run {i + 1}")
        else:
            self.budget.take(1, self.source, "run 1")
            yield "run 1", expect_object(doc, self.source, "the document")

    def _blank(self, line_no: int) -> None:
        """Blank lines cost a loop turn each: a file of 64 million newlines is refused early."""
        self.blank_lines += 1
        if self.blank_lines > MAX_BLANK_LINES:
            raise UserError(
                f"{self.source}: line {line_no:,}: more than {MAX_BLANK_LINES:,} blank lines; "
                "a JSON Lines result file holds one run per line"
            )

    def _count_values(self, data: bytes, where: str) -> None:
        self.values += data.count(b",") + data.count(b"[") + data.count(b"{")
        if self.values > self.limits.max_values:
            at = f"{self.source}: {where}: " if where else f"{self.source}: "
            raise UserError(
                f"{at}more than {self.limits.max_values:,} JSON values in the file (a "
                "per-request record of a million requests?); raise the cap with --max-values"
            )

    def _try_line(self, raw: bytes, line_no: int) -> Any:
        """The first line's JSON if it parses on its own (None when it does not: then the file
        is one document spread over lines)."""
        self._count_values(raw, f"line {line_no}")
        try:
            return loads(raw, self.source, f"line {line_no}", jsonl=True)
        except UserError:
            return None


def loads(data: str | bytes, source: str, where: str, *, jsonl: bool = False, first_line=1):
    """JSON within the depth cap; every failure a `UserError` naming file and line."""
    at = f"{source}: {where}: " if where else f"{source}: "
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"{at}not UTF-8 text (byte {exc.start:,}); expected {WHAT}") from None
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        line = "" if jsonl else f" at line {exc.lineno + first_line - 1}"
        hint = "JSON Lines files hold one result object per line" if jsonl else f"expected {WHAT}"
        raise UserError(f"{at}not JSON ({clip(exc.msg)}{line}); {hint}") from None
    except RecursionError:
        raise UserError(f"{at}JSON nested more than {MAX_DEPTH} levels deep") from None
    except ValueError:  # the one ValueError json.loads raises besides JSONDecodeError
        raise UserError(
            f"{at}an integer of more than 4,300 digits; no benchmark writes one"
        ) from None
    _check_depth(value, at)
    return value


def _check_depth(value: Any, at: str) -> None:
    """Refuse containers nested more than `MAX_DEPTH` deep (walked without recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise UserError(f"{at}JSON nested more than {MAX_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def expect_object(obj: Any, source: str, where: str) -> dict:
    if not isinstance(obj, dict):
        raise UserError(f"{source}: {where}: expected a JSON object of benchmark results")
    return obj
