"""Rules as text: how a condition, a threshold and an effect are written for people.

One module owns these so that the skill file, the reports and `decide rules show` describe a
rule the same way. Two layouts of a condition: one line of markdown for the skill file and
reports (`condition_text`), indented plain lines for a terminal (`condition_lines`).
"""

from __future__ import annotations

import json
from typing import Any

from disagg_decider.rules.schema import All, AnyOf, Leaf, Not, Parameter


def scalar_text(value: object) -> str:
    """A rule literal or parameter value as YAML would spell it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(scalar_text(v) for v in value) + "]"
    return str(value)


def effect_text(veto: bool, weight: float, pushes: str) -> str:
    """`veto: colocate`, `+3 disaggregate` or `advice` (weighs nothing)."""
    if pushes == "advice":
        return "advice (no weight)"
    return f"veto: {pushes}" if veto else f"+{weight:g} {pushes}"


def condition_text(node: object, parameters: dict[str, Parameter]) -> str:
    """A condition tree as one line of markdown: `metric` op `param` (value unit), and/or/not."""
    if isinstance(node, Leaf):
        if node.param is not None:
            p = parameters[node.param]
            right = f"`{node.param}` ({scalar_text(p.value)} {p.unit})"
        else:
            right = f"`{scalar_text(node.value)}`"
        return f"`{node.metric}` {node.op} {right}"
    if isinstance(node, All):
        return " and ".join(_grouped(n, parameters) for n in node.all)
    if isinstance(node, AnyOf):
        return " or ".join(_grouped(n, parameters) for n in node.any)
    if isinstance(node, Not):
        return f"not ({condition_text(node.not_, parameters)})"
    raise TypeError(f"unknown condition node {type(node).__name__}")


def _grouped(node: object, parameters: dict[str, Parameter]) -> str:
    inner = condition_text(node, parameters)
    return f"({inner})" if isinstance(node, All | AnyOf) else inner


def condition_lines(node: object, params: dict[str, Any], units: dict[str, str]) -> list[str]:
    """A condition tree as indented lines a reviewer can read:
    `prompt_tokens_p50 < short_prompt_tokens (512 tokens)`."""
    if isinstance(node, Leaf):
        if node.param is None:
            return [f"{node.metric} {node.op} {json.dumps(node.value)}"]
        unit = units.get(node.param, "")
        value = f"{params[node.param]!r} {unit}".strip() if node.param in params else "?"
        return [f"{node.metric} {node.op} {node.param} ({value})"]
    if isinstance(node, All | AnyOf):
        children = node.all if isinstance(node, All) else node.any
        head = "all of:" if isinstance(node, All) else "any of:"
        return [head] + [
            "  " + line for child in children for line in condition_lines(child, params, units)
        ]
    if isinstance(node, Not):
        return ["not:"] + ["  " + x for x in condition_lines(node.not_, params, units)]
    raise TypeError(f"unknown condition node {type(node).__name__}")
