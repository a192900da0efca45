"""Deterministic YAML text: keys in the order the emitters build them, comments on top.

Output must round-trip through `yaml.safe_load` and be byte-identical across runs (no
timestamps, no sorted-away structure), so reviewers can diff two generations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


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
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


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
