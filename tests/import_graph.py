"""The package's imports as a graph of modules, read from the source (nothing is imported).

Every `import x` and `from x import y` anywhere in a module counts, inside functions too: a
lazy import still runs when its function does, so a circle through one is still a circle (and
still a module that needs one above it). Imports under `if TYPE_CHECKING:` do not count: they
never run, and type annotations may name a type from any layer.

A `from package import name` where `package.name` is a module is an edge to that module; an
import of a name the package defines in its `__init__` is an edge to the package. Edges to
modules outside the package are dropped.
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
