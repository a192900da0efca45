"""Benchmark result files in, one `Run` per measured load point out.

Formats, detected from their keys (never from the file name):

- `vllm`: `vllm bench serve --save-result` (and `benchmarks/benchmark_serving.py`): one JSON
  object, or one per line with `--append-result`; with `--save-detailed` it also carries
  per-request `input_lens`, `output_lens`, `ttfts` and `itls` (seconds), which are used.
- `sglang`: `python -m sglang.bench_serving --output-file`: JSON Lines, one object per run.
- `aiperf`: NVIDIA AIPerf `profile_export_aiperf.json` and GenAI-Perf
  `profile_export_genai_perf.json`: metric objects such as
  `"time_to_first_token": {"unit": "ms", "avg": ...}`.

Every error names the file, the line or run, and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disagg_decider.errors import UserError

FORMATS = ("vllm", "sglang", "aiperf")
MAX_FILE_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class Run:
    """One benchmark run at one load, reduced to what the fit compares."""

    source: str  # file name
    where: str  # "line 3" or "run 1"
    format: str
    prompt_tokens: float  # mean per request
    output_tokens: float
    prompt_cv: float  # coefficient of variation of prompt lengths, 0 when unknown
    request_rate_per_s: float  # open-loop offered rate; inf for closed loops and bursts
    concurrency: float | None  # closed-loop clients (max_concurrency / AIPerf concurrency)
    requests: int
    ttft_ms: float | None
    ttft_stat: str  # "mean" or "median": what the file gave
    tpot_ms: float | None
    tpot_stat: str  # "mean TPOT", "mean ITL", "median ITL", ...
    output_tokens_per_s: float | None
    per_request: bool  # computed from per-request records
    output_cv: float = 0.0  # coefficient of variation of output lengths, 0 when unknown

    @property
    def burst(self) -> bool:
        """All requests sent at once (rate inf, no concurrency cap): a transient, not a load."""
        return math.isinf(self.request_rate_per_s) and self.concurrency is None

    def load_label(self) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency:g}"
        if self.burst:
            return f"burst of {self.requests} requests"
        return f"{self.request_rate_per_s:g} req/s"


@dataclass(frozen=True)
class SourceFile:
    name: str
    sha256: str
    format: str
    runs: int


def read_results(paths: Iterable[Path]) -> tuple[list[Run], list[SourceFile]]:
    runs: list[Run] = []
    files: list[SourceFile] = []
    for path in paths:
        text, digest = _read_text(path)
        found = parse_text(text, path.name)
        if not found:
            raise UserError(f"{path}: no benchmark runs found")
        runs.extend(found)
        files.append(SourceFile(path.name, digest, found[0].format, len(found)))
    return runs, files


def _read_text(path: Path) -> tuple[str, str]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UserError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB")
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory; give result files") from None
    try:
        return data.decode("utf-8"), hashlib.sha256(data).hexdigest()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text (expected JSON or JSON Lines)") from None


def parse_text(text: str, source: str) -> list[Run]:
    """All runs in one file's text: one JSON document, a JSON list, or JSON Lines."""
    records = _records(text, source)
    return [parse_record(obj, source, where) for where, obj in records]


def _records(text: str, source: str) -> list[tuple[str, dict]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as whole_error:
        lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
        if len(lines) < 2:
            raise UserError(
                f"{source}: not JSON ({whole_error.msg} at line {whole_error.lineno}); expected "
                "a vllm bench serve / AIPerf JSON file or SGLang bench_serving JSON Lines"
            ) from None
        out = []
        for number, line in lines:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(
                    f"{source}: line {number}: not JSON ({exc.msg}); JSON Lines files hold "
                    "one result object per line"
                ) from None
            out.append((f"line {number}", obj))
        return [(w, _object(o, source, w)) for w, o in out]
    if isinstance(doc, list):
        return [(f"run {i + 1}", _object(o, source, f"run {i + 1}")) for i, o in enumerate(doc)]
    return [("run 1", _object(doc, source, "the document"))]


def _object(obj: Any, source: str, where: str) -> dict:
    if not isinstance(obj, dict):
        raise UserError(f"{source}: {where}: expected a JSON object of benchmark results")
    return obj


def detect_format(obj: dict) -> str | None:
    """Which tool wrote a result object, from keys only that tool writes."""
    if isinstance(obj.get("time_to_first_token"), dict) or isinstance(
        obj.get("request_throughput"), dict
    ):
        return "aiperf"
    if "mean_e2e_latency_ms" in obj or "median_e2e_latency_ms" in obj or "dataset_name" in obj:
        return "sglang"
    if "model_id" in obj or "tokenizer_id" in obj or "ttfts" in obj or "mean_tpot_ms" in obj:
        return "vllm"
    return None


def parse_record(obj: dict, source: str, where: str) -> Run:
    records = obj.get("records")
    if isinstance(records, dict) and isinstance(records.get("time_to_first_token"), dict):
        obj = {**records, **{k: v for k, v in obj.items() if k != "records"}}  # early AIPerf
    fmt = detect_format(obj)
    if fmt == "aiperf":
        return _aiperf(obj, _Fields(obj, source, where))
    if fmt == "sglang":
        return _sglang(obj, _Fields(obj, source, where))
    if fmt == "vllm":
        return _vllm(obj, _Fields(obj, source, where))
    keys = ", ".join(sorted(obj)[:8]) or "none"
    raise UserError(
        f"{source}: {where}: not a recognised benchmark result (keys: {keys}); expected "
        "vllm bench serve --save-result JSON (mean_ttft_ms, model_id, ...), SGLang "
        "bench_serving JSONL (median_ttft_ms, median_e2e_latency_ms, ...) or AIPerf / "
        "GenAI-Perf profile export JSON (time_to_first_token: {avg, unit}, ...)"
    )


class _Fields:
    """Typed access to one result object; every failure names file, run and field."""

    def __init__(self, obj: dict, source: str, where: str) -> None:
        self.obj, self.source, self.where = obj, source, where

    def fail(self, field: str, what: str) -> UserError:
        return UserError(f"{self.source}: {self.where}: field '{field}': {what}")

    def number(self, field: str, *, required: bool = True, positive: bool = False):
        if field not in self.obj or self.obj[field] is None:
            if required:
                raise self.fail(field, "required field is missing")
            return None
        value = self.obj[field]
        if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
            return math.inf
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, f"expected a number, got {value!r:.60}")
        if math.isnan(value) or value < 0 or (positive and value <= 0):
            raise self.fail(
                field,
                f"expected a {'positive' if positive else 'non-negative'} number, got {value!r}",
            )
        return float(value)

    def first(self, *fields: str) -> tuple[float | None, str | None]:
        for f in fields:
            v = self.number(f, required=False)
            if v is not None and v > 0:
                return v, f
        return None, None

    def numbers(self, field: str) -> list[float] | None:
        value = self.obj.get(field)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            raise self.fail(field, "expected a list of numbers (per-request values)")
        return [float(v) for v in value]

    def metric(self, name: str, stat: str = "avg", *, required: bool = True):
        """AIPerf's {"unit": ..., "avg": ...} objects; times converted to milliseconds."""
        value = self.obj.get(name)
        if value is None:
            if required:
                raise self.fail(name, "required metric is missing")
            return None
        if not isinstance(value, dict) or stat not in value:
            raise self.fail(name, f"expected an object with '{stat}' and 'unit'")
        x = value[stat]
        if isinstance(x, bool) or not isinstance(x, int | float) or x < 0:
            raise self.fail(f"{name}.{stat}", f"expected a non-negative number, got {x!r:.60}")
        unit = str(value.get("unit", "")).lower()
        scale = {"s": 1e3, "sec": 1e3, "seconds": 1e3, "us": 1e-3, "ns": 1e-6}.get(unit, 1.0)
        return float(x) * scale


def _mean_cv(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / n
    return mean, (math.sqrt(var) / mean if mean > 0 else 0.0)


def _concurrency(f: _Fields, field: str = "max_concurrency") -> float | None:
    value = f.number(field, required=False, positive=True)
    return None if value is None or math.isinf(value) else value


def _vllm(obj: dict, f: _Fields) -> Run:
    completed = f.number("completed", positive=True)
    rate = f.number("request_rate", required=False)
    inputs, outputs = f.numbers("input_lens"), f.numbers("output_lens")
    ttfts, itls = f.numbers("ttfts"), obj.get("itls")
    per_request = bool(inputs and outputs and ttfts)
    if per_request:
        if not (len(inputs) == len(outputs) == len(ttfts)):
            raise f.fail("ttfts", "input_lens, output_lens and ttfts differ in length")
        done = [i for i, o in enumerate(outputs) if o > 0]
        if not done:
            raise f.fail("output_lens", "no request produced output")
        prompt, cv = _mean_cv([inputs[i] for i in done])
        output, output_cv = _mean_cv([outputs[i] for i in done])
        ttft = sum(ttfts[i] for i in done) / len(done) * 1e3
        tpot, stat = _tpot_from_itls(f, itls, done)
        ttft_stat = "mean"
    else:
        prompt = f.number("total_input_tokens", positive=True) / completed
        output = f.number("total_output_tokens", positive=True) / completed
        cv = output_cv = 0.0
        ttft, key = f.first("mean_ttft_ms", "median_ttft_ms")
        ttft_stat = (key or "mean").split("_")[0]
        tpot, key = f.first("mean_tpot_ms", "mean_itl_ms", "median_tpot_ms", "median_itl_ms")
        stat = _stat_name(key)
    duration = f.number("duration", required=False, positive=True)
    throughput = f.number("output_throughput", required=False)
    if throughput is None and duration:
        throughput = output * completed / duration
    return Run(
        source=f.source,
        where=f.where,
        format="vllm",
        prompt_tokens=prompt,
        output_tokens=output,
        prompt_cv=cv,
        request_rate_per_s=math.inf if rate is None else rate,
        concurrency=_concurrency(f),
        requests=int(completed),
        ttft_ms=ttft,
        ttft_stat=ttft_stat,
        tpot_ms=tpot,
        tpot_stat=stat,
        output_tokens_per_s=throughput,
        per_request=per_request,
        output_cv=output_cv,
    )


def _tpot_from_itls(f: _Fields, itls: Any, done: list[int]) -> tuple[float | None, str]:
    """Mean over requests of each request's mean inter-token gap (vLLM's TPOT)."""
    if itls is None:
        return None, "none"
    if not isinstance(itls, list) or not all(isinstance(x, list) for x in itls):
        raise f.fail("itls", "expected a list of per-request lists of gaps (seconds)")
    per = []
    for i in done:
        gaps = itls[i] if i < len(itls) else []
        if gaps:
            if not all(isinstance(g, int | float) and not isinstance(g, bool) for g in gaps):
                raise f.fail(f"itls[{i}]", "expected numbers (seconds)")
            per.append(sum(gaps) / len(gaps) * 1e3)
    return (sum(per) / len(per), "mean TPOT") if per else (None, "none")


def _stat_name(key: str | None) -> str:
    if key is None:
        return "none"
    stat, metric = key.split("_")[:2]
    return f"{stat} {metric.upper()}"


def _sglang(obj: dict, f: _Fields) -> Run:
    completed = f.number("completed", positive=True)
    prompt = f.number("total_input_tokens", positive=True) / completed
    output = f.number("total_output_tokens", positive=True) / completed
    ratio = f.number("random_range_ratio", required=False)
    cv = 0.0
    if obj.get("dataset_name") == "random" and ratio is not None and ratio < 1:
        # bench_serving draws random lengths uniformly on [ratio x L, L]
        cv = (1 - ratio) / (math.sqrt(3) * (1 + ratio))
    ttft, key = f.first("mean_ttft_ms", "median_ttft_ms")
    if ttft is None:
        raise f.fail("median_ttft_ms", "required field is missing (or mean_ttft_ms)")
    tpot, tkey = f.first("mean_tpot_ms", "mean_itl_ms", "median_tpot_ms", "median_itl_ms")
    rate = f.number("request_rate", required=False)
    return Run(
        source=f.source,
        where=f.where,
        format="sglang",
        prompt_tokens=prompt,
        output_tokens=output,
        prompt_cv=cv,
        request_rate_per_s=math.inf if rate is None else rate,
        concurrency=_concurrency(f),
        requests=int(completed),
        ttft_ms=ttft,
        ttft_stat=key.split("_")[0],
        tpot_ms=tpot,
        tpot_stat=_stat_name(tkey),
        output_tokens_per_s=f.number("output_throughput", required=False),
        per_request=False,
        output_cv=cv,  # the random dataset draws output lengths on the same range
    )


def _aiperf(obj: dict, f: _Fields) -> Run:
    isl = f.obj.get("input_sequence_length")
    prompt = f.metric("input_sequence_length")
    std = isl.get("std") if isinstance(isl, dict) else None
    cv = float(std) / prompt if isinstance(std, int | float) and prompt > 0 else 0.0
    output = f.metric("output_sequence_length")
    osl = f.obj.get("output_sequence_length")
    out_std = osl.get("std") if isinstance(osl, dict) else None
    output_cv = float(out_std) / output if isinstance(out_std, int | float) and output > 0 else 0.0
    tpot = f.metric("inter_token_latency", required=False)
    count = f.metric("request_count", required=False)
    rate, concurrency = _aiperf_load(obj)
    return Run(
        source=f.source,
        where=f.where,
        format="aiperf",
        prompt_tokens=prompt,
        output_tokens=output,
        prompt_cv=cv,
        request_rate_per_s=rate,
        concurrency=concurrency,
        requests=int(count or 0),
        ttft_ms=f.metric("time_to_first_token"),
        ttft_stat="mean",
        tpot_ms=tpot,
        tpot_stat="mean ITL" if tpot is not None else "none",
        output_tokens_per_s=f.metric("output_token_throughput", required=False),
        per_request=False,
        output_cv=output_cv,
    )


def _aiperf_load(obj: dict) -> tuple[float, float | None]:
    """Concurrency or request rate of the profiling phase, where AIPerf/GenAI-Perf record it."""
    config = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    candidates: list[dict] = [config]
    for key in ("loadgen", "perf_analyzer"):
        if isinstance(config.get(key), dict):
            candidates.append(config[key])
            stim = config[key].get("stimulus")
            if isinstance(stim, dict):
                candidates.append(stim)
    phases = config.get("phases")
    if isinstance(phases, list):
        candidates[:0] = [
            p for p in phases if isinstance(p, dict) and not p.get("exclude_from_results")
        ]
    for c in candidates:
        conc = c.get("concurrency")
        if isinstance(conc, int | float) and not isinstance(conc, bool) and conc > 0:
            return math.inf, float(conc)
        rate = c.get("request_rate")
        if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
            return float(rate), None
    return math.inf, None
