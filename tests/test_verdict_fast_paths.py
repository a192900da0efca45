"""The decision layer's shortcuts must give what the plain paths give.

`decide_many_json` hands `decide batch` each verdict's JSON from the labelling's own dump;
`decide_many(provenance=False)` skips the labels for rows that show none; the workload
validator keeps what each field's annotation takes per class. Each is checked against the
path it replaces, on the examples and on variations that reach calibration and overrides.
"""

from __future__ import annotations

import enum
import json
import re
import textwrap

import pytest

from disagg_decider import provenance
from disagg_decider.batch_work import verdict_row
from disagg_decider.decide import decide_many, decide_many_json
from disagg_decider.workload import load_workload, parse_workload
from disagg_decider.workload_fields import _TAKES
from tests.conftest import EXAMPLES

WORKLOADS = [load_workload(p) for p in EXAMPLES]
DIRS = [p.parent for p in EXAMPLES]


@pytest.mark.parametrize("overrides", [{}, {"min_gain": 1.05}])
def test_decide_many_json_is_the_verdicts_own_json(overrides):
    pairs = decide_many_json(WORKLOADS, base_dir=DIRS, overrides=overrides)
    plain = decide_many(WORKLOADS, base_dir=DIRS, overrides=overrides)
    for (verdict, doc), alone in zip(pairs, plain, strict=True):
        expected = alone.model_dump(mode="json")
        # The same keys in the same order: the rows are written from it byte for byte.
        assert json.dumps(doc) == json.dumps(expected)
        assert json.dumps(verdict.model_dump(mode="json")) == json.dumps(expected)


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_row_from_the_labelling_dump_equals_one_from_the_verdict(fmt):
    for verdict, doc in decide_many_json(WORKLOADS, base_dir=DIRS):
        assert verdict_row("w.yaml", verdict, fmt, doc) == verdict_row("w.yaml", verdict, fmt)


def test_unlabelled_verdicts_differ_only_in_provenance():
    bare = decide_many(WORKLOADS, base_dir=DIRS, provenance=False)
    full = decide_many(WORKLOADS, base_dir=DIRS)
    for b, f in zip(bare, full, strict=True):
        assert b.provenance is None and f.provenance is not None
        assert b.model_dump(exclude={"provenance"}) == f.model_dump(exclude={"provenance"})


def _edited(**changes) -> dict:
    data = json.loads(WORKLOADS[0].model_dump_json(exclude_none=True))
    for dotted, value in changes.items():
        *path, last = dotted.split(".")
        node = data
        for key in path:
            node = node[key]
        node[last] = value
    return data


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cluster.gpus", True, "got a boolean"),
        ("cluster.gpus", "8", "an integer (e.g. 8) written as one"),
        ("traffic.requests_per_second", "2.5", "a number (e.g. 8, 0.5 or 1e8) written as one"),
        ("traffic.requests_per_second", False, "got a boolean"),
    ],
)
def test_number_checks_hold_on_every_parse_once_the_annotations_are_kept(field, value, message):
    parse_workload(_edited(), "warm")  # fills the per-class cache
    assert _TAKES
    for _ in range(2):  # the second parse reads the cache only
        with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_workload(_edited(**{field: value}), "w")


def test_a_boolean_field_still_takes_a_boolean():
    for _ in range(2):
        w = parse_workload(_edited(**{"cluster.kubernetes": False}), "w")
        assert w.cluster.kubernetes is False


def _slow_labels(doc: dict, inputs: provenance.Inputs) -> dict[str, str]:
    found: dict[str, None] = {}
    provenance._numeric_into(doc, "", found)
    return provenance._labels_of(found, inputs, doc)


@pytest.mark.parametrize(
    "inputs_of",
    [
        lambda w: provenance.Inputs(workload=w),
        lambda w: provenance.Inputs(workload=w, overridden=frozenset({"min_gain"})),
        lambda w: provenance.Inputs(workload=w, silicon=True),
    ],
)
def test_labels_kept_per_shape_are_the_labels_of_each_verdict(inputs_of, monkeypatch):
    verdicts = decide_many(WORKLOADS, base_dir=DIRS, provenance=False)
    monkeypatch.setattr(provenance, "_SHAPE_LABELS", {})
    for _ in range(2):  # the second round reads only kept labels
        for v, w in zip(verdicts, WORKLOADS, strict=True):
            doc = v.model_dump(mode="json", exclude={"provenance"})
            inputs = inputs_of(w)
            assert provenance.field_labels(doc, inputs) == _slow_labels(doc, inputs)
    assert 0 < len(provenance._SHAPE_LABELS) <= len(WORKLOADS)


def test_a_kept_shape_is_not_read_for_other_inputs():
    w, v = WORKLOADS[0], decide_many(WORKLOADS[:1])[0]
    doc = v.model_dump(mode="json", exclude={"provenance"})
    plain = provenance.field_labels(doc, provenance.Inputs(workload=w))
    moved = provenance.field_labels(
        doc, provenance.Inputs(workload=w, overridden=frozenset({"min_gain"}), silicon=True)
    )
    assert plain["metrics.prefill_ms"] == "derived" and moved["metrics.prefill_ms"] == "silicon"
    assert plain["thresholds.min_gain"] == "rulebook" and moved["thresholds.min_gain"] == "override"


def test_a_chunk_is_decided_with_the_collector_paused_and_it_comes_back(monkeypatch):
    import gc

    from disagg_decider import batch_work
    from disagg_decider.batch_inputs import Entry

    seen = []
    real = batch_work._decided_chunk

    def spy(entries, options):
        seen.append(gc.isenabled())
        return real(entries, options)

    monkeypatch.setattr(batch_work, "_decided_chunk", spy)
    entry = Entry(label=str(EXAMPLES[0]), path=str(EXAMPLES[0]), base_dir=str(DIRS[0]))
    assert gc.isenabled()
    done = batch_work.decide_chunk(([entry], batch_work.Options(fmt="csv")))
    assert seen == [False] and gc.isenabled()
    assert len(done.rows) == 1 and not done.errors


def test_tokens_per_request_is_the_calculators_lengths_bit_for_bit():
    import numpy as np

    from disagg_decider.calc.replicas.lengths import Lengths
    from disagg_decider.plan import tokens_per_request
    from tests.golden_outputs import workload_mix  # puts benchmarks/ on the path

    for w in [*WORKLOADS, *workload_mix(64, seed=5)]:
        lengths = Lengths.of(w)
        slow = float(np.ravel(lengths.prompt_mean + lengths.output_mean)[0])
        assert tokens_per_request(w.traffic) == slow  # exact, not approximately


class _Level(enum.IntEnum):
    HIGH = 3


ODD_DOCS = [
    {"a": "line\nbreak\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029 end", "b": [], "c": {}},
    {"nested": [[], {}, [[1, 2.5, None]], {"x": {"y": [True, False, "z"]}}], "t": (1, "two")},
    {"floats": [0.1, 1e-7, 1e22, -0.0, 5e-324, 1.7976931348623157e308], "big": 10**30},
    {"unicode": "é 中 😀", "quote": 'a "b" \\ c', "ctrl": "\x00\x1f"},
    {"enum": _Level.HIGH, "keys": {1: "int key", 2.5: "float key", None: "none key"}},
    {"deep": {"a": [{"b": [{"c": []}]}]}},
    [1, 2],
    "scalar",
]


@pytest.mark.parametrize("doc", [*ODD_DOCS, *[d for _, d in decide_many_json(WORKLOADS[:4])]])
def test_json_rows_are_json_dumps_indent_2_indented_as_textwrap_would(doc):
    from disagg_decider.batch_json import indented_row

    expected = textwrap.indent(json.dumps(doc, indent=2, allow_nan=False), "  ")
    assert indented_row(doc) == expected


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), object()])
def test_json_rows_refuse_what_json_refuses(bad):
    from disagg_decider.batch_json import indented_row

    doc = {"ok": [1, {"value": bad}]}
    with pytest.raises((ValueError, TypeError)) as standard:
        json.dumps(doc, indent=2, allow_nan=False)
    with pytest.raises(standard.type, match=re.escape(str(standard.value))):
        indented_row(doc)


def _shared_docs() -> list:
    """Rows whose labels are `provenance.Shared` (as `decide_many_json` gives them), each
    written twice so that the second reads the kept text, and odd places for a Shared dict."""
    from disagg_decider.provenance import Shared

    rows = [{"file": "w.yaml", **doc} for _, doc in decide_many_json(WORKLOADS[:4])]
    labels = Shared({"a.b": "derived", "c": "workload"})
    odd = [
        {"x": 1, "provenance": {"fields": labels, "inputs": {"n": 1.5, "k": [1, None]}}},
        {"top": labels, "deep": {"in": {"more": labels}}, "last": {"l": labels}},
        {"list": [labels, {"again": labels}], "last": {"l": labels}},
        {"only": {"fields": labels}},
        {"x": 1, "last": {"fields": labels, 3: "int key"}},
        {"x": 1, "last": {"fields": Shared()}},
        {"x": 1, "last": {"fields": Shared({"n": float("1e-7"), "u": "é 中"})}},
    ]
    return [*rows, *rows, *odd, *odd]


def test_rows_with_shared_labels_are_json_dumps_byte_for_byte():
    from disagg_decider.batch_json import indented_row, line_row

    for doc in _shared_docs():
        assert line_row(doc) == json.dumps(doc, allow_nan=False)
        expected = textwrap.indent(json.dumps(doc, indent=2, allow_nan=False), "  ")
        assert indented_row(doc) == expected


def test_a_row_with_shared_labels_refuses_what_json_refuses():
    from disagg_decider.batch_json import line_row
    from disagg_decider.provenance import Shared

    doc = {"x": 1, "last": {"fields": Shared({"n": float("nan")})}}
    with pytest.raises(ValueError, match="Out of range float values"):
        line_row(doc)


@pytest.mark.parametrize(
    "inputs_of",
    [
        lambda w: provenance.Inputs(workload=w),
        lambda w: provenance.Inputs(workload=w, calibrated=frozenset({"decode_mbu"})),
        lambda w: provenance.Inputs(workload=w, silicon=True),
    ],
)
def test_kept_input_labels_are_each_workloads_own(inputs_of):
    variants = [*WORKLOADS, parse_workload(_edited(**{"efficiency": {"decode_mbu": 0.6}}), "e")]
    for _ in range(2):  # the second round reads kept labels
        for w in variants:
            inputs = inputs_of(w)
            assert provenance._shared_inputs(inputs) == provenance.input_labels(inputs)
    assert (
        provenance.input_labels(provenance.Inputs(workload=variants[-1]))["efficiency.decode_mbu"]
        == "workload"
    )


def test_a_verdicts_labels_are_its_own_copy_of_the_shared_ones():
    (verdict, doc), (other, _) = decide_many_json([WORKLOADS[0], WORKLOADS[0]])
    assert type(doc["provenance"]["fields"]) is provenance.Shared
    assert verdict.provenance.fields == doc["provenance"]["fields"]
    verdict.provenance.fields["metrics.gain"] = "changed"  # a caller may edit its verdict
    assert other.provenance.fields["metrics.gain"] == "derived"
    assert doc["provenance"]["fields"]["metrics.gain"] == "derived"


def test_a_verdicts_unvalidated_labels_are_what_validation_would_make():
    from disagg_decider.verdict import Provenance

    for verdict, _ in decide_many_json(WORKLOADS):
        p = verdict.provenance
        assert Provenance.model_validate(p.model_dump()) == p
        assert all(type(k) is str and type(v) is str for k, v in {**p.fields, **p.inputs}.items())


def test_numbers_and_sections_pass_the_number_check_on_every_field_as_the_full_check_would():
    """The check returns a float, an int or a dict at once: the full check passes them
    whatever the field takes (a boolean is a type of its own), which this confirms."""
    from disagg_decider.workload_fields import StrictModel, _takes, number_problem

    def classes(c):
        for s in c.__subclasses__():
            yield s
            yield from classes(s)

    checked = 0
    for cls in set(classes(StrictModel)):
        for name, field in cls.model_fields.items():
            takes = _takes(field)
            for value in (3, 2.5, {"a": 1}):
                assert number_problem(takes, value) is None, (cls.__name__, name, value)
                checked += 1
            if takes.number and not takes.boolean:
                assert number_problem(takes, True) is not None  # the check can refuse
    assert checked > 100


def test_metric_values_from_kept_getters_are_each_metrics_own():
    from disagg_decider.calc.compare import analyze
    from disagg_decider.metrics import BY_NAME, METRICS, metric_values
    from disagg_decider.rules import engine
    from disagg_decider.rules.loader import shipped
    from disagg_decider.workload import resolve

    read = engine.metrics_read(shipped().book)
    for w, d in list(zip(WORKLOADS, DIRS, strict=True))[:3]:
        r = resolve(w, d)
        a = analyze(r)
        for _ in range(2):  # the second call reads the kept getters
            assert metric_values(r, a) == {m.name: m.get(r, a) for m in METRICS}
            assert metric_values(r, a, read) == {n: BY_NAME[n].get(r, a) for n in read}
            assert list(metric_values(r, a, read[::-1])) == list(read[::-1])
