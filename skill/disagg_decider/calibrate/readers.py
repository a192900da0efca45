"""Benchmark result files in, one `Run` per measured load point out.

Formats, detected from their keys (never from the file name):

- `vllm`: `vllm bench serve --save-result` (and `benchmarks/benchmark_serving.py`): one JSON
  object, or one per line with `--append-result`; with `--save-detailed` it also carries
  per-request `input_lens`, `output_lens`, `ttfts` and `itls` (seconds), which are used.
- `sglang`: `python -m sglang.bench_serving --output-file`: JSON Lines, one object per run.
- `aiperf`: NVIDIA AIPerf `profile_export_aiperf.json` and GenAI-Perf
  `profile_export_genai_perf.json`: metric objects such as
  `"time_to_first_token": {"unit": "ms", "avg": ...}`.

Every error names the file, the line or run, and the field. Files are read under the file
rules and work caps of `source.py`; every number is checked against its field's physical range
by `fields.py`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from disagg_decider.calibrate.fields import LATENCY_MS, Fields
from disagg_decider.calibrate.source import Limits, ResultFile, RunBudget, expect_object, loads
from disagg_decider.errors import UserError, clip

FORMATS = ("vllm", "sglang", "aiperf")


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


def read_results(
    paths: Iterable[Path], limits: Limits | None = None
) -> tuple[list[Run], list[SourceFile]]:
    """Every run in these files, under `limits` (files, runs, bytes; see `source.py`)."""
    limits = limits or Limits()
    paths = list(paths)
    limits.check_files(len(paths))
    budget = RunBudget(limits)
    runs: list[Run] = []
    files: list[SourceFile] = []
    for path in paths:
        source = ResultFile(path, limits, budget)
        found = [parse_record(obj, path.name, where) for where, obj in source.records()]
        runs.extend(found)
        files.append(SourceFile(path.name, source.sha256, found[0].format, len(found)))
    return runs, files


def parse_text(text: str, source: str) -> list[Run]:
    """All runs in one file's text: one JSON document, a JSON list, or JSON Lines."""
    return [parse_record(obj, source, where) for where, obj in _records(text, source)]


def _records(text: str, source: str) -> list[tuple[str, dict]]:
    try:
        doc = loads(text, source, "")
    except UserError as whole_error:
        lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
        if len(lines) < 2:
            raise whole_error from None
        return [
            (
                f"line {n}",
                expect_object(loads(line, source, f"line {n}", jsonl=True), source, f"line {n}"),
            )
            for n, line in lines
        ]
    if isinstance(doc, list):
        return [
            (f"run {i + 1}", expect_object(o, source, f"run {i + 1}")) for i, o in enumerate(doc)
        ]
    return [("run 1", expect_object(doc, source, "the document"))]


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
        return _aiperf(obj, Fields(obj, source, where))
    if fmt == "sglang":
        return _sglang(obj, Fields(obj, source, where))
    if fmt == "vllm":
        return _vllm(obj, Fields(obj, source, where))
    keys = ", ".join(clip(k, 40) for k in sorted(obj)[:8]) or "none"
    raise UserError(
        f"{source}: {where}: not a recognised benchmark result (keys: {keys}); expected "
        "vllm bench serve --save-result JSON (mean_ttft_ms, model_id, ...), SGLang "
        "bench_serving JSONL (median_ttft_ms, median_e2e_latency_ms, ...) or AIPerf / "
        "GenAI-Perf profile export JSON (time_to_first_token: {avg, unit}, ...)"
    )


def _mean_cv(values: np.ndarray) -> tuple[float, float]:
    mean = float(values.mean())
    return mean, (float(values.std()) / mean if mean > 0 else 0.0)


def _concurrency(f: Fields, field: str = "max_concurrency") -> float | None:
    value = f.number(field, required=False)
    return None if value is None or math.isinf(value) else value


def _vllm(obj: dict, f: Fields) -> Run:
    completed = f.number("completed")
    rate = f.number("request_rate", required=False)
    inputs, outputs, ttfts = f.numbers("input_lens"), f.numbers("output_lens"), f.numbers("ttfts")
    per_request = bool(inputs is not None and outputs is not None and ttfts is not None)
    per_request = per_request and bool(inputs.size and outputs.size and ttfts.size)
    if per_request:
        if not (len(inputs) == len(outputs) == len(ttfts)):
            raise f.fail("ttfts", "input_lens, output_lens and ttfts differ in length")
        done = np.flatnonzero(outputs > 0)
        if not done.size:
            raise f.fail("output_lens", "no request produced output")
        prompt, cv = _mean_cv(inputs[done])
        if prompt < 1:
            raise f.fail("input_lens", "the requests that produced output had empty prompts")
        output, output_cv = _mean_cv(outputs[done])
        ttft = float(ttfts[done].mean()) * 1e3
        if not LATENCY_MS.lo <= ttft <= LATENCY_MS.hi:
            raise f.fail("ttfts", f"mean TTFT {ttft:.6g} ms; expected {LATENCY_MS.text()}")
        tpot, stat = _tpot_from_itls(f, obj.get("itls"), done)
        ttft_stat = "mean"
    else:
        prompt = f.mean_per_request("total_input_tokens", f.number("total_input_tokens"), completed)
        output = f.mean_per_request(
            "total_output_tokens", f.number("total_output_tokens"), completed
        )
        cv = output_cv = 0.0
        ttft, key = f.first("mean_ttft_ms", "median_ttft_ms")
        ttft_stat = (key or "mean").split("_")[0]
        tpot, key = f.first("mean_tpot_ms", "mean_itl_ms", "median_tpot_ms", "median_itl_ms")
        stat = _stat_name(key)
    duration = f.number("duration", required=False)
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


def _tpot_from_itls(f: Fields, itls: Any, done: np.ndarray) -> tuple[float | None, str]:
    """Mean over requests of each request's mean inter-token gap (vLLM's TPOT)."""
    if itls is None:
        return None, "none"
    if not isinstance(itls, list) or not all(isinstance(x, list) for x in itls):
        raise f.fail("itls", "expected a list of per-request lists of gaps (seconds)")
    wanted = [i for i in done.tolist() if i < len(itls) and itls[i]]
    if not wanted:
        return None, "none"
    counts = np.array([len(itls[i]) for i in wanted])
    gaps = f.numbers("itls", list(itertools.chain.from_iterable(itls[i] for i in wanted)))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    per = np.add.reduceat(gaps, starts) / counts * 1e3
    tpot = float(per.mean())
    if not LATENCY_MS.lo <= tpot <= LATENCY_MS.hi:
        raise f.fail("itls", f"mean TPOT {tpot:.6g} ms; expected {LATENCY_MS.text()}")
    return tpot, "mean TPOT"


def _stat_name(key: str | None) -> str:
    if key is None:
        return "none"
    stat, metric = key.split("_")[:2]
    return f"{stat} {metric.upper()}"


def _sglang(obj: dict, f: Fields) -> Run:
    completed = f.number("completed")
    prompt = f.mean_per_request("total_input_tokens", f.number("total_input_tokens"), completed)
    output = f.mean_per_request("total_output_tokens", f.number("total_output_tokens"), completed)
    ratio = f.number("random_range_ratio", required=False)
    cv = 0.0
    if obj.get("dataset_name") == "random" and ratio is not None and ratio < 1:
        # bench_serving draws random lengths uniformly on [ratio x L, L]
        cv = (1 - ratio) / (math.sqrt(3) * (1 + ratio))
    ttft, key = f.first("mean_ttft_ms", "median_ttft_ms")
    if ttft is None or key is None:
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


def _aiperf(obj: dict, f: Fields) -> Run:
    prompt = f.metric("input_sequence_length")
    output = f.metric("output_sequence_length")
    cv = f.spread("input_sequence_length", prompt)
    output_cv = f.spread("output_sequence_length", output)
    tpot = f.metric("inter_token_latency", required=False)
    count = f.metric("request_count", required=False)
    rate, concurrency = _aiperf_load(obj, f)
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


def _aiperf_load(obj: dict, f: Fields) -> tuple[float, float | None]:
    """Concurrency or request rate of the profiling phase, where AIPerf/GenAI-Perf record it."""
    config = obj.get("input_config") if isinstance(obj.get("input_config"), dict) else {}
    candidates: list[tuple[str, dict]] = [("input_config", config)]
    for key in ("loadgen", "perf_analyzer"):
        if isinstance(config.get(key), dict):
            candidates.append((f"input_config.{key}", config[key]))
            stim = config[key].get("stimulus")
            if isinstance(stim, dict):
                candidates.append((f"input_config.{key}.stimulus", stim))
    phases = config.get("phases")
    if isinstance(phases, list):
        candidates[:0] = [
            (f"input_config.phases[{i}]", p)
            for i, p in enumerate(phases)
            if isinstance(p, dict) and not p.get("exclude_from_results")
        ]
    for where, c in candidates:
        if c.get("concurrency") is not None:
            return math.inf, f.check(f"{where}.concurrency", c["concurrency"])
        if c.get("request_rate") is not None:
            rate = f.check(f"{where}.request_rate", c["request_rate"])
            if not math.isinf(rate):
                return rate, None
    return math.inf, None
