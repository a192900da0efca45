"""One exception type for everything a user can get wrong.

The CLI turns it into a message and exit code 2; the MCP server turns it into a tool error.
Anything else that escapes is a bug in this program, not in the user's input.
"""


class UserError(Exception):
    """Bad input from a user: a file, a field, an id. The message says what would be valid."""


def nearest(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """A 'did you mean' hint, or the list of valid names when nothing is close."""
    import difflib

    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.5)
    if close:
        return f"did you mean '{close[0]}'?"
    return "valid: " + ", ".join(sorted(choices))
