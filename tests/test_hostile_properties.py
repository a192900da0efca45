"""Property tests: random documents and random bytes against every reader of outside input.

The workload loader, the trace readers, the hf_config reader and the MCP tools get random
YAML/JSON documents (random trees, and the shipped example with one field replaced by a random
value) and random byte strings. For every input: no exception other than `UserError` escapes
(the MCP tools answer `isError` instead), the answer comes within 2 s and under 200 MB of peak
traced memory, and every error names a field or a line.

Bounded for CI (`PROPERTY_EXAMPLES`, default 40 per test); raise it on demand, e.g.
`PROPERTY_EXAMPLES=2000 pytest tests/test_hostile_properties.py`.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import tracemalloc

import anyio
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_decider import mcp_server
from disagg_decider.catalog.hf_config import model_from_hf_config
from disagg_decider.errors import UserError
from disagg_decider.sim import trace
from disagg_decider.workload import load_workload
from tests.hostile_support import MAX_CPU_SECONDS, workload_data

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "40"))
BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MAX_PEAK_BYTES = 200e6
MAX_MESSAGE_CHARS = 5000


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))


SCHEMA_WORDS = {key for path in _paths(workload_data()) for key in path} | {
    "workload",
    "arguments",
    "hf_config",
    "efficiency",
    "parallelism",
    "cost",
    "ops",
    "overrides",
    "rule_id",
    "prompt_tokens",
    "link",
    "steps",
    "kind",
}
NAMES_LINE = re.compile(r"(line \d+|:\d+(:\d+)?:|line\b)")
# Errors about the file as a whole name the file, which is then the subject: there is no field.
WHOLE_FILE = re.compile(
    r"(the trace is empty|has a header but no requests|top level|a workload is a YAML mapping"
    r"|expected a JSON object|nested deeper)"
)


def names_field_or_line(message: str) -> bool:
    """A line number, or a dotted field path / key the schema knows, or the key it refused."""
    if NAMES_LINE.search(message) or WHOLE_FILE.search(message):
        return True
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message))
    return bool(words & SCHEMA_WORDS) or "unknown key" in message or "field" in message


def measured(fn, *args):
    """(result or UserError, CPU seconds, peak bytes)."""
    tracemalloc.start()
    start = time.process_time()
    try:
        outcome = fn(*args)
    except UserError as exc:
        outcome = exc
    finally:
        seconds = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return outcome, seconds, peak


def check_answer(outcome, seconds: float, peak: int) -> None:
    assert seconds < MAX_CPU_SECONDS, seconds
    assert peak < MAX_PEAK_BYTES, peak
    if isinstance(outcome, UserError):
        message = str(outcome)
        assert len(message) < MAX_MESSAGE_CHARS, len(message)
        assert names_field_or_line(message), message
        assert "Value error," not in message


# --- strategies -------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["1e308", "-1", "0", ".inf", "NaN", "[/]", "\u202e", "\x1b[31m", "~"]),
)
trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.text(max_size=12), children, max_size=6),
    ),
    max_leaves=40,
)

EXAMPLE = workload_data()


PATHS = list(_paths(EXAMPLE))


@st.composite
def mutated_workloads(draw) -> dict:
    """The shipped example with one to three fields replaced by random values."""
    data = json.loads(json.dumps(EXAMPLE))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node = data
        for key in path[:-1]:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            if isinstance(node, dict):
                node[path[-1]] = draw(trees)
    return data


def yaml_text(data) -> str:
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        return json.dumps(data, default=str)


# --- the workload loader --------------------------------------------------------------------------


@BOUNDED
@given(st.one_of(trees, mutated_workloads()))
def test_workload_loader_on_random_documents(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("w") / "w.yaml"
    path.write_text(yaml_text(data), encoding="utf-8")
    check_answer(*measured(load_workload, path))


@BOUNDED
@given(st.binary(max_size=2000))
def test_workload_loader_on_random_bytes(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("w") / "w.yaml"
    path.write_bytes(raw)
    check_answer(*measured(load_workload, path))


# --- the trace readers ----------------------------------------------------------------------------

csv_rows = st.lists(
    st.tuples(
        st.one_of(st.floats(), st.text(max_size=30), st.integers(-(2**70), 2**70)),
        st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=10)),
        st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=10)),
    ),
    max_size=20,
)


@BOUNDED
@given(csv_rows)
def test_azure_reader_on_random_rows(tmp_path_factory, rows):
    body = "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    path = tmp_path_factory.mktemp("t") / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + body, encoding="utf-8")
    check_answer(*measured(trace.load, path))


@BOUNDED
@given(
    st.lists(
        st.one_of(
            trees,
            st.fixed_dictionaries(
                {
                    "timestamp": scalars,
                    "input_length": scalars,
                    "output_length": scalars,
                    "hash_ids": trees,
                }
            ),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_mooncake_reader_on_random_records(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    text = "".join(json.dumps(r, default=str) + "\n" for r in records)
    path.write_text(text, encoding="utf-8")
    check_answer(*measured(trace.load, path))


@BOUNDED
@given(st.binary(max_size=2000), st.sampled_from(["t.csv", "t.jsonl", "t.txt"]))
def test_trace_readers_on_random_bytes(tmp_path_factory, raw, name):
    path = tmp_path_factory.mktemp("t") / name
    path.write_bytes(raw)
    check_answer(*measured(trace.load, path))


@BOUNDED
@given(st.one_of(trees, st.binary(max_size=1000)))
def test_hf_config_reader_on_random_documents(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("m") / "config.json"
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        path.write_text(json.dumps(doc, default=str), encoding="utf-8")
    check_answer(*measured(model_from_hf_config, path))


# --- the MCP tools --------------------------------------------------------------------------------

SERVER = mcp_server.build_server()
tool_calls = st.one_of(
    st.tuples(
        st.just("decide_disaggregation"),
        st.one_of(
            mutated_workloads().map(lambda w: {"workload": w}),
            trees.map(lambda t: {"workload": t}),
        ),
    ),
    st.tuples(
        st.just("estimate_kv_transfer"),
        st.fixed_dictionaries(
            {
                "model": st.one_of(st.just("llama-3.3-70b"), scalars),
                "prompt_tokens": scalars,
                "link": st.one_of(st.just("ib-ndr-400"), scalars),
            }
        ),
    ),
    st.tuples(st.just("explain_rule"), st.fixed_dictionaries({"rule_id": scalars})),
    st.tuples(
        st.just("find_crossover"),
        st.fixed_dictionaries({"workload": mutated_workloads(), "steps": st.integers(-5, 80)}),
    ),
    st.tuples(
        st.sampled_from(["list_catalog", "explain_rule", "nope"]),
        trees.filter(lambda t: isinstance(t, dict)),
    ),
)


def _finite_json(value) -> bool:
    """What a JSON client can actually send: no NaN or infinity."""
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return False
    return True


@BOUNDED
@given(tool_calls)
def test_mcp_tools_on_random_arguments(call):
    name, args = call
    if not _finite_json(args):
        args = json.loads(
            json.dumps(args, default=str).replace("NaN", "0").replace("Infinity", "1e308")
        )

    async def run():
        return await SERVER.call_tool(name, args)

    tracemalloc.start()
    start = time.process_time()
    try:
        result = anyio.run(run)
    finally:
        seconds = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert seconds < MAX_CPU_SECONDS and peak < MAX_PEAK_BYTES, (seconds, peak)
    if result.is_error:
        text = result.content[0].text
        assert len(text) < MAX_MESSAGE_CHARS and "internal error" not in text, text
        assert names_field_or_line(text) or "Unknown tool" in text, text
    else:
        assert json.dumps(result.structured_content, allow_nan=False)


def test_property_helpers_reject_a_message_that_names_nothing():
    assert not names_field_or_line("something went wrong")
    assert names_field_or_line("w.yaml:3: duplicate key")
    assert names_field_or_line("  traffic.requests_per_second: Input should be finite")
    assert math.isfinite(MAX_CPU_SECONDS)
