"""The package's imports run one way: no module reaches, however indirectly, back to itself.

The imports are read from the source (`tests/import_graph.py`), lazy ones inside functions
included (a circle through a function-level import is still a circle: it runs when the function
does); imports under `if TYPE_CHECKING:` are not counted (they never run).
"""

from __future__ import annotations

from tests import import_graph


def test_the_package_has_no_import_circle():
    circles = import_graph.cycles(import_graph.graph())
    assert not circles, "import circles (each a set of modules that import one another): " + (
        "; ".join(" <-> ".join(c) for c in circles)
    )


def test_the_walk_sees_every_module_and_lazy_imports():
    g = import_graph.graph()
    assert "disagg_decider.calc" in g and "disagg_decider.workload" in g
    assert len(g) > 150
    # `frontier_sweep` imports `frontier_rate_matched` inside a function only
    assert "disagg_decider.frontier_rate_matched" in g["disagg_decider.frontier_sweep"]


def test_a_circle_through_a_lazy_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from pkg.high import g\n    return g\n")
    (package / "high.py").write_text("from pkg import low\n\ng = low\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.user import U\n"
    )
    (package / "user.py").write_text("from pkg.typed import TYPE_CHECKING\n")
    g = import_graph.graph(package)
    assert g["pkg.low"] == {"pkg.high"} and g["pkg.high"] == {"pkg.low"}
    assert g["pkg.typed"] == set()  # a TYPE_CHECKING import never runs
    assert import_graph.cycles(g) == [["pkg.high", "pkg.low"]]


def test_a_longer_circle_and_a_self_import_are_found():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_graph.cycles(g) == [["a", "b", "c"], ["e"]]
