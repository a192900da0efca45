"""Deterministic YAML text: keys in the order the emitters build them, comments on top.

Output must round-trip through `yaml.safe_load` and be byte-identical across runs (no
timestamps, no sorted-away structure), so reviewers can diff two generations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml

# Line breaks for YAML 1.1 (NEL, LS, PS too) and for str.splitlines.
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff\ufeff\ufffe\uffff]"
)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that indents list items under their key, as Kubernetes examples do."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: object) -> bool:
        return True  # repeat shared label maps in full: manifests must read standalone


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def comment_block(lines: Iterable[str]) -> str:
    """`# ` before every line; a line break inside one (any kind YAML or a reader counts)
    starts another comment line, so no text can end the comment and become YAML."""
    return "".join(
        f"# {_visible(part)}".rstrip() + "\n" for line in lines for part in _LINE_BREAKS.split(line)
    )


def _visible(text: str) -> str:
    """Characters YAML refuses even in a comment (controls, surrogates), or that reorder what
    a reviewer sees (bidi), written as \\uXXXX."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def yaml_text(doc: Any, comments: Iterable[str] = ()) -> str:
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)
    return comment_block(comments) + body


def yaml_docs_text(docs: list[Any], comments: Iterable[str] = ()) -> str:
    """Several documents in one file, separated by '---'."""
    bodies = [
        yaml.dump(d, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)
        for d in docs
    ]
    return comment_block(comments) + "---\n".join(bodies)
