"""Every number read from a benchmark result file, checked against the range it can take.

Why: the fit divides, takes logs and roots and sizes simulated runs from these numbers, so a
NaN, an infinity, a zero where a time is meant, a 400-digit integer or a 1e-300 latency would
end in a traceback or in constants fitted to nonsense. Each field has a physical range (a
latency between a microsecond and a day, a request rate up to a million per second, ...);
a value outside it is a `UserError` that names the file, the run or line, the field and the
valid range. Infinity is a value only where the benchmark tools write it on purpose (an
unbounded request rate or concurrency). Per-request lists are checked as numpy arrays, so a
million-request file costs milliseconds here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from disagg_decider.errors import UserError, excerpt
from disagg_decider.workload import MAX_RATE_PER_S, MAX_TOKENS

DAY_MS = 86_400_000.0
MAX_REQUESTS = 100_000_000  # requests in one run
MAX_CLIENTS = 1_000_000  # closed-loop concurrency
MAX_TOKENS_PER_S = 1e9
MAX_DURATION_S = 31_536_000.0  # a year


@dataclass(frozen=True)
class Range:
    """Valid values of one field: [lo, hi] in `unit`; `whole`: an integer count."""

    lo: float
    hi: float
    unit: str = ""
    whole: bool = False
    inf_ok: bool = False  # Infinity (or the string "inf") means "unbounded"

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        kind = "a whole number" if self.whole else "a number"
        inf = " (or Infinity)" if self.inf_ok else ""
        return f"{kind} from {_num(self.lo)} to {_num(self.hi)}{unit}{inf}"


def _num(x: float) -> str:
    return f"{int(x):,}" if abs(x) < 1e16 and x == int(x) else f"{x:.6g}"


LATENCY_MS = Range(1e-3, DAY_MS, "ms")
TOKENS_PER_REQUEST = Range(1, MAX_TOKENS, "tokens per request")
RANGES: dict[str, Range] = {
    "completed": Range(1, MAX_REQUESTS, "requests", whole=True),
    "total_input_tokens": Range(1, MAX_REQUESTS * MAX_TOKENS, "tokens", whole=True),
    "total_output_tokens": Range(1, MAX_REQUESTS * MAX_TOKENS, "tokens", whole=True),
    "request_rate": Range(1e-6, MAX_RATE_PER_S, "requests/s", inf_ok=True),
    "max_concurrency": Range(1, MAX_CLIENTS, "clients", inf_ok=True),
    "concurrency": Range(1, MAX_CLIENTS, "clients"),
    "duration": Range(1e-3, MAX_DURATION_S, "s"),
    "output_throughput": Range(1e-6, MAX_TOKENS_PER_S, "tokens/s"),
    "random_range_ratio": Range(0, 1),
    # AIPerf metrics, after conversion to ms for times
    "time_to_first_token": LATENCY_MS,
    "inter_token_latency": LATENCY_MS,
    "input_sequence_length": TOKENS_PER_REQUEST,
    "output_sequence_length": TOKENS_PER_REQUEST,
    "request_count": Range(1, MAX_REQUESTS, "requests"),
    "output_token_throughput": Range(1e-6, MAX_TOKENS_PER_S, "tokens/s"),
    "std": Range(0, MAX_TOKENS, "tokens"),
    # per-request records of `vllm bench serve --save-detailed` (0: a failed request)
    "input_lens": Range(0, MAX_TOKENS, "tokens", whole=True),
    "output_lens": Range(0, MAX_TOKENS, "tokens", whole=True),
    "ttfts": Range(0, DAY_MS / 1e3, "s"),
    "itls": Range(0, DAY_MS / 1e3, "s"),
}
for _stat in ("mean", "median"):
    for _metric in ("ttft", "tpot", "itl"):
        RANGES[f"{_stat}_{_metric}_ms"] = LATENCY_MS


def range_of(field: str) -> Range:
    return RANGES[field.rsplit(".", 1)[-1]]


class Fields:
    """Typed access to one result object; every failure names file, run and field."""

    def __init__(self, obj: dict, source: str, where: str) -> None:
        self.obj, self.source, self.where = obj, source, where

    def fail(self, field: str, what: str) -> UserError:
        return UserError(f"{self.source}: {self.where}: field '{field}': {what}")

    def out_of_range(self, field: str, value: Any, valid: Range | None = None) -> UserError:
        valid = valid or range_of(field)
        return self.fail(field, f"{_shown(value)} is not valid; expected {valid.text()}")

    def check(self, field: str, value: Any, valid: Range | None = None) -> float:
        """`value` as a float within the field's range (ints compared exactly, never
        converted first: a 400-digit integer is out of range, not an OverflowError)."""
        valid = valid or range_of(field)
        if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
            value = math.inf
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(
                field, f"expected a number, got {_shown(value)} (valid: {valid.text()})"
            )
        if value == math.inf and valid.inf_ok:
            return math.inf
        if isinstance(value, float) and not math.isfinite(value):
            raise self.out_of_range(field, value, valid)
        if not valid.lo <= value <= valid.hi or (valid.whole and value != int(value)):
            raise self.out_of_range(field, value, valid)
        try:
            return float(value)
        except OverflowError:  # an integer past 1e308 in a field without an upper bound
            raise self.out_of_range(field, value, valid) from None

    def number(self, field: str, *, required: bool = True) -> float | None:
        if field not in self.obj or self.obj[field] is None:
            if required:
                raise self.fail(field, "required field is missing")
            return None
        return self.check(field, self.obj[field])

    def first(self, *fields: str) -> tuple[float | None, str | None]:
        """The first of these latency statistics the file reports; 0 means not measured (vLLM
        writes 0 for a TPOT no request had), so the next one is tried."""
        for f in fields:
            raw = self.obj.get(f)
            if raw is None or (type(raw) in (int, float) and raw == 0):
                continue
            return self.check(f, raw), f
        return None, None

    def mean_per_request(self, field: str, total: float, count: float) -> float:
        """A total over `count` requests, as a mean within the tokens-per-request range."""
        mean = total / count
        if not TOKENS_PER_REQUEST.lo <= mean <= TOKENS_PER_REQUEST.hi:
            raise self.fail(
                field,
                f"{total:,.0f} over {count:,.0f} requests is {mean:,.6g} per request; expected "
                f"{TOKENS_PER_REQUEST.text()}",
            )
        return mean

    def numbers(self, field: str, value: Any = None) -> np.ndarray | None:
        """A per-request list as a float array, every entry within the field's range."""
        value = self.obj.get(field) if value is None else value
        if value is None:
            return None
        valid = range_of(field)
        if not isinstance(value, list):
            raise self.fail(field, f"expected a list of per-request values, got {_shown(value)}")
        array = _numeric_array(value)
        if array is None:
            bad = next(((i, v) for i, v in enumerate(value) if not _plain(v)), (0, value[0]))
            raise self.fail(f"{field}[{bad[0]}]", f"expected {valid.text()}, got {_shown(bad[1])}")
        ok = np.isfinite(array) & (array >= valid.lo) & (array <= valid.hi)
        if valid.whole:
            ok &= array == np.floor(array)
        if not ok.all():
            i = int(np.argmin(ok))
            raise self.fail(
                f"{field}[{i}]", f"{_shown(value[i])} is not valid; expected {valid.text()}"
            )
        return array

    def metric(self, name: str, stat: str = "avg", *, required: bool = True) -> float | None:
        """AIPerf's {"unit": ..., "avg": ...} objects; times converted to milliseconds."""
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(name, "required metric is missing")
            return None
        if not isinstance(value, dict) or stat not in value:
            raise self.fail(name, f"expected an object with '{stat}' and 'unit'")
        x = self.check(f"{name}.{stat}", value[stat], Range(0, 1e300))
        unit = str(value.get("unit", "")).lower()
        scale = {"s": 1e3, "sec": 1e3, "seconds": 1e3, "us": 1e-3, "ns": 1e-6}.get(unit, 1.0)
        scaled = x * scale
        valid = range_of(name)
        if not valid.lo <= scaled <= valid.hi:
            raise self.out_of_range(f"{name}.{stat}", f"{value[stat]!r} {unit}".strip(), valid)
        return scaled

    def spread(self, name: str, mean: float) -> float:
        """Coefficient of variation from an AIPerf metric's `std` (0 when absent)."""
        value = self.obj.get(name)
        std = value.get("std") if isinstance(value, dict) else None
        if std is None:
            return 0.0
        return self.check(f"{name}.std", std, RANGES["std"]) / mean


def _plain(v: Any) -> bool:
    """A number numpy holds as int64 or float64 (bools, strings and huge integers are not)."""
    if isinstance(v, bool):
        return False
    return isinstance(v, float) or (isinstance(v, int) and -(2**63) <= v < 2**63)


def _numeric_array(value: list) -> np.ndarray | None:
    """The list as float64, or None when it holds anything but ints and floats (bools,
    strings, lists, integers too large for int64)."""
    try:
        array = np.asarray(value)
    except (ValueError, OverflowError):  # ragged nesting, ints beyond any dtype
        return None
    if array.ndim != 1 or array.dtype.kind not in "iuf":
        return None
    return array.astype(float, copy=False)


def _shown(value: Any) -> str:
    """A short, escaped excerpt: a 5,000-digit integer is not echoed whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    return excerpt(value)
