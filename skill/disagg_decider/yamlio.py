"""Safe YAML loading with messages that name the file and line.

Only the safe loader is ever used (libyaml's C build of it where installed, which is several
times faster and builds the same plain Python data): tags such as `!!python/object` are
rejected, and nothing read from a workload or rule file is evaluated as code.

On top of the safe loader, a document is bounded before any Python object is built from it:
- at most `MAX_ITEMS` lines and commas (a cheap count that keeps parsing under a second);
- aliases may be used, but the document they expand to is capped at `MAX_EXPANDED_NODES`
  nodes (a ten-level "billion laughs" bomb is refused in microseconds, wherever it sits);
- nesting is capped at `MAX_DEPTH` levels;
- a key repeated in one mapping is an error naming both lines (YAML says keys are unique;
  PyYAML would silently keep the last, so a second `cluster:` block would win);
- an integer too long for Python to parse (over 4,300 digits) is an error naming its line;
- numbers are YAML 1.2 core schema decimals only: `8`, `-3`, `0.5`, `1e8`, `.inf`. The YAML 1.1
  forms PyYAML also reads as numbers stay strings (which a number field then refuses, naming
  the field): sexagesimal `1:30:00` (5,400), `0x10`, `0o17`, `0b101`, `1_000`, and `010` is ten,
  not octal eight;
- an explicit tag (`!!float "8"`, `!!str 8`, `!!binary`) is refused: a value is what it looks
  like, never converted by a tag.

PyYAML is imported, and the loader built, on the first document read (`_loader`): a batch of
JSONL workloads reads the shipped rulebook and catalogs from their JSON snapshot
(`shipped_data`) and parses no YAML at all, so it spares PyYAML's import (~15-20 ms).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disagg_decider.errors import UserError, clip, excerpt
from disagg_decider.userfiles import CONFIG_MAX_BYTES, read_text

if TYPE_CHECKING:
    from yaml.nodes import MappingNode, Node, ScalarNode

MAX_EXPANDED_NODES = 100_000
MAX_DEPTH = 64
MAX_ITEMS = 20_000  # lines + commas: the shipped rulebook has ~400, a workload ~50


class _Refused(Exception):
    def __init__(self, message: str, node: Node) -> None:
        super().__init__(message)
        self.node = node


@cache
def _loader() -> type:
    """The bounded safe loader (libyaml's where installed), built once, on first use."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = type("_BoundedLoader", (_Bounded, base), {})
    loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    loader.add_implicit_resolver(_INT, _INT_1_2, list("-+0123456789"))
    loader.add_implicit_resolver(_FLOAT, _FLOAT_1_2, list("-+0123456789."))
    loader.add_constructor(_INT, _Bounded.construct_yaml_int)
    return loader


class _Bounded:
    """The safe loader's additions (`_loader` puts them before it): the bounds above,
    checked on the composed node graph."""

    def construct_document(self, node: Node) -> Any:
        _check_bounds(node, self.resolve)
        return super().construct_document(node)  # type: ignore[misc]

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> Any:
        from yaml.nodes import MappingNode, ScalarNode

        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                key = (key_node.tag, key_node.value)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _Refused(
                        f"duplicate key {excerpt(key_node.value)} (first at line {seen[key]}); "
                        "each key may appear once in a mapping",
                        key_node,
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]

    def construct_yaml_int(self, node: ScalarNode) -> int:
        """Decimal only (the resolver lets nothing else through): `010` is ten."""
        try:
            return int(node.value, 10)
        except ValueError:  # int() refuses more than 4,300 digits
            raise _Refused(
                f"an integer of {len(node.value):,} characters is too large", node
            ) from None


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
# YAML 1.2 core schema (decimal forms): https://yaml.org/spec/1.2.2/#1032-tag-resolution
_INT_1_2 = re.compile(r"^[-+]?[0-9]+$")
_FLOAT_1_2 = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_PLAIN_TAGS = {"MappingNode": "tag:yaml.org,2002:map", "SequenceNode": "tag:yaml.org,2002:seq"}


def _explicit_tag(node: Node, resolve) -> bool:
    """Whether the node carries a tag other than the one its text and style resolve to."""
    from yaml.nodes import ScalarNode

    if isinstance(node, ScalarNode):
        plain = not node.style  # None (pure Python) or "" (libyaml) when plain
        return node.tag != resolve(ScalarNode, node.value, (plain, not plain))
    return node.tag != _PLAIN_TAGS[type(node).__name__]


def _check_bounds(root: Node, resolve) -> None:
    """Expanded size (aliases counted every time they are used), depth and explicit tags,
    memoised per node."""
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node, depth: int, field: str = "") -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", node)
        if key in active:
            raise _Refused("a recursive alias (a node that contains itself)", node)
        if _explicit_tag(node, resolve):
            tag = excerpt(node.tag.replace("tag:yaml.org,2002:", "!!"))
            raise _Refused(
                f"{field}unsupported YAML tag {tag}: only plain values are accepted (numbers "
                "as plain decimals, e.g. 8, 0.5 or 1e8; text as is; no tags)",
                node,
            )
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            children = [(n, field) for n in node.value]
        elif isinstance(node, MappingNode):
            children = [
                (
                    n,
                    f"{excerpt(k.value, 40)[1:-1]}: "
                    if n is v and isinstance(k, ScalarNode)
                    else "",
                )
                for k, v in node.value
                for n in (k, v)
            ]
        else:
            children = []
        for child, name in children:
            total += size(child, depth + 1, name)
            if total > MAX_EXPANDED_NODES:
                raise _Refused(
                    f"expands to more than {MAX_EXPANDED_NODES:,} values (aliases counted each "
                    "time they are used); write the values out or use fewer aliases",
                    node,
                )
        active.discard(key)
        sizes[key] = total
        return total

    size(root, 0)


def load_yaml_text(text: str, source: str) -> Any:
    # Parsing costs ~5 us per value; a megabyte of "1, 1, 1" would take seconds, so count first.
    items = text.count(",") + text.count("\n")
    if items > MAX_ITEMS:
        error = UserError(
            f"{source}: {items:,} lines and list items; at most {MAX_ITEMS:,} are read (a "
            "workload is a few dozen lines)"
        )
        error.line = None
        raise error
    import yaml

    try:
        return yaml.load(text, Loader=_loader())
    except _Refused as exc:
        line = exc.node.start_mark.line + 1
        error = UserError(f"{source}:{line}: {exc}")
        error.line = line
        raise error from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = clip(str(exc.problem), 120)
        error = UserError(
            f"{where}: unsupported YAML tag ({problem}); only plain YAML is accepted "
            "(no !!python or other custom tags)"
        )
        error.line = mark.line + 1 if mark else None  # lets callers name what is on that line
        raise error from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, e.g. NUL
        line = text[: exc.position].count("\n") + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        error = UserError(
            f"{source}:{line}: character U+{char:04X} is not allowed in YAML (control "
            "characters are not)"
        )
        error.line = line
        raise error from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        error = UserError(f"{where}: malformed YAML: {clip(str(problem))}")
        error.line = mark.line + 1 if mark else None
        raise error from None


def load_yaml_file(path: Path) -> Any:
    text = read_text(path, what="a YAML file", max_bytes=CONFIG_MAX_BYTES)
    return load_yaml_text(text, str(path))
