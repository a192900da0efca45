"""The one jinja2 environment every template renders in.

`StrictUndefined` turns a misspelt variable into an error instead of an empty string, and
autoescape stays off because the output is markdown, not HTML: templates escape explicitly with
the `md`, `cell`, `code` and `code_cell` filters. A bare float reaching the output is refused,
so every number passes through a formatting filter and prints the same on every machine.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

from disagg_decider.render import text


def _finalize(value: Any) -> Any:
    if isinstance(value, float):
        raise TypeError(f"unformatted float {value!r} in a template: use |num, |sig or |integer")
    return value


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("disagg_decider.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(
        md=text.md,
        cell=text.cell,
        code=text.code,
        code_cell=text.code_cell,
        yaml_str=text.yaml_str,
        num=text.num,
        integer=text.integer,
        sig=text.sig,
        percent=text.percent,
        tokens=text.tokens_label,
        yes_no=text.yes_no,
        count=text.count,
    )
    return env


def render(template: str, **context: Any) -> str:
    """Render a template; trailing blank lines are trimmed so files end with one newline."""
    return environment().get_template(template).render(**context).rstrip("\n") + "\n"
