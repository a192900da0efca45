"""Checks on an MCP request made before any work: sizes, unknown argument names, resource URIs.

Each returns the problem as text naming where it is (or None), and costs microseconds, so a
hostile request is refused for less than it took to send.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from disagg_decider.errors import clip, excerpt, nearest

MAX_ARGUMENT_VALUES = 20_000
MAX_ARGUMENT_CHARS = 1_000_000
MAX_ARGUMENT_DEPTH = 32
MAX_URI_SHOWN = 120


def argument_bounds_problem(arguments: Any) -> str | None:
    """What makes a call's arguments too large or too deep to validate, naming where, or None.

    Bounded work (it stops at the first limit), so a hostile call costs microseconds here
    instead of seconds in validation and in messages quoting it.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(arguments, ())]
    values = chars = 0

    def where(path: tuple[str, ...]) -> str:  # spelled out only for a message
        return ".".join(path) or "arguments"

    while stack:
        node, path = stack.pop()
        values += 1
        if values > MAX_ARGUMENT_VALUES:
            return f"{where(path)}: more than {MAX_ARGUMENT_VALUES:,} values in one call"
        if len(path) > MAX_ARGUMENT_DEPTH:
            return f"{where(path)[:200]}: nested deeper than {MAX_ARGUMENT_DEPTH} levels"
        if isinstance(node, str):
            chars += len(node)
            if chars > MAX_ARGUMENT_CHARS:
                return (
                    f"{where(path)}: a string of {len(node):,} characters; at most "
                    f"{MAX_ARGUMENT_CHARS:,} characters of text per call"
                )
        elif isinstance(node, dict):
            for key, value in node.items():
                name = str(key)
                chars += len(name)
                if chars > MAX_ARGUMENT_CHARS or len(name) > 1000:
                    return f"{where(path)}: a key of {len(name):,} characters ({excerpt(name)})"
                stack.append((value, (*path, name)))
        elif isinstance(node, list | tuple):
            stack.extend((v, (*path, str(i))) for i, v in enumerate(node))
    return None


def unknown_arguments_problem(arguments: dict[str, Any], valid: Iterable[str]) -> str | None:
    """Argument names the tool does not take (the SDK would drop them silently), with the
    valid names listed, so a misspelt option is not mistaken for one that was applied."""
    names = sorted(valid)
    unknown = [key for key in arguments if key not in names]
    if not unknown:
        return None
    shown = ", ".join(excerpt(str(key)) for key in unknown[:5])
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    hint = nearest(str(unknown[0]), names) if len(unknown) == 1 else ""
    hint = hint if hint.startswith("did you mean") else ""
    listing = ", ".join(names) if names else "none"
    text = f"unknown argument{'s' if len(unknown) > 1 else ''} {shown}{more}"
    return f"{text}; {hint + '; ' if hint else ''}valid arguments: {listing}"


def unknown_resource_text(uri: str, known: Iterable[str]) -> str:
    """The refusal of a resource URI nobody serves: the URI cut, the known ones listed."""
    shown = clip(uri, MAX_URI_SHOWN)
    return f"unknown resource {shown}; known resources: {', '.join(sorted(known))}"
