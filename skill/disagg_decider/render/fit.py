"""Terminal tables that keep one line per row at any width (80 columns, a pipe, a narrow pane).

Rich shrinks a table that does not fit by folding its widest columns, down to one character
per line, or by dropping columns it cannot fold. Here the widths are chosen up front: the
widest column that may be cut loses a character at a time until the row fits, and cut cells
end with an ellipsis. Columns marked `keep` (ids, decisions, numbers) are never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
GAP_CHARS = 3  # between two columns: a space of padding, the (blank) divider, a space
MIN_CUT_WIDTH = 4  # a cut column keeps at least three characters and the ellipsis


@dataclass(frozen=True)
class Column:
    header: str
    keep: bool = False  # never cut (ids, decisions, numbers)
    right: bool = False  # right-justified (numbers)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, ending in an ellipsis where it was cut."""
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + ELLIPSIS if width > 0 else ""


def column_widths(natural: Sequence[int], keep: Sequence[bool], total_chars: int) -> list[int]:
    """Widths whose sum (with the gaps) fits `total_chars`, cutting the widest cuttable first."""
    widths = list(natural)
    room = total_chars - GAP_CHARS * (len(widths) - 1)
    while sum(widths) > room:
        cuttable = [i for i, w in enumerate(widths) if not keep[i] and w > MIN_CUT_WIDTH]
        if not cuttable:
            break  # only kept columns left: they print whole and the line wraps
        widest = max(cuttable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def fitted_table(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], width_chars: int
):
    """A rich Table of `rows` that prints one line per row in `width_chars` columns.

    Cells are plain text, printed as text (never read as rich markup), one line each.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from disagg_decider.render.text import one_line

    rows = [[one_line(text) for text in r] for r in rows]
    natural = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    widths = column_widths(natural, [c.keep for c in columns], width_chars)
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False
    )
    for c, w in zip(columns, widths, strict=True):
        table.add_column(
            Text(cut(c.header, w)), justify="right" if c.right else "left", no_wrap=True, width=w
        )
    for r in rows:
        table.add_row(*(Text(cut(text, w)) for text, w in zip(r, widths, strict=True)))
    return table
