"""Escaping and number formatting for generated markdown.

User-supplied strings (workload names, descriptions, model ids read from a config file) go
through `md` or `cell` before they reach a template, so they stay on one line, cannot close a
table cell, open an HTML comment, start a code span or become front matter. Numbers go through
`num`/`integer` so the same value always prints the same way, on every machine.
"""

from __future__ import annotations

import json
import math
import re

# CommonMark lets any ASCII punctuation be backslash-escaped; these are the characters that can
# start or end inline markup (emphasis, code, links, HTML, tables, strikethrough).
_MARKUP = re.compile(r"([\\`*_\[\]<>|~])")
_WHITESPACE = re.compile(r"\s+")
# Terminal escapes (ESC, OSC, CSI), other C0/C1 controls, bidi embeddings, overrides, isolates
# and marks, and the byte-order mark: removed from user text wherever it is shown.
_INVISIBLE = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


def strip_invisible(text: object) -> str:
    """The text without control, escape and bidi-override characters (tabs/newlines kept)."""
    return _INVISIBLE.sub("", str(text))


def one_line(text: object) -> str:
    """Collapse every run of whitespace (newlines, U+2028 included) to one space; drop
    control and bidi characters."""
    return _WHITESPACE.sub(" ", strip_invisible(text)).strip()


def terminal_text(text: object) -> str:
    """User text for a rich console: invisible characters dropped, rich markup escaped."""
    from rich.markup import escape

    return escape(strip_invisible(text).replace("\u2028", " ").replace("\u2029", " "))


def inline(text: object) -> str:
    """Inline markdown text (a table cell, the rest of a line): one line, markup escaped."""
    return _MARKUP.sub(r"\\\1", one_line(text)).replace("&", "&amp;")


def md(text: object) -> str:
    """Text that may start a line: `inline`, plus an escaped leading block marker.

    A leading character that would make the line a heading, list item or thematic break
    (`#`, `-`, `+`, `=`, digits followed by `.` or `)`) is escaped, so the string is inert
    wherever a template puts it (`>` is already escaped by `inline`).
    """
    line = inline(text)
    if re.match(r"[#+=-]", line):
        return "\\" + line
    if m := re.match(r"(\d+)([.)])", line):
        return f"{m[1]}\\{m[2]}{line[m.end() :]}"
    return line


def cell(text: object) -> str:
    """A table cell: `inline`, and never empty (an empty cell reads as a missing column)."""
    return inline(text) or "-"


def code(text: object, in_table: bool = False) -> str:
    """An inline code span that survives backticks inside the text (CommonMark fences).

    In a GFM table `|` must be escaped even inside code (the table splits cells first).
    """
    line = one_line(text)
    if not line:
        return "` `"
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    span = f"{fence}{pad}{line}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def code_cell(text: object) -> str:
    return code(text, in_table=True)


def yaml_str(text: object) -> str:
    """A YAML scalar for front matter: a JSON string is a valid double-quoted YAML scalar."""
    return json.dumps(one_line(text), ensure_ascii=True)


def num(x: float | int | None, digits: int = 1) -> str:
    """Fixed decimals with thousands separators; `-` for a missing value, no negative zero."""
    if x is None:
        return "-"
    x = float(x)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = f"{x:,.{digits}f}"
    return text[1:] if text.startswith("-") and float(text.replace(",", "")) == 0 else text


def integer(x: float | int | None) -> str:
    return num(x, 0)


def sig(x: float | None, figures: int = 3) -> str:
    """Significant figures for values spanning decades (transfer times from 0.01 ms to 10 s)."""
    if x is None:
        return "-"
    x = float(x)
    if not math.isfinite(x):
        return num(x)
    if x == 0:
        return "0"
    decimals = max(figures - 1 - math.floor(math.log10(abs(x))), 0)
    return num(x, decimals)


def percent(share: float, digits: int = 0) -> str:
    return f"{num(share * 100, digits)}%"


def tokens_label(tokens: int) -> str:
    """1024 -> 1K, 32768 -> 32K, 131072 -> 128K; other values print in full."""
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{tokens // 1024}K"
    return f"{tokens:,}"


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def count(n: int, noun: str) -> str:
    """`1 GPU`, `2 GPUs`: a count with its noun, singular where it is one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
