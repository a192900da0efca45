"""One exception type for everything a user can get wrong, and how to quote what they gave.

The CLI turns `UserError` into a message and exit code 2; the MCP server turns it into a tool
error. Anything else that escapes is a bug in this program, not in the user's input.

Values a user (or a language model calling the MCP server) supplied are quoted only through
`excerpt`: a short, escaped prefix and the length, so a 10 MB string or a file's secret
contents never come back whole, and control characters cannot reach a terminal.
"""

from __future__ import annotations

EXCERPT_CHARS = 80
NEAREST_MAX_CHARS = 64  # "did you mean" only for names a person could have typed


class UserError(Exception):
    """Bad input from a user: a file, a field, an id. The message says what would be valid."""


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """`repr`-style quote of at most `limit` characters, plus the full length when cut.

    Strings are sliced before `repr` so a huge value costs nothing; containers are described
    by type and size instead of being rendered (their repr is what an alias bomb expands).
    """
    if isinstance(value, str):
        shown = ascii(value[:limit])
        return shown if len(value) <= limit else f"{shown}... ({len(value):,} characters)"
    if isinstance(value, bytes):
        return f"{value[:limit]!a}" + ("" if len(value) <= limit else f"... ({len(value):,} bytes)")
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if value.bit_length() > 200:
            return f"an integer of {value.bit_length():,} bits"
        return repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return f"a mapping of {len(value):,} key(s)"
    if isinstance(value, list | tuple | set):
        return f"a list of {len(value):,} item(s)"
    return f"a {type(value).__name__}"


def clip(text: str, limit: int = 160) -> str:
    """A message fragment (a parser's complaint, a path): one line, escaped, at most `limit`."""
    flat = ascii(text[: limit + 1])[1:-1]
    return flat if len(text) <= limit else f"{flat[:limit]}... ({len(text):,} characters)"


def nearest(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """A 'did you mean' hint, or the list of valid names when nothing is close.

    Only short names are compared: difflib is quadratic, and a megabyte-long key is no typo.
    """
    import difflib

    if len(name) <= NEAREST_MAX_CHARS:
        close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.5)
        if close:
            return f"did you mean '{close[0]}'?"
    return "valid: " + ", ".join(sorted(choices))
