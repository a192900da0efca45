"""Small markdown readers the render tests share: front matter, headings, tables."""

from __future__ import annotations

import re

import yaml

_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def front_matter(text: str) -> tuple[dict, str]:
    """(parsed front matter, body); fails the test when the block is missing or not closed."""
    assert text.startswith("---\n"), "no front matter at the top"
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end]), text[end + 5 :]


def headings(text: str, level: int) -> list[str]:
    prefix = "#" * level + " "
    return [line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)]


def section(text: str, heading: str) -> str:
    """The text under a heading, up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading)
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("#") and len(line) - len(line.lstrip("#")) <= level:
            break
        body.append(line)
    return "\n".join(body)


def cells(row: str) -> list[str]:
    """A GFM table row split on unescaped pipes, outer pipes dropped."""
    parts = _UNESCAPED_PIPE.split(row.strip())
    assert parts[0] == "" and parts[-1] == "", f"row does not start and end with a pipe: {row}"
    return [p.strip() for p in parts[1:-1]]


def tables(text: str) -> list[list[list[str]]]:
    """Every table outside code fences, as rows of cells (header first, separator dropped)."""
    found, current, fenced = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("|"):
            current.append(line)
            continue
        if current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    result = []
    for rows in found:
        assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", rows[1]), f"no separator row: {rows[1]}"
        result.append([cells(r) for r in rows[:1] + rows[2:]])
    return result


def assert_tables_rectangular(text: str) -> None:
    for table in tables(text):
        width = len(table[0])
        for row in table:
            assert len(row) == width, f"row has {len(row)} cells, header has {width}: {row}"
