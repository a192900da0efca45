"""What a request trace is once read, and the checks both trace readers apply to each field.

Kept apart from the readers (`trace.py` for Mooncake JSONL and the dispatch, `trace_azure.py`
for the Azure CSV) so that each reader imports these and neither imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from disagg_decider.errors import UserError, excerpt
from disagg_decider.workload import MAX_TOKENS

MAX_TIMESTAMP_S = 1e11  # year ~5100 as a Unix time; far beyond any trace


@dataclass(frozen=True)
class Trace:
    source: str
    kind: str  # "azure" or "mooncake"
    arrival_ms: np.ndarray  # from the first request
    prompt: np.ndarray
    output: np.ndarray
    cached: np.ndarray  # prefix-cache hit tokens (zero for Azure)
    has_hash_ids: bool = False  # some request carried block hashes, so `cached` is measured

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])


def checked_timestamp(seconds: float, raw, field: str, source: str, line_no: int) -> float:
    if not math.isfinite(seconds) or abs(seconds) > MAX_TIMESTAMP_S:
        raise UserError(
            f"{source} line {line_no}: {field} {excerpt(raw)} is not a time within "
            f"{MAX_TIMESTAMP_S:g} s of the epoch"
        )
    return seconds


def checked_number(value, field: str, source: str, line_no: int) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a 400-digit integer
        x = math.nan
    if isinstance(value, bool) or not math.isfinite(x):
        raise UserError(f"{source} line {line_no}: {field} {excerpt(value)} is not a number")
    return x


def checked_tokens(value, field: str, source: str, line_no: int) -> int:
    x = checked_number(value.strip() if isinstance(value, str) else value, field, source, line_no)
    if x != int(x):
        raise UserError(f"{source} line {line_no}: {field} {excerpt(value)} is not a whole number")
    if x < 0 or x > MAX_TOKENS:
        raise UserError(
            f"{source} line {line_no}: {field} is {x:g}; token counts are between 0 "
            f"and {MAX_TOKENS:,}"
        )
    return int(x)


def check_order(times: list[float], source: str, line_no: int) -> None:
    if len(times) > 1 and times[-1] < times[-2]:
        raise UserError(
            f"{source} line {line_no}: timestamp goes back in time ({times[-1] - times[-2]:.3f} s "
            "before the previous request); sort the trace by timestamp"
        )


def build_trace(source, kind, times, prompts, outputs, cached, hashed: bool = False) -> Trace:
    if not len(times):
        raise UserError(f"{source}: the trace has a header but no requests")
    t = np.asarray(times, dtype=float)
    return Trace(
        source=source,
        kind=kind,
        arrival_ms=(t - t[0]) * 1e3,
        prompt=np.asarray(prompts, dtype=np.int64),
        output=np.asarray(outputs, dtype=np.int64),
        cached=np.asarray(cached, dtype=np.int64),
        has_hash_ids=hashed,
    )
