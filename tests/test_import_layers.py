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
    # by name: `cli_lazy.COMMANDS` (importlib), `mcp_workers`' forkserver preload
    assert "disagg_decider.deploy.cli" in g["disagg_decider.cli_lazy"]
    assert "disagg_decider.mcp_worker_main" in g["disagg_decider.mcp_workers"]


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


# --- layers: each module imports only its own layer and those below -----------------------------


def _table():
    from disagg_decider import calc

    return import_graph.layer_table(calc.LAYERS)


def test_every_calc_module_has_a_layer_in_calc_layers():
    table = _table()
    calc_layers = {name for name, _ in table if name.startswith("calc.")}
    unplaced = [
        m
        for m in import_graph.graph()
        if m.startswith("disagg_decider.calc.")
        and import_graph.layer_of(m, table)[1] not in calc_layers
    ]
    assert not unplaced, f"calc modules in no layer of calc.LAYERS: {unplaced}"


def test_each_layer_imports_only_its_own_and_the_layers_below():
    upward = import_graph.upward_imports(import_graph.graph(), _table())
    assert not upward, "imports into a higher layer:\n" + "\n".join(upward)


def test_a_deliberate_upward_import_fails_the_check():
    """The check is not vacuous: one physics module reaching for the search (lazily, inside a
    function) or a data module reaching for the calculator is reported."""
    g = import_graph.graph()
    files = import_graph.module_files()
    kv = "disagg_decider.calc.physics.kv"
    source = files[kv].read_text("utf-8") + (
        "\n\ndef _upward():\n    from disagg_decider.calc.layouts.search import search\n"
        "\n    return search\n"
    )
    g[kv] = import_graph.imported_modules(kv, files[kv], files, source=source)
    g["disagg_decider.workload"] = {*g["disagg_decider.workload"], "disagg_decider.calc.compare"}
    assert import_graph.upward_imports(g, _table()) == [
        f"{kv} (calc.physics) imports disagg_decider.calc.layouts.search (calc.layouts)",
        "disagg_decider.workload (workload) imports disagg_decider.calc.compare (calc.comparison)",
    ]


def test_layers_are_read_by_the_longest_prefix():
    table = _table()
    assert import_graph.layer_of("disagg_decider.calc.result", table)[1] == "calc.records"
    assert import_graph.layer_of("disagg_decider.calc", table)[1] == "calc.comparison"
    assert import_graph.layer_of("disagg_decider.calc.static", table)[1] == "calc.comparison"
    assert import_graph.layer_of("disagg_decider.calc.modes.hetero", table)[1] == "calc.modes"
    assert import_graph.layer_of("disagg_decider.catalog.step_fit", table)[1] == "catalog"
    assert import_graph.layer_of("disagg_decider.rules.loader", table)[1] == "decision"
    assert import_graph.layer_of("disagg_decider.rules.cli", table)[1] == "front ends"
    assert import_graph.layer_of("disagg_decider.plan_text", table)[1] == "decision"
    assert import_graph.layer_of("disagg_decider.mcp_tools", table)[1] == "front ends"
