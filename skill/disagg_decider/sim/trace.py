"""Request traces: the Azure LLM inference CSV and Mooncake-style JSONL.

Azure (github.com/Azure/AzurePublicDataset): a header `TIMESTAMP,ContextTokens,GeneratedTokens`,
timestamps as ISO date-times (2023: naive, 2024: with +00:00; both UTC) or plain seconds, read
by `trace_azure.py`. Mooncake
(github.com/kvcache-ai/Mooncake, FAST'25 traces): one JSON object per line with `timestamp` (ms),
`input_length`, `output_length` and optionally `hash_ids`, one hash per 512-token prompt block;
a block seen before is a prefix-cache hit (an infinite, shared cache, as Mooncake's store). Its
fields are JSON numbers: a string such as "512" is refused, not converted.

Every error names the file and line and says what would be valid; the CLI exits with code 2.
Input is bounded: the file is a regular file of at most `TRACE_MAX_BYTES` (the CLI's
`--max-trace-mb` raises it), a line at most `MAX_LINE_CHARS`, timestamps finite and within
`MAX_TIMESTAMP_S`, token counts at most `MAX_TOKENS`, `hash_ids` a flat list of at most
`MAX_HASH_IDS` integers or strings; values are quoted only as short escaped excerpts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from disagg_decider.errors import UserError, excerpt
from disagg_decider.sim.trace_azure import read_azure
from disagg_decider.sim.trace_fields import (
    Trace,
    build_trace,
    check_order,
    checked_number,
    checked_timestamp,
    checked_tokens,
)
from disagg_decider.userfiles import TRACE_MAX_BYTES, read_text

MAX_LINE_CHARS = 65_536
MAX_HASH_IDS = 20_000  # 10M tokens / 512-token blocks

MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length")
MOONCAKE_BLOCK_TOKENS = 512


def load(path: Path, max_bytes: int = TRACE_MAX_BYTES) -> Trace:
    what = "a trace file (Azure CSV or Mooncake JSONL)"
    text = read_text(path, what=what, max_bytes=max_bytes)
    lines = text.splitlines()
    del text
    first = next((line.strip() for line in lines if line.strip()), "")
    if not first:
        raise UserError(f"{path}: the trace is empty")
    if max(map(len, lines)) > MAX_LINE_CHARS:
        line_no = next(i for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS)
        raise UserError(
            f"{path} line {line_no}: {len(lines[line_no - 1]):,} characters; a trace line has "
            f"at most {MAX_LINE_CHARS:,}"
        )
    if path.suffix.lower() in (".jsonl", ".json") or first.startswith("{"):
        return _mooncake(lines, str(path))

    return read_azure(lines, str(path))


# --- Mooncake JSONL ----------------------------------------------------------------------------


def _mooncake(lines: list[str], source: str) -> Trace:
    times, prompts, outputs, cached = [], [], [], []
    seen_blocks: set = set()
    hashed = False
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _json_line(line, source, line_no)
        if not isinstance(record, dict):
            raise UserError(f"{source} line {line_no}: expected a JSON object per line")
        missing = [f for f in MOONCAKE_FIELDS if f not in record]
        if missing:
            raise UserError(
                f"{source} line {line_no}: missing field(s) {', '.join(missing)}; each line of a "
                f"Mooncake trace needs {', '.join(MOONCAKE_FIELDS)} (timestamp in ms)"
            )
        for field in MOONCAKE_FIELDS:
            _json_number(record[field], field, source, line_no)
        ms = checked_number(record["timestamp"], "timestamp", source, line_no)
        times.append(checked_timestamp(ms / 1e3, record["timestamp"], "timestamp", source, line_no))
        prompt = checked_tokens(record["input_length"], "input_length", source, line_no)
        prompts.append(prompt)
        outputs.append(checked_tokens(record["output_length"], "output_length", source, line_no))
        hashes = _hash_ids(record.get("hash_ids"), source, line_no)
        hashed = hashed or hashes is not None
        cached.append(_prefix_hit(hashes, prompt, seen_blocks))
        check_order(times, source, line_no)
    return build_trace(source, "mooncake", times, prompts, outputs, cached, hashed)


def _json_line(line: str, source: str, line_no: int):
    """One JSON object; nesting is capped before parsing (deep arrays are a RecursionError)."""
    depth = deepest = 0
    for ch in line:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    if deepest > 8:
        raise UserError(f"{source} line {line_no}: JSON nested {deepest} levels; at most 8")

    def no_constant(name: str):
        raise ValueError(name)

    try:
        return json.loads(line, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source} line {line_no}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise UserError(
            f"{source} line {line_no}: unsupported JSON value {excerpt(str(exc))} (NaN and "
            "Infinity are not numbers)"
        ) from None


def _json_number(value, field: str, source: str, line_no: int) -> None:
    """Mooncake fields are JSON numbers: a string ("512") is refused, not converted."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(
            f"{source} line {line_no}: {field} {excerpt(value)} is not a JSON number; a Mooncake "
            f"trace writes {', '.join(MOONCAKE_FIELDS)} as numbers"
        )


def _hash_ids(value, source: str, line_no: int) -> list | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_HASH_IDS:
        raise UserError(
            f"{source} line {line_no}: hash_ids must be a list of at most {MAX_HASH_IDS:,} "
            f"block hashes, got {excerpt(value)}"
        )
    for h in value:
        if (
            isinstance(h, bool)
            or not isinstance(h, int | str)
            or (isinstance(h, str) and len(h) > 256)
        ):
            raise UserError(
                f"{source} line {line_no}: hash_ids holds {excerpt(h)}; each block hash is an "
                "integer or a short string"
            )
    return value


def _prefix_hit(hashes, prompt: int, seen: set) -> int:
    """Tokens of the leading blocks some earlier request already computed."""
    if not hashes:
        return 0
    hit = 0
    for h in hashes:
        if h not in seen:
            break
        hit += 1
    seen.update(hashes)
    return min(hit * MOONCAKE_BLOCK_TOKENS, max(prompt - 1, 0))


# --- summary -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    source: str
    kind: str
    requests: int
    duration_s: float
    mean_rate_per_s: float
    interarrival_cv: float
    prompt: dict[str, float]  # p50, p90, p99, mean, max
    output: dict[str, float]
    prefix_hit_rate: float  # share of prompt tokens that hit the prefix cache

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _stats(x: np.ndarray) -> dict[str, float]:
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "mean": float(x.mean()),
        "max": float(x.max()),
    }


def summarize(trace: Trace) -> Summary:
    gaps = np.diff(trace.arrival_ms) / 1e3
    duration = float(trace.arrival_ms[-1] / 1e3)
    rate = (len(trace) - 1) / duration if duration > 0 else 0.0
    cv = float(gaps.std() / gaps.mean()) if gaps.size and gaps.mean() > 0 else 0.0
    total_prompt = float(trace.prompt.sum())
    return Summary(
        source=trace.source,
        kind=trace.kind,
        requests=len(trace),
        duration_s=duration,
        mean_rate_per_s=rate,
        interarrival_cv=cv,
        prompt=_stats(trace.prompt),
        output=_stats(trace.output),
        prefix_hit_rate=float(trace.cached.sum()) / total_prompt if total_prompt else 0.0,
    )


def workload_from_summary(
    s: Summary, name: str, model: str, gpu: str, gpus: int, ttft_ms: float, tpot_ms: float
) -> dict:
    """A workload mapping whose traffic block is the trace's percentiles and mean rate."""

    def pct(d: dict[str, float]) -> dict[str, int]:
        p50 = max(round(d["p50"]), 1)
        return {"p50": p50, "p99": max(round(d["p99"]), p50)}

    return {
        "name": name,
        "description": (
            f"From {Path(s.source).name}: {s.requests} requests over {s.duration_s:.0f} s, "
            f"inter-arrival CV {s.interarrival_cv:.2f}."
        ),
        "model": model,
        "traffic": {
            "prompt_tokens": pct(s.prompt),
            "output_tokens": pct(s.output),
            "requests_per_second": round(max(s.mean_rate_per_s, 1e-3), 4),
            "prefix_cache_hit_rate": round(min(s.prefix_hit_rate, 0.99), 3),
        },
        "slo": {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms},
        "cluster": {"gpu": gpu, "gpus": gpus},
    }
