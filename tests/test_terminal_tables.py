"""Terminal tables keep one line per row at 80 columns, 60 columns and in a pipe (issue 26).

Rich used to fold a squeezed column down to one character per line (`decide batch examples/ |
head` printed the workload name vertically) and to drop columns it could not fold.
"""

from __future__ import annotations

import os

import pytest

from disagg_decider.render.fit import Column, column_widths, cut, fitted_table
from disagg_decider.rules.loader import with_extra
from tests.conftest import EXAMPLES, ROOT, run_cli


def _run(*args: str, columns: int) -> list[str]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        proc = run_cli(*args)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("columns", [80, 60])
def test_batch_prints_one_line_per_workload(columns):
    lines = _run("batch", str(ROOT / "examples"), columns=columns)
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    for path in EXAMPLES:
        shown = [ln for ln in lines if ln.startswith(path.stem[:5])]
        assert len(shown) == 1, (path.stem, shown)
        decision = shown[0].split()[1].rstrip("*")
        assert decision in {"colocate", "dynamo", "llm-d"}, shown[0]


@pytest.mark.parametrize("columns", [80, 60])
def test_rules_list_prints_one_line_per_rule_with_every_id_whole(columns):
    lines = _run("rules", "list", columns=columns)
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    ids = [r.id for r in with_extra([]).book.rules]
    for rule_id in ids:
        assert sum(line.split()[:1] == [rule_id] for line in lines) == 1, rule_id
    assert len(lines) <= len(ids) + 4  # title, header, rule, rows


def test_widths_cut_the_widest_cuttable_column_and_never_a_kept_one():
    assert column_widths([10, 40, 30], [True, False, False], 60) == [10, 22, 22]
    assert column_widths([10, 5], [True, False], 100) == [10, 5]
    assert column_widths([50, 50], [True, True], 20) == [50, 50]


def test_cut_ends_in_an_ellipsis_only_where_it_cut():
    assert cut("short", 10) == "short"
    assert cut("a-long-workload-name", 8) == "a-long-…"
    assert len(cut("a-long-workload-name", 8)) == 8


def test_user_text_in_a_fitted_table_is_never_read_as_markup():
    from rich.console import Console

    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(fitted_table("t", [Column("name")], [["[/] [bold]x"]], 80))
    assert "[/] [bold]x" in console.export_text()
