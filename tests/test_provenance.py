"""Every number in a verdict's JSON carries a provenance label (issue 26).

The property: over generated workloads (the verdict-invariant generators, with efficiency
constants and rule overrides drawn on top), each int/float leaf of the verdict's JSON (booleans
excluded), by its generalised path, has a label from `provenance.SOURCES`. A numeric field
added to the verdict without a line in `provenance.FIELDS`' tables fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_decider.decide import decide, decide_many
from disagg_decider.provenance import SOURCES, Inputs, field_labels, numeric_paths
from disagg_decider.verdict import Verdict
from disagg_decider.workload import Workload, load_workload
from tests.conftest import MINIMAL_WORKLOAD, RAG_EXAMPLE
from tests.test_verdict_invariants import served_workloads, workloads

EFFICIENCY = {
    "prefill_mfu": st.floats(0.2, 0.8),
    "decode_mbu": st.floats(0.3, 0.9),
    "step_overhead_ms": st.floats(0.5, 5.0),
    "max_decode_batch": st.integers(16, 1024),
}
OVERRIDES = {"min_gain": st.floats(1.0, 1.6), "min_gpus_saved": st.integers(0, 4)}


@st.composite
def labelled_workloads(draw) -> tuple[Workload, dict]:
    """A generated workload, some efficiency constants and overrides set, and `--set` values."""
    w = draw(st.one_of(workloads(), served_workloads()))
    data = w.model_dump(mode="json", exclude_unset=True)
    names = draw(st.lists(st.sampled_from(sorted(EFFICIENCY)), unique=True, max_size=3))
    if names:
        data["efficiency"] = {n: draw(EFFICIENCY[n]) for n in names}
    in_file = draw(st.lists(st.sampled_from(sorted(OVERRIDES)), unique=True, max_size=1))
    if in_file:
        data["overrides"] = {n: draw(OVERRIDES[n]) for n in in_file}
    cli = draw(st.lists(st.sampled_from(sorted(OVERRIDES)), unique=True, max_size=1))
    return Workload.model_validate(data), {n: draw(OVERRIDES[n]) for n in cli}


def unlabelled(v: Verdict) -> list[str]:
    """Numeric leaves of the verdict's JSON with no label, or with one outside SOURCES."""
    assert v.provenance is not None
    doc = v.model_dump(mode="json")
    return sorted(
        f"{p}: {v.provenance.fields.get(p)}"
        for p in set(numeric_paths(doc))
        if v.provenance.fields.get(p) not in SOURCES
    )


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=labelled_workloads())
def test_every_number_in_a_generated_verdict_has_a_provenance_label(case) -> None:
    w, cli = case
    v = decide(w, overrides=cli)
    assert unlabelled(v) == []
    p = v.provenance
    assert set(p.inputs.values()) <= set(SOURCES)
    for name in w.efficiency.model_fields_set if "efficiency" in w.model_fields_set else ():
        assert p.inputs[f"efficiency.{name}"] == "workload"
    for name in {*w.overrides, *cli}:
        assert p.fields[f"thresholds.{name}"] == "override", name
    assert p.fields["sizing.cluster_gpus"] == "workload"
    assert p.fields["sizing.prefill_tp"] == p.fields["colocated.goodput_per_gpu"] == "derived"


def test_a_numeric_field_the_table_does_not_know_is_left_unlabelled():
    """What makes the property able to fail: a new number gets no label by a guess."""
    v = decide(Workload.model_validate(MINIMAL_WORKLOAD))
    doc = v.model_dump(mode="json", exclude={"provenance"})
    doc["metrics"]["new_figure_ms"] = 1.5
    doc["colocated"]["new_count"] = 3
    labels = field_labels(doc, Inputs(workload=Workload.model_validate(MINIMAL_WORKLOAD)))
    assert "metrics.new_figure_ms" not in labels and "colocated.new_count" not in labels
    assert labels["metrics.kv_transfer_ms"] == "derived"


def test_defaults_catalog_and_workload_inputs_are_told_apart():
    v = decide(Workload.model_validate(MINIMAL_WORKLOAD))
    inputs = v.provenance.inputs
    assert inputs["model"] == inputs["gpu"] == "catalog"
    assert inputs["cluster.network"] == "default"  # the workload names no network
    # the step physics' constants come from the table fitted to measured silicon, the engine's
    # limits from the schema's defaults
    assert inputs["efficiency.prefill_mfu"] == inputs["efficiency.decode_mbu"] == "fitted"
    assert inputs["efficiency.max_decode_batch"] == "default"
    assert inputs["cost.usd_per_gpu_hour"] == "default"
    assert v.provenance.fields["assumptions[].value"] == "default"
    assert v.provenance.fields["thresholds.min_gain"] == "rulebook"
    rag = decide(load_workload(RAG_EXAMPLE))
    assert rag.provenance.inputs["cluster.network"] == "catalog"
    assert rag.provenance.inputs["cost.usd_per_gpu_hour"] == "workload"
    assert rag.provenance.fields["confidence.error_band_low"] == "benchmark"


def test_constants_from_a_calibration_file_are_labelled_calibrated(tmp_path: Path):
    """A calibration entry for the workload's model/GPU/engine sets prefill MFU and decode MBU;
    a constant the workload states itself stays `workload`."""
    from disagg_decider.calibrate.file import KIND

    entry = {
        "model": "llama-3.1-8b",
        "gpu": "h100",
        "engine": "vllm",
        "tp": 1,
        "weights_dtype": "bf16",
        "chunk_tokens": 8192,
        "max_batch": 256,
        "efficiency": {"prefill_mfu": 0.6, "decode_mbu": 0.65, "step_overhead_ms": 2.0},
        "fitted": ["prefill_mfu", "decode_mbu", "step_overhead_ms"],
        "residuals": {"all_median_abs_error": 0.01, "all_worst_abs_error": 0.02},
        "data": [],
        "points": [],
    }
    cal = tmp_path / "cal.yaml"
    cal.write_text(yaml.safe_dump({"kind": KIND, "version": 1, "entries": [entry]}))
    data = {**MINIMAL_WORKLOAD, "weights_dtype": "bf16", "efficiency": {"step_overhead_ms": 1.0}}
    (v,) = decide_many([Workload.model_validate(data)], calibration=cal)
    assert v.calibration, v.warnings
    inputs = v.provenance.inputs
    assert inputs["efficiency.prefill_mfu"] == inputs["efficiency.decode_mbu"] == "calibrated"
    assert inputs["efficiency.step_overhead_ms"] == "workload"
    assert unlabelled(v) == []


@pytest.mark.parametrize("example", sorted((RAG_EXAMPLE.parent).glob("*.yaml")), ids=str)
def test_every_example_verdict_is_fully_labelled(example: Path):
    assert unlabelled(decide(load_workload(example), base_dir=example.parent)) == []


def test_step_times_from_measured_kernels_are_labelled_silicon():
    pytest.importorskip("aiconfigurator_core")
    w = load_workload(RAG_EXAMPLE).model_copy(update={"step_source": "silicon"})
    v = decide(w, base_dir=RAG_EXAMPLE.parent)
    assert v.step_source == "silicon"
    assert v.provenance.fields["metrics.prefill_ms"] == "silicon"
    assert v.provenance.fields["metrics.decode_step_ms"] == "silicon"
    assert v.provenance.inputs["step_times"] == "silicon"
    assert unlabelled(v) == []
    plain = decide(load_workload(RAG_EXAMPLE), base_dir=RAG_EXAMPLE.parent)
    assert plain.provenance.fields["metrics.prefill_ms"] == "derived"


def _reference_paths(node, path: str = "") -> set[str]:
    """The plain recursive walk `numeric_paths` must equal (isinstance on every node)."""
    if isinstance(node, dict):
        prefix = f"{path}." if path else ""
        return set().union(*(_reference_paths(v, f"{prefix}{k}") for k, v in node.items()))
    if isinstance(node, list):
        return set().union(*(_reference_paths(v, f"{path}[]") for v in node))
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return {path}
    return set()


def test_numeric_paths_equal_a_plain_walk_on_real_and_odd_documents():
    """The walk tests exact types for speed; it must still find every number a plain
    isinstance walk finds (int/float subclasses too) and skip booleans, strings and nulls."""
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    rag = decide(load_workload(RAG_EXAMPLE)).model_dump(mode="json")
    odd = {
        "a": [1, 2.5, True, None, "x", [[{"b": Level.HIGH}]]],
        "c": {"d": False, "e": {"f": 0}},
        "g": [],
    }
    for doc in (rag, odd, 7, [1.5], True):
        assert numeric_paths(doc) == _reference_paths(doc)
    assert numeric_paths(odd) == {"a[]", "a[][][].b", "c.e.f"}


@pytest.mark.parametrize(
    "name", ["rag-8k-h200-rdma-dynamo", "mixed-chat-rag-llm-d", "chat-short-colocate"]
)
def test_labelling_a_verdict_stays_a_few_hundred_calls(name: str) -> None:
    """Labelling walks the verdict's containers, not each leaf through isinstance and a
    generator (3,400-4,000 Python-level calls per verdict before issue 27, ~300-350 after):
    a ceiling 1.3x above what it takes, counted by cProfile (deterministic, no timing)."""
    import cProfile
    import pstats

    from disagg_decider.provenance import labelled

    w = load_workload(RAG_EXAMPLE.parent / f"{name}.yaml")
    v = decide(w)
    labelled(v, w, calibrated=False, overrides={})  # warm: imports and per-path labels
    profile = cProfile.Profile()
    profile.enable()
    labelled(v, w, calibrated=False, overrides={})
    profile.disable()
    assert pstats.Stats(profile).total_calls <= 450
