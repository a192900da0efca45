"""What every field of a workload file is held to: the physical ranges, declared once, the strict
model the sections build on (unknown keys are errors, numbers are finite and written as
numbers), and the plain-text checks on names and paths (no control or bidi characters).

`workload_sections.py` builds the file's sections on these.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo

# Physical ranges, declared once: every bound below is far outside any real deployment and far
# inside what the arithmetic handles (no overflow to inf, no JSON-incompatible floats).
MAX_TOKENS = 10_000_000  # prompt or output length; the longest contexts today are ~10M
MIN_RATE_PER_S = 1e-6  # one request in ~12 days
MAX_RATE_PER_S = 1e6
MAX_SLO_MS = 86_400_000.0  # a day
MAX_GPUS = 1_000_000
MAX_GPUS_PER_NODE = 1024
MAX_TP = 1024
MAX_GBPS = 1e6
MAX_LATENCY_US = 1e7  # 10 s
MAX_USD_PER_GPU_HOUR = 10_000.0
MAX_CHUNKS = 64
MAX_NAME_CHARS = 200
MAX_ID_CHARS = 100
MAX_DESCRIPTION_CHARS = 4000
MAX_PATH_CHARS = 4096
MAX_OVERRIDES = 100
MAX_CLASSES = 16  # request classes of mixed traffic

# Characters that rewrite a terminal or reorder text: C0/C1 controls (tab and newline allowed
# only where noted), bidi embeddings/overrides/isolates/marks, line and paragraph separators.
_BIDI_AND_SEPARATORS = "\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff"
_UNSAFE = {
    "": re.compile(f"[\x00-\x1f{_BIDI_AND_SEPARATORS}]"),
    "\t\n": re.compile(f"[\x00-\x08\x0b-\x1f{_BIDI_AND_SEPARATORS}]"),
}


def unsafe_char(text: str, allow: str = "") -> str | None:
    """The first control or bidi character in `text` (other than tab and newline when
    `allow` is "\\t\\n"), or None."""
    found = _UNSAFE[allow].search(text)
    return found.group() if found else None


class StrictModel(BaseModel):
    """Unknown keys are errors, numbers are finite, and a boolean is never read as a number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        kind = type(value)
        if kind is float or kind is int or kind is dict:
            # `number_problem` passes these whatever the field takes (`bool` is a type of its
            # own; a section is a dict): most of a workload's ~50 fields, so tried first.
            return value
        if info.field_name is None:
            return value
        takes = _TAKES.get((cls, info.field_name))
        if takes is None:
            takes = _TAKES[cls, info.field_name] = _takes(cls.model_fields[info.field_name])
        problem = number_problem(takes, value)
        if problem is not None:
            raise ValueError(problem)
        return value


def number_problem(takes: _Takes, value: Any) -> str | None:
    """What is wrong with `value` for a field that takes `takes`, as the check says it."""
    if not takes.number:
        return None
    if isinstance(value, bool) and not takes.boolean:
        return "expected a number, got a boolean (true/false)"
    # A number is written as one: "8", 0x10, 1_000 or 1:30:00 arrive as strings (yamlio
    # reads YAML 1.2 numbers only), and pydantic would otherwise convert some of them.
    items = value if isinstance(value, list) else [value]
    if not takes.text and any(isinstance(v, str) for v in items):
        kind = "a number (e.g. 8, 0.5 or 1e8)" if takes.real else "an integer (e.g. 8)"
        return (
            f"expected {kind} written as one, not text: no quotes, and no 0x, 1_000 or "
            "1:30:00 forms"
        )
    return None


class _Takes(NamedTuple):
    """Which plain types a field's annotation takes, as `_no_bool_numbers` asks."""

    number: bool  # int or float
    boolean: bool
    text: bool  # str
    real: bool  # float


def _takes(field: FieldInfo) -> _Takes:
    ann = field.annotation
    return _Takes(
        number=_accepts(ann, (int, float)),
        boolean=_accepts(ann, (bool,)),
        text=_accepts(ann, (str,)),
        real=_accepts(ann, (float,)),
    )


# `_takes` per (model class, field name): a field's annotation is fixed once its class is built,
# and the check runs for every field of every workload a batch reads (~50 per workload), where
# walking the annotation's unions each time cost more than validating the value.
_TAKES: dict[tuple[type, str], _Takes] = {}


def _accepts(ann: Any, kinds: tuple[type, ...]) -> bool:
    """Whether the annotation (through unions, Annotated, lists) takes one of these types."""
    if ann in kinds:
        return True
    return any(_accepts(a, kinds) for a in getattr(ann, "__args__", ()) or ())


def plain_string(value: Any, allow: str = "") -> Any:
    if isinstance(value, str) and (ch := unsafe_char(value, allow)) is not None:
        raise ValueError(f"contains the control or bidi character U+{ord(ch):04X}; use plain text")
    return value


def file_path(value: Any) -> Any:
    """A path a workload names: short, one line, no NUL (it is echoed in messages)."""
    if isinstance(value, str):
        if not value or len(value) > MAX_PATH_CHARS or "\0" in value:
            raise ValueError(f"expected a file path of 1 to {MAX_PATH_CHARS} characters")
        plain_string(value)
    return value
