"""Property test: fuzzed benchmark result files through `decide calibrate`, in-process.

Documents are built in the three formats calibrate reads (vLLM summary and --save-detailed,
SGLang bench_serving, AIPerf / GenAI-Perf exports) from a valid base, then fields are replaced
by adversarial values: NaN, +-Infinity, zero, negatives, 1e-300, subnormals, 401- and 5,001-digit
integers, strings, booleans, lists, objects, nesting from 33 to 100,000 levels; keys dropped or
added; written as one document, a JSON list or JSON Lines, sometimes with blank lines or bytes
that are not UTF-8. Property: exit 0 or 2, never a traceback, a short message on 2, and a run
that was accepted has every figure finite and within its physical range. The reader property runs
200 examples in the default profile and 2,000 with HYPOTHESIS_PROFILE=large; the end-to-end one
(fit included, ~0.5 CPU-s an example) 12 and 300.
"""

from __future__ import annotations

import json
import math
import time

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from disagg_decider.calibrate import readers
from disagg_decider.calibrate.fields import LATENCY_MS, MAX_CLIENTS, MAX_TOKENS
from disagg_decider.errors import UserError
from tests.hostile_support import run_decide
from tests.test_hostile_calibrate import AIPERF, DETAILED, TARGET, VLLM

SGLANG = {
    "dataset_name": "random",
    "completed": 100,
    "total_input_tokens": 100_000,
    "total_output_tokens": 12_800,
    "random_range_ratio": 0.5,
    "request_rate": 4.0,
    "median_ttft_ms": 40.0,
    "median_itl_ms": 9.0,
    "median_e2e_latency_ms": 1200.0,
}
BASES = {"vllm": VLLM, "vllm-detailed": DETAILED, "sglang": SGLANG, "aiperf": AIPERF}
RAW = {  # written verbatim into the JSON text, after json.dumps
    "nan": "NaN",
    "inf": "Infinity",
    "-inf": "-Infinity",
    "int401": "1" + "0" * 400,
    "-int401": "-1" + "0" * 400,
    "int5001": "9" * 5001,
    **{f"deep{n}": "[" * n + "]" * n for n in (33, 1000, 10_000, 100_000)},
    "deepobj": '{"a": ' * 5000 + "1" + "}" * 5000,
}

scalars = st.one_of(
    st.sampled_from([0, -0.0, 1e-300, 5e-324, -1, -1e-9, 1e308, 2**63, 2**64, 1.5, 10**17]),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([f"@raw:{k}@" for k in RAW]),
    st.sampled_from(["inf", "Infinity", "", "12", " 7", "NaN", "1e3"]),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def mutated(draw, base: dict) -> dict:
    """The base with some fields replaced, some dropped, perhaps one added."""
    doc = json.loads(json.dumps(base))
    for key in draw(st.lists(st.sampled_from(sorted(doc)), max_size=4, unique=True)):
        action = draw(st.sampled_from(["replace", "replace", "drop", "inner"]))
        if action == "drop":
            del doc[key]
        elif action == "inner" and isinstance(doc[key], dict) and doc[key]:
            inner_key = draw(st.sampled_from(sorted(doc[key])))
            doc[key][inner_key] = draw(values)
        elif action == "inner" and isinstance(doc[key], list) and doc[key]:
            doc[key][draw(st.integers(0, len(doc[key]) - 1))] = draw(values)
        else:
            doc[key] = draw(values)
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["records", "input_config", "itls", "x"]))] = draw(values)
    return doc


def _text(obj) -> str:
    text = json.dumps(obj)
    for key, raw in RAW.items():
        text = text.replace(json.dumps(f"@raw:{key}@"), raw)
    return text


@st.composite
def result_files(draw) -> bytes:
    docs = [draw(mutated(BASES[draw(st.sampled_from(sorted(BASES)))])) for _ in range(3)]
    docs = docs[: draw(st.integers(1, 3))]
    layout = draw(st.sampled_from(["document", "list", "lines", "pretty"]))
    if layout == "document":
        text = _text(docs[0])
    elif layout == "pretty":
        text = _text(docs[0]).replace(", ", ",\n  ")
    elif layout == "list":
        text = "[" + ", ".join(_text(d) for d in docs) + "]"
    else:
        text = "".join(_text(d) + ("\n\n" if draw(st.booleans()) else "\n") for d in docs)
    data = text.encode()
    tail = draw(st.sampled_from([b"", b"", b"", b"\xff\xfe", b"{", b"\x00"]))
    return data + tail


def _check_run(run: readers.Run) -> None:
    """What the fit relies on: finite, physical figures."""
    assert 1 <= run.prompt_tokens <= MAX_TOKENS and 1 <= run.output_tokens <= MAX_TOKENS
    assert math.isfinite(run.prompt_cv) and run.prompt_cv >= 0
    assert math.isfinite(run.output_cv) and run.output_cv >= 0
    assert run.request_rate_per_s > 0 and not math.isnan(run.request_rate_per_s)
    assert run.concurrency is None or 1 <= run.concurrency <= MAX_CLIENTS
    assert run.requests >= 0
    for ms in (run.ttft_ms, run.tpot_ms):
        assert ms is None or LATENCY_MS.lo <= ms <= LATENCY_MS.hi
    assert run.output_tokens_per_s is None or 0 < run.output_tokens_per_s < math.inf


def _read(path) -> list[readers.Run] | None:
    """The runs, or None after checking the refusal names the file and stays short."""
    try:
        runs, _ = readers.read_results([path])
    except UserError as exc:
        message = str(exc)
        assert path.name in message and len(message) < 2000, message[:3000]
        return None
    for run in runs:
        _check_run(run)
    return runs


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=result_files())
def test_fuzzed_result_files_are_read_or_refused_by_field(tmp_path, data):
    """Every fuzzed file, read in-process (no fit: fast): refused with a short message naming
    the file, or read into runs whose figures are all finite and physical."""
    path = tmp_path / "fuzzed-result.json"
    path.write_bytes(data)
    start = time.process_time()
    _read(path)
    assert time.process_time() - start < 10


# Values near and past the edges of the physical ranges: most documents read, so the fit runs.
edges = st.one_of(
    st.sampled_from([1e-300, 1e-6, 1e-3, 0.5, 1, 3, 1e6, 8.64e7, 1e8, 1e15, 1e300, -1, 0]),
    st.floats(min_value=1e-9, max_value=1e12),
    st.integers(1, 10**9),
)


@st.composite
def near_valid_files(draw) -> bytes:
    base = BASES[draw(st.sampled_from(sorted(BASES)))]
    doc = json.loads(json.dumps(base))
    for key in draw(st.lists(st.sampled_from(sorted(doc)), min_size=1, max_size=3, unique=True)):
        if isinstance(doc[key], dict) and "avg" in doc[key]:
            doc[key]["avg"] = draw(edges)
        elif isinstance(doc[key], int | float) and not isinstance(doc[key], bool):
            doc[key] = draw(edges)
    return _text(doc).encode()


E2E_EXAMPLES = 300 if settings.default.max_examples > 1000 else 12


@settings(
    max_examples=E2E_EXAMPLES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.one_of(near_valid_files(), result_files()))
def test_fuzzed_result_files_through_the_cli_exit_0_or_2(tmp_path, capsys, data):
    """The whole `decide calibrate` (fit and simulator replay), in-process: exit 0 or 2, a
    message on 2, never a traceback or an internal error, in bounded CPU time. Slower (a fit
    is ~0.5 CPU-s), so fewer examples: 12 by default, 300 in the large profile."""
    path = tmp_path / "fuzzed-result.json"
    path.write_bytes(data)
    start = time.process_time()
    result = run_decide(capsys, "calibrate", str(path), *TARGET, "--json")
    assert result.code in (0, 2), (result.code, result.stderr[-2000:])
    event(f"exit {result.code}")  # --hypothesis-show-statistics: how many reached the fit
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    if result.code == 2:
        assert result.stderr.strip() and len(result.stderr) < 4000
    else:
        assert json.loads(result.stdout)["entries"][0]["points"]
    assert time.process_time() - start < 60
