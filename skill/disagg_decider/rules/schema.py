"""The rulebook's typed schema: parameters, rules and a closed condition language.

Conditions are a tree of `all`, `any`, `not` and leaves that compare one named metric with a
named parameter or a literal through a fixed set of operators. There is no expression syntax
and nothing is ever evaluated as code.
"""

from __future__ import annotations

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

Scalar = float | int | bool | str
Op = Literal[">", ">=", "<", "<=", "==", "!=", "in", "not_in"]
Pushes = Literal["colocate", "disaggregate", "dynamo", "llm-d"]
Layout = Literal["colocated", "disaggregated", "conditional"]
Category = Literal[
    "feasibility", "latency", "throughput", "cost", "network", "operations", "orchestrator"
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Leaf(_Strict):
    """metric OP (param | value)"""

    metric: str
    op: Op
    param: str | None = None
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
    unit: str
    doc: str
    source: str
    min: float | None = None  # the range an override may take (numbers only)
    max: float | None = None

    @model_validator(mode="after")
    def _in_range(self) -> Parameter:
        if (self.min is not None or self.max is not None) and not _is_number(self.value):
            raise ValueError("'min' and 'max' apply to numeric parameters only")
        if not self.allows(self.value):
            raise ValueError(f"value {self.value!r} is outside [{self.min}, {self.max}]")
        return self

    def allows(self, value: Scalar) -> bool:
        if not _is_number(value):
            return True
        low = self.min if self.min is not None else float("-inf")
        high = self.max if self.max is not None else float("inf")
        return low <= float(value) <= high


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Reference(_Strict):
    title: str
    url: str


class Effect(_Strict):
    pushes: Pushes
    weight: float = Field(gt=0)


class Veto(_Strict):
    """A hard gate: when it fires the decision is `pushes`, whatever the weights say."""

    pushes: Pushes


class Advice(_Strict):
    """Advice on the layout: reported with the verdict, weighs nothing in the decision."""

    layout: Layout


class Examples(_Strict):
    """Metric values on which the rule must fire, and on which it must stay silent."""

    fires: list[dict[str, Scalar | None]] = Field(min_length=1)
    silent: list[dict[str, Scalar | None]] = Field(min_length=1)


class Rule(_Strict):
    id: str = Field(pattern=r"^[A-Z]{2,4}[0-9]{3}$")
    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    title: str
    category: Category
    when: Condition
    effect: Effect | None = None
    veto: Veto | None = None
    advice: Advice | None = None
    rationale: str
    references: list[Reference] = Field(min_length=1)
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
            if not name.replace("_", "").isalnum() or not name[0].isalpha():
                raise ValueError(f"parameter name '{name}' must be snake_case")
        return v
