"""`decide batch --format json` rows: `json.dumps(item, indent=2, allow_nan=False)`, indented
two more spaces, the same text at a fraction of the cost.

The standard library encodes in C only without `indent`; with it, its pure-Python generator
chain cost ~300 us a verdict (~600 lines), a tenth of deciding it. This writes the same
text from a walk that handles JSON's plain types (str, int, float, bool, None, dict with
str keys, list, tuple) inline and quotes strings with the standard library's own C function.
Anything else (another type, a key that is not a string, a float that is not finite) is
left to `json` itself, whose text or error is then the answer.

Both layouts (`indented_row`, and `line_row` for JSONL) write a `provenance.Shared` dict (the
labels every verdict of a shape shares) from the text kept on it: the ~150 labels of a verdict
are encoded once per shape, not once per row.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _quoted  # what json uses (ensure_ascii)
from typing import Any

from disagg_decider.provenance import Shared

INDENT = "  "
_INF = float("inf")
_STANDARD = json.JSONEncoder(allow_nan=False, indent=len(INDENT))
_ONE_LINE = json.JSONEncoder(allow_nan=False)  # `json.dumps(item, allow_nan=False)`, built once


class _Unplain(Exception):
    """A value the walk leaves to `json` (see the module's docstring)."""


def indented_row(item: Any) -> str:
    """`textwrap.indent(json.dumps(item, indent=2, allow_nan=False), "  ")`: the row as the
    JSON array's member (every line two spaces in)."""
    parts: list[str] = [INDENT]
    try:
        _into(item, parts, "\n" + INDENT)
    except (_Unplain, RecursionError):  # RecursionError: a cycle, json's error
        return INDENT + _STANDARD.encode(item).replace("\n", "\n" + INDENT)
    return "".join(parts)


def _into(value: Any, parts: list[str], newline: str) -> None:
    """The container `value`'s JSON appended to `parts`; `newline` breaks a line at its own
    depth. Scalar members are written in the loop, by exact type: a call per container, not
    per member (a verdict has ~1,000 members in ~60 containers)."""
    kind = type(value)
    append = parts.append
    if kind is dict:
        if not value:
            append("{}")
            return
        inner = newline + INDENT
        separator = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unplain
            leaf = type(item)
            if leaf is str:
                append(f"{separator}{_quoted(key)}: {_quoted(item)}")
            elif leaf is float and -_INF < item < _INF:  # not NaN or infinite: json's error
                append(f"{separator}{_quoted(key)}: {float.__repr__(item)}")
            elif leaf is int:
                append(f"{separator}{_quoted(key)}: {int.__repr__(item)}")
            elif item is None:
                append(f"{separator}{_quoted(key)}: null")
            elif leaf is bool:
                append(f"{separator}{_quoted(key)}: {'true' if item else 'false'}")
            elif leaf is Shared:
                append(f"{separator}{_quoted(key)}: {_shared_text(item, inner)}")
            else:
                append(f"{separator}{_quoted(key)}: ")
                _into(item, parts, inner)
            separator = "," + inner
        append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            append("[]")
            return
        inner = newline + INDENT
        separator = "[" + inner
        for item in value:
            leaf = type(item)
            if leaf is str:
                append(f"{separator}{_quoted(item)}")
            elif leaf is float and -_INF < item < _INF:
                append(f"{separator}{float.__repr__(item)}")
            elif leaf is int:
                append(f"{separator}{int.__repr__(item)}")
            elif item is None:
                append(f"{separator}null")
            elif leaf is bool:
                append(f"{separator}{'true' if item else 'false'}")
            else:
                append(separator)
                _into(item, parts, inner)
            separator = "," + inner
        append(newline + "]")
    else:  # another type, or a float that is not finite
        raise _Unplain


def _shared_text(labels: Shared, newline: str | None) -> str:
    """A `Shared` dict's text, written once and kept on it: indented at `newline`'s depth, or
    on one line (None, `line_row`)."""
    text = labels.texts.get(newline)
    if text is None:
        if newline is None:
            text = _ONE_LINE.encode(dict(labels))
        else:
            parts: list[str] = []
            _into(dict(labels), parts, newline)
            text = "".join(parts)
        labels.texts[newline] = text
    return text


def line_row(item: dict[str, Any]) -> str:
    """`json.dumps(item, allow_nan=False)` (a JSONL row). A verdict's row ends with its
    `provenance`, whose `Shared` label dicts are spliced in from their kept text; the rest is
    the standard library's C encoder."""
    last = next(reversed(item), None) if type(item) is dict and len(item) > 1 else None
    tail = item[last] if type(last) is str else None
    if type(tail) is not dict or not _spliceable(tail):
        return _ONE_LINE.encode(item)
    head = dict(item)
    del head[last]
    members = [
        f"{_quoted(k)}: {_shared_text(v, None) if type(v) is Shared else _ONE_LINE.encode(v)}"
        for k, v in tail.items()
    ]
    # `head` is non-empty, so its text ends with "}" after its last member.
    return f"{_ONE_LINE.encode(head)[:-1]}, {_ONE_LINE.encode(last)}: {{{', '.join(members)}}}}}"


def _spliceable(tail: dict[Any, Any]) -> bool:
    """Whether `line_row` writes this last member itself: string keys, a `Shared` among its
    values (any other key is json's to convert or refuse)."""
    return all(type(k) is str for k in tail) and any(type(v) is Shared for v in tail.values())
