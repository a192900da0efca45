"""The package's imports as a graph of modules, read from the source (nothing is imported).

Every `import x` and `from x import y` anywhere in a module counts, inside functions too: a
lazy import still runs when its function does, so a circle through one is still a circle (and
still a module that needs one above it). Imports under `if TYPE_CHECKING:` do not count: they
never run, and type annotations may name a type from any layer.

A `from package import name` where `package.name` is a module is an edge to that module; an
import of a name the package defines in its `__init__` is an edge to the package. A string that
is a package module's full dotted name counts as an import of it (`importlib.import_module`,
a forkserver's preload list, `cli_lazy.COMMANDS`). Edges to modules outside the package are
dropped.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = "disagg_decider"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / "skill" / PACKAGE


def module_files(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package (packages by __init__)."""
    root = package_dir.parent
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of every node under an `if TYPE_CHECKING:` block."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def imported_modules(name: str, path: Path, modules: Iterable[str], source: str | None = None):
    """The package modules module `name` (file `path`, or the text `source`) imports.

    `from a.b import c` is an import of module `a.b.c` where there is one, else of `a.b` (a name
    its `__init__` defines); relative imports are resolved against `name`'s package."""
    known = set(modules)
    tree = ast.parse(source if source is not None else path.read_text("utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = _type_checking_nodes(tree)
    dotted: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            dotted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                full = f"{module}.{alias.name}"
                dotted.add(full if full in known else module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            # `importlib.import_module("disagg_decider.x")`, a forkserver preload list, a
            # table of lazily loaded commands: a module named in full is imported by name
            dotted.add(node.value)
    owners = {_owner(d, known) for d in dotted}
    return {o for o in owners if o is not None and o != name}


def _owner(dotted: str, known: set[str]) -> str | None:
    """The longest module of the package that `dotted` names or lies in, if any."""
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    files = module_files(package_dir)
    return {name: imported_modules(name, path, files) for name, path in files.items()}


def cycles(g: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each an import circle), and
    any module importing itself; each sorted, the list sorted. Iterative Tarjan."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(g.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in g.get(node, ()):
                    found.append(sorted(component))
    return sorted(found)


# --- layers --------------------------------------------------------------------------------------

# The package's layers, bottom to top, by module-name prefix (a module takes the layer of its
# longest matching prefix). The calculator's own layers come from `calc.LAYERS`; every calc
# module must be in one. Modules no prefix names are the front ends (CLI, MCP, renderers,
# emitters, simulator, calibration), the top layer.
BELOW_CALC: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "files",
        ("errors", "dtypes", "userfiles", "yamlio", "shipped_data", "gcpause", "heap", "progress"),
    ),
    ("catalog", ("catalog",)),
    ("workload", ("workload", "workload_sections", "workload_fields", "classes", "calibrate.file")),
)
ABOVE_CALC: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "decision",
        (
            "metrics",
            "rules.schema",
            "rules.engine",
            "rules.lint",
            "rules.loader",
            "rules.text",
            "calibrate.apply",
            "plan",
            "plan_text",
            "layout_text",
            "summary_text",
            "verdict",
            "assumptions",
            "provenance",
            "confidence",
            "interactivity",
            "pool",
            "decide",
        ),
    ),
)
FRONT_ENDS = "front ends"


def layer_table(
    calc_layers: tuple[tuple[str, tuple[str, ...]], ...],
) -> list[tuple[str, tuple[str, ...]]]:
    """Every layer bottom to top with its module prefixes (relative to the package)."""
    inner = [
        (f"calc.{name}", tuple(f"calc.{p}" for p in prefixes)) for name, prefixes in calc_layers
    ]
    # the calc package itself (its __init__ holds only the map) sits at the calculator's top
    inner[-1] = (inner[-1][0], (*inner[-1][1], "calc"))
    return [*BELOW_CALC, *inner, *ABOVE_CALC, (FRONT_ENDS, ())]


def layer_of(module: str, table: list[tuple[str, tuple[str, ...]]]) -> tuple[int, str]:
    """(position bottom-up, name) of the layer a package module belongs to."""
    relative = module.removeprefix(PACKAGE).removeprefix(".")
    best: tuple[int, int, str] | None = None  # (prefix length, position, name)
    for position, (name, prefixes) in enumerate(table):
        for prefix in prefixes:
            inside = relative == prefix or relative.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[0]):
                best = (len(prefix), position, name)
    if best is None:
        return len(table) - 1, table[-1][0]
    return best[1], best[2]


def upward_imports(
    g: Mapping[str, Iterable[str]], table: list[tuple[str, tuple[str, ...]]]
) -> list[str]:
    """Every import from a layer into one above it, as readable lines (empty when none)."""
    out = []
    for module in sorted(g):
        here, name = layer_of(module, table)
        for target in sorted(g[module]):
            there, target_name = layer_of(target, table)
            if there > here:
                out.append(f"{module} ({name}) imports {target} ({target_name})")
    return out
