"""Hostile result files for `decide calibrate` (issue 29): the file rules workloads follow, caps
on the work a file can ask for, and every number checked by field.

Subprocess cases run under RLIMIT_AS / RLIMIT_CPU guards and report their own CPU time and peak
RSS (`os.wait4`); a FIFO is detected as a hang only by a generous timeout. Number cases run
in-process (fast): a bad value is exit 2 with the file, the run or line, the field and the valid
range named, never a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.hostile_support import (
    MAX_CPU_SECONDS,
    assert_refused,
    assert_user_error,
    make_fifo,
    run_decide,
    run_decide_bounded,
)

PUBLISHED = ROOT / "tests" / "data" / "benchmarks" / "published"
VLLM_FILE = PUBLISHED / "vllm_llama32_3b_l40s.jsonl"  # three runs
TARGET = ("--model", "llama-3.1-8b", "--gpu", "h100")
MB = 1_000_000

VLLM = {
    "model_id": "m",
    "completed": 100,
    "total_input_tokens": 100_000,
    "total_output_tokens": 12_800,
    "request_rate": 2.0,
    "max_concurrency": None,
    "duration": 50.0,
    "output_throughput": 256.0,
    "mean_ttft_ms": 50.0,
    "mean_tpot_ms": 10.0,
}
DETAILED = {
    **{k: v for k, v in VLLM.items() if not k.startswith("mean_")},
    "input_lens": [1000] * 4,
    "output_lens": [128] * 4,
    "ttfts": [0.05] * 4,
    "itls": [[0.01] * 127] * 4,
    "completed": 4,
}
AIPERF = {
    "time_to_first_token": {"unit": "ms", "avg": 50.0},
    "inter_token_latency": {"unit": "ms", "avg": 10.0},
    "input_sequence_length": {"unit": "tokens", "avg": 1000.0, "std": 10.0},
    "output_sequence_length": {"unit": "tokens", "avg": 128.0},
    "request_count": {"unit": "requests", "avg": 100.0},
    "output_token_throughput": {"unit": "tokens/sec", "avg": 900.0},
    "input_config": {"loadgen": {"concurrency": 8}},
}
BIG = "1" + "0" * 400  # a 401-digit integer: float() overflows
HUGE = "1" + "0" * 5000  # beyond Python's 4,300-digit int parse


def doc(base: dict, **raw: str) -> str:
    """`base` as JSON with fields replaced by raw JSON text (NaN, a 401-digit integer, ...)."""
    text = json.dumps({**base, **{k: f"@{k}@" for k in raw}})
    for key, value in raw.items():
        text = text.replace(json.dumps(f"@{key}@"), value)
    return text


def aiperf(metric: str, avg: str) -> str:
    """The AIPerf base with one metric's average replaced by raw JSON text (in ms)."""
    return json.dumps(AIPERF).replace(json.dumps(AIPERF[metric]), f'{{"avg": {avg}, "unit": "ms"}}')


NUMBER_CASES = [
    # nesting far past the depth cap: RecursionError before
    ("deep-list.json", doc(VLLM, completed="[" * 10_000 + "]" * 10_000), "nested"),
    ("deep-object.json", '{"a": ' * 100_000 + "1" + "}" * 100_000, "nested"),
    (
        "deep-config.json",
        json.dumps(AIPERF).replace('{"concurrency": 8}', '{"x": ' * 40 + "8" + "}" * 40),
        "nested more than 32",
    ),
    # 401- and 5,001-digit integers: OverflowError / ValueError before
    ("big-completed.json", doc(VLLM, completed=BIG), "field 'completed'"),
    ("big-ttft.json", doc(VLLM, mean_ttft_ms=BIG), "field 'mean_ttft_ms'"),
    ("big-input-lens.json", doc(DETAILED, input_lens=f"[1000, {BIG}, 5, 5]"), "input_lens[1]"),
    ("big-aiperf-ttft.json", aiperf("time_to_first_token", BIG), "time_to_first_token.avg"),
    (
        "big-concurrency.json",
        json.dumps(AIPERF).replace('"concurrency": 8', f'"concurrency": {BIG}'),
        "input_config.loadgen.concurrency",
    ),
    ("huge-completed.json", doc(VLLM, completed=HUGE), "4,300 digits"),
    ("huge-aiperf.json", aiperf("time_to_first_token", HUGE), "4,300 digits"),
    # NaN / Infinity where a time or count is meant
    ("inf-completed.json", doc(VLLM, completed="Infinity"), "field 'completed'"),
    ("inf-ttft.json", doc(VLLM, mean_ttft_ms="Infinity"), "field 'mean_ttft_ms'"),
    ("nan-ttfts.json", doc(DETAILED, ttfts="[0.05, NaN, 0.05, 0.05]"), "ttfts[1]"),
    ("inf-ttfts.json", doc(DETAILED, ttfts="[0.05, 0.05, Infinity, 0.05]"), "ttfts[2]"),
    ("nan-itls.json", doc(DETAILED, itls="[[0.01, NaN], [0.01], [0.01], [0.01]]"), "itls["),
    ("nan-aiperf-ttft.json", aiperf("time_to_first_token", "NaN"), "time_to_first_token.avg"),
    ("inf-aiperf-itl.json", aiperf("inter_token_latency", "Infinity"), "inter_token_latency"),
    (
        "nan-aiperf-std.json",
        json.dumps(AIPERF).replace('"std": 10.0', '"std": NaN'),
        "input_sequence_length.std",
    ),
    # zero, negative and 1e-300 where only a positive physical value makes sense
    ("zero-rate.json", doc(VLLM, request_rate="0"), "field 'request_rate'"),
    ("zero-throughput.json", doc(VLLM, output_throughput="0"), "field 'output_throughput'"),
    ("zero-aiperf-ttft.json", aiperf("time_to_first_token", "0"), "time_to_first_token.avg"),
    ("negative-ttfts.json", doc(DETAILED, ttfts="[0.05, -0.05, 0.05, 0.05]"), "ttfts[1]"),
    (
        "negative-std.json",
        json.dumps(AIPERF).replace('"std": 10.0', '"std": -5'),
        "input_sequence_length.std",
    ),
    (
        "negative-config-rate.json",
        json.dumps(AIPERF).replace('{"concurrency": 8}', '{"request_rate": -1}'),
        "input_config.loadgen.request_rate",
    ),
    ("tiny-ttft.json", doc(VLLM, mean_ttft_ms="1e-300"), "field 'mean_ttft_ms'"),
    ("tiny-rate.json", doc(VLLM, request_rate="1e-300"), "field 'request_rate'"),
    ("tiny-aiperf-itl.json", aiperf("inter_token_latency", "1e-300"), "inter_token_latency"),
    ("tiny-tokens.json", doc(VLLM, total_input_tokens="1e-300"), "total_input_tokens"),
]


@pytest.mark.parametrize(
    ("name", "text", "fragment"), NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES]
)
def test_bad_number_names_file_field_and_range(tmp_path, capsys, name, text, fragment):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = run_decide(capsys, "calibrate", str(path), *TARGET, trace_memory=True)
    assert_user_error(result, name, fragment)
    if "field" in fragment or "[" in fragment or "." in fragment:
        assert "expected" in result.stderr  # the valid range is said
    assert result.cpu_seconds < MAX_CPU_SECONDS and result.peak_bytes < 100 * MB, result


def test_valid_files_of_each_format_still_calibrate(tmp_path, capsys):
    """The bases the cases above break are themselves accepted (the checks are not blanket)."""
    from disagg_decider.calibrate import readers

    for name, text in (
        ("v.json", doc(VLLM)),
        ("d.json", doc(DETAILED)),
        ("a.json", aiperf("time_to_first_token", "50.0")),
    ):
        (tmp_path / name).write_text(text)
        (run,) = readers.read_results([tmp_path / name])[0]
        assert run.ttft_ms == pytest.approx(50.0)


# --- not a regular file: refused from stat, before a read can block or grow ------------------


def _fifo_link(d: Path) -> Path:
    fifo = make_fifo(d / "real.fifo")
    link = d / "results.json"
    os.symlink(fifo, link)
    return link


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: make_fifo(d / "results.json"), "named pipe"),
        (_fifo_link, "named pipe"),
        (lambda d: Path("/dev/zero"), "is a device"),
        (lambda d: Path("/dev/urandom"), "is a device"),
        (lambda d: d, "is a directory"),
    ],
    ids=["fifo", "symlink-to-fifo", "dev-zero", "dev-urandom", "directory"],
)
def test_result_file_must_be_a_regular_file(tmp_path, make, fragment):
    result = run_decide_bounded("calibrate", str(make(tmp_path)), *TARGET, timeout_s=60)
    assert_refused(result, fragment)
    assert result.cpu_s < 10 and result.peak_rss_bytes < 300 * MB, result


# --- work caps, each named with the flag that raises it ----------------------------------------


def _many_runs_list(d: Path) -> list[str]:
    path = d / "runs.json"
    path.write_text(json.dumps([VLLM] * 60_000))
    return [str(path)]


def _many_lines(d: Path) -> list[str]:
    path = d / "runs.jsonl"
    path.write_text((json.dumps(VLLM) + "\n") * 100_000)
    return [str(path)]


def _many_files(d: Path) -> list[str]:
    paths = []
    for i in range(2000):
        path = d / f"r{i}.json"
        path.write_text(json.dumps(VLLM))
        paths.append(str(path))
    return paths


def _million_requests(d: Path) -> list[str]:
    n = 1_000_000
    path = d / "detailed.json"
    with path.open("w") as f:
        f.write(json.dumps({**VLLM, "completed": n})[:-1])
        for key, value in (("input_lens", "1000"), ("output_lens", "128"), ("ttfts", "0.05")):
            f.write(f', "{key}": [' + ", ".join([value] * n) + "]")
        f.write("}")
    return [str(path)]


def _hundred_mb(d: Path) -> list[str]:
    path = d / "big.json"
    with path.open("w") as f:
        f.write("[" + (json.dumps(VLLM) + ", ") * 440_000 + json.dumps(VLLM) + "]")
    assert path.stat().st_size > 100 * MB
    return [str(path)]


@pytest.mark.parametrize(
    ("make", "extra", "fragment", "rss_mb"),
    [
        (_many_runs_list, (), "--max-runs", 300),
        (_many_lines, (), "--max-runs", 300),
        (_many_files, (), "--max-files", 300),
        (_million_requests, (), "--max-values", 150),
        (_hundred_mb, (), "--max-file-mb", 150),
        (lambda d: [str(VLLM_FILE)], ("--max-batch", str(10**9)), "--max-batch", 300),
        (lambda d: [str(VLLM_FILE)], ("--chunk-tokens", str(10**12)), "--chunk-tokens", 300),
    ],
    ids=[
        "60k-run-list",
        "100k-line-jsonl",
        "2000-files",
        "1M-request-file",
        "100MB-file",
        "max-batch-1e9",
        "chunk-tokens-1e12",
    ],
)
def test_costly_input_is_refused_up_front(tmp_path, make, extra, fragment, rss_mb):
    paths = make(tmp_path)
    result = run_decide_bounded("calibrate", *paths, *TARGET, *extra, timeout_s=120)
    assert_refused(result, fragment)
    assert result.cpu_s < 10, result.cpu_s
    assert result.peak_rss_bytes < rss_mb * MB, result.peak_rss_bytes / MB


def test_each_cap_is_named_and_raisable(tmp_path, capsys):
    two = run_decide(capsys, "calibrate", str(VLLM_FILE), *TARGET, "--max-runs", "2")
    assert_user_error(two, "more than 2 runs", "--max-runs")
    files = run_decide(
        capsys, "calibrate", str(VLLM_FILE), str(VLLM_FILE), *TARGET, "--max-files", "1"
    )
    assert_user_error(files, "2 result files", "--max-files")
    big = tmp_path / "big.jsonl"
    big.write_text(VLLM_FILE.read_text() + " " * (2 * MB))
    capped = run_decide(capsys, "calibrate", str(big), *TARGET, "--max-file-mb", "1")
    assert_user_error(capped, "larger than 1,000,000 bytes", "--max-file-mb")
    values = run_decide(capsys, "calibrate", str(VLLM_FILE), *TARGET, "--max-values", "50")
    assert_user_error(values, "more than 50 JSON values", "--max-values")
    raised = run_decide(capsys, "calibrate", str(big), *TARGET, "--max-file-mb", "3", "--json")
    assert raised.code == 0, raised.stderr
    assert json.loads(raised.stdout)["entries"][0]["data"][0]["runs"] == 3
    helped = run_decide(capsys, "calibrate", "--help")
    for flag in ("--max-files", "--max-runs", "--max-file-mb", "--max-values"):
        assert flag in helped.stdout


CALIBRATION = """kind: disagg-decider-calibration
version: 1
entries:
- model: llama-3.1-8b
  gpu: h100
  engine: vllm
  tp: 1
  chunk_tokens: 8192
  max_batch: 256
  efficiency: {prefill_mfu: 0.5, decode_mbu: 0.6, step_overhead_ms: STEP}
  fitted: []
  residuals: {all_median_abs_error: MEDIAN}
  data: []
  points: []
"""


@pytest.mark.parametrize(
    ("step", "median", "field"),
    [
        (".inf", "0.1", "efficiency.step_overhead_ms"),
        ("2.0", ".nan", "residuals.all_median_abs_error"),
    ],
    ids=["inf-constant", "nan-residual"],
)
def test_calibration_file_figures_are_finite(tmp_path, capsys, step, median, field):
    """A calibration file with .inf / .nan was accepted and printed as non-standard JSON."""
    path = tmp_path / "cal.yaml"
    path.write_text(CALIBRATION.replace("STEP", step).replace("MEDIAN", median))
    result = run_decide(capsys, "catalog", "calibration", str(path), "--json")
    assert_user_error(result, "cal.yaml", field, "finite")
