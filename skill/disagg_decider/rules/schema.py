"""The rulebook's typed schema: parameters, rules and a closed condition language.

Conditions are a tree of `all`, `any`, `not` and leaves that compare one named metric with a
named parameter or a literal through a fixed set of operators. There is no expression syntax
and nothing is ever evaluated as code.

A rule file may come from anyone, and its text reaches terminals, JSON and markdown: numbers are
finite and bounded (an `inf` weight would make the verdict's JSON invalid), strings carry no
control or bidi characters (an ANSI escape in a title would repaint a terminal), have lengths
a person could have written, and reference URLs are plain http(s) links.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from disagg_decider.errors import excerpt
from disagg_decider.workload import unsafe_char

# Bounds on what a rule file may say; the shipped rulebook stays far inside them.
MAX_RULE_WEIGHT = 1000.0
MAX_PARAMETER_MAGNITUDE = 1e9  # any parameter or override, when it declares no tighter range
MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 8000  # rationale, doc, source
MAX_NAME_CHARS = 100  # metric, parameter and unit names
MAX_URL_CHARS = 2000
MAX_LIST_ITEMS = 1000

Scalar = float | int | bool | str
Op = Literal[">", ">=", "<", "<=", "==", "!=", "in", "not_in"]
Pushes = Literal["colocate", "disaggregate", "dynamo", "llm-d"]
Layout = Literal["colocated", "disaggregated", "conditional"]
Category = Literal[
    "feasibility", "latency", "throughput", "cost", "network", "operations", "orchestrator"
]


class _Strict(BaseModel):
    """Unknown keys refused, numbers finite, and no control or bidi character in any text
    (tabs and newlines only in the multi-line fields: rationale, doc, source)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _plain_text(cls, value: Any, info: Any) -> Any:
        allow = "\t\n" if info.field_name in ("rationale", "doc", "source") else ""
        # Nested models check their own fields; literals and examples are checked whole.
        if isinstance(value, str | float) or info.field_name in ("value", "fires", "silent"):
            check_plain(value, allow)
        return value


def check_plain(value: Any, allow: str = "") -> None:
    """Refuse a control or bidi character, or a non-finite number, anywhere in `value` (lists
    and mappings too, keys included: examples and literals are nested)."""
    if isinstance(value, str):
        if (ch := unsafe_char(value, allow)) is not None:
            raise ValueError(
                f"contains the control or bidi character U+{ord(ch):04X}; use plain text"
            )
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    elif isinstance(value, list):
        for item in value[:MAX_LIST_ITEMS]:
            check_plain(item)
    elif isinstance(value, dict):
        for key, item in list(value.items())[:MAX_LIST_ITEMS]:
            check_plain(key)
            check_plain(item)


class Leaf(_Strict):
    """metric OP (param | value)"""

    metric: str = Field(max_length=MAX_NAME_CHARS)
    op: Op
    param: str | None = Field(default=None, max_length=MAX_NAME_CHARS)
    value: Scalar | list[Scalar] | None = None

    @model_validator(mode="after")
    def _one_side(self) -> Leaf:
        if (self.param is None) == (self.value is None):
            raise ValueError("a comparison names exactly one of 'param' or 'value'")
        if self.op in ("in", "not_in") and self.param is None and not isinstance(self.value, list):
            raise ValueError(f"operator '{self.op}' takes a list value")
        return self


class All(_Strict):
    all: list[Condition] = Field(min_length=1)


class AnyOf(_Strict):
    any: list[Condition] = Field(min_length=1)


class Not(_Strict):
    not_: Condition = Field(alias="not")


def _node_kind(raw: Any) -> str | None:
    if isinstance(raw, dict):
        for key in ("all", "any", "not"):
            if key in raw:
                return key
        return "leaf"
    if isinstance(raw, BaseModel):
        return {All: "all", AnyOf: "any", Not: "not"}.get(type(raw), "leaf")
    return None


Condition = Annotated[
    Annotated[Leaf, Tag("leaf")]
    | Annotated[All, Tag("all")]
    | Annotated[AnyOf, Tag("any")]
    | Annotated[Not, Tag("not")],
    Discriminator(
        _node_kind,
        custom_error_type="condition",
        custom_error_message=(
            "a condition is a mapping: {all: [...]}, {any: [...]}, {not: {...}} or "
            "{metric: NAME, op: OP, param: NAME | value: LITERAL}; expression strings are not "
            "supported"
        ),
    ),
]
All.model_rebuild()
AnyOf.model_rebuild()
Not.model_rebuild()


def leaves(node: Condition) -> list[Leaf]:
    """The comparisons of a condition tree, left to right."""
    if isinstance(node, Leaf):
        return [node]
    if isinstance(node, All):
        return [x for n in node.all for x in leaves(n)]
    if isinstance(node, AnyOf):
        return [x for n in node.any for x in leaves(n)]
    if isinstance(node, Not):
        return leaves(node.not_)
    return []


class Parameter(_Strict):
    value: Scalar
    unit: str = Field(max_length=MAX_NAME_CHARS)
    doc: str = Field(max_length=MAX_TEXT_CHARS)
    source: str = Field(max_length=MAX_TEXT_CHARS)
    min: float | None = None  # the range an override may take (numbers only)
    max: float | None = None

    @model_validator(mode="after")
    def _in_range(self) -> Parameter:
        if (self.min is not None or self.max is not None) and not _is_number(self.value):
            raise ValueError("'min' and 'max' apply to numeric parameters only")
        if not self.allows(self.value):
            low, high = self.bounds()
            raise ValueError(f"value {self.value!r} is outside [{low:g}, {high:g}]")
        return self

    def allows(self, value: Scalar) -> bool:
        """Within the declared range, and within +/-1e9 whatever it declares (an override of
        1e308 is no threshold anyone means, and overflows what it is compared with)."""
        if not _is_number(value):
            return True
        low, high = self.bounds()
        return math.isfinite(float(value)) and low <= float(value) <= high

    def bounds(self) -> tuple[float, float]:
        """The range a value or an override may take: the declared one, clamped to +/-1e9."""
        low = -MAX_PARAMETER_MAGNITUDE if self.min is None else self.min
        high = MAX_PARAMETER_MAGNITUDE if self.max is None else self.max
        return max(low, -MAX_PARAMETER_MAGNITUDE), min(high, MAX_PARAMETER_MAGNITUDE)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Reference(_Strict):
    title: str = Field(max_length=MAX_TITLE_CHARS)
    url: str = Field(max_length=MAX_URL_CHARS)


class Effect(_Strict):
    pushes: Pushes
    weight: float = Field(gt=0, le=MAX_RULE_WEIGHT)


class Veto(_Strict):
    """A hard gate: when it fires the decision is `pushes`, whatever the weights say."""

    pushes: Pushes


class Advice(_Strict):
    """Advice on the layout: reported with the verdict, weighs nothing in the decision."""

    layout: Layout


class Examples(_Strict):
    """Metric values on which the rule must fire, and on which it must stay silent."""

    fires: list[dict[str, Scalar | None]] = Field(min_length=1, max_length=MAX_LIST_ITEMS)
    silent: list[dict[str, Scalar | None]] = Field(min_length=1, max_length=MAX_LIST_ITEMS)


class Rule(_Strict):
    id: str = Field(pattern=r"^[A-Z]{2,4}[0-9]{3}$")
    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    title: str = Field(max_length=MAX_TITLE_CHARS)
    category: Category
    when: Condition
    effect: Effect | None = None
    veto: Veto | None = None
    advice: Advice | None = None
    rationale: str = Field(max_length=MAX_TEXT_CHARS)
    references: list[Reference] = Field(min_length=1, max_length=MAX_LIST_ITEMS)
    examples: Examples

    @model_validator(mode="after")
    def _effect_or_veto(self) -> Rule:
        if sum(x is not None for x in (self.effect, self.veto, self.advice)) != 1:
            raise ValueError("a rule has exactly one of 'effect', 'veto' or 'advice'")
        return self

    @property
    def kind(self) -> Literal["veto", "effect", "advice"]:
        return "veto" if self.veto else "effect" if self.effect else "advice"

    @property
    def pushes(self) -> Pushes | Literal["advice"]:
        """Which decision the rule pushes; `advice` for a rule that pushes none."""
        if self.advice is not None:
            return "advice"
        return (self.veto or self.effect).pushes  # type: ignore[union-attr]

    @property
    def weight(self) -> float:
        if self.advice is not None:
            return 0.0
        return self.effect.weight if self.effect else float("inf")


class Rulebook(_Strict):
    rulebook: str
    version: int = 1
    parameters: dict[str, Parameter] = {}
    rules: list[Rule] = []

    @field_validator("parameters")
    @classmethod
    def _param_names(cls, v: dict[str, Parameter]) -> dict[str, Parameter]:
        for name in v:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,99}", name):
                raise ValueError(
                    f"parameter name {excerpt(name)} must be snake_case (a-z, 0-9, '_'; a "
                    "letter first; at most 100 characters)"
                )
        return v
