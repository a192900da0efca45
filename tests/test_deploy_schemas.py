"""Every example's output validates against the published CRD and chart schemas.

The schemas are the upstream DynamoGraphDeployment CRD (v1beta1 and v1alpha1), the
llm-d-modelservice chart's values.schema.json and KEDA's ScaledObject CRD, converted to JSON
Schema with strict unknown-field checking (see ../shared/schemas/README.md).
"""

from __future__ import annotations

import re

import pytest
import yaml

from disagg_decider.deploy.bundle import build
from disagg_decider.errors import UserError
from tests.deploy_helpers import (
    EXAMPLES,
    SCHEMAS,
    example,
    helm_merge,
    schema,
    skip_not_emitted,
    validation_errors,
)

EXAMPLE_NAMES = [p.name for p in EXAMPLES]
DGD_SCHEMA = {
    "v1beta1": "dynamo/dynamographdeployment.v1beta1.schema.json",
    "v1alpha1": "dynamo/dynamographdeployment.schema.json",
}


def test_every_example_is_covered() -> None:
    assert len(EXAMPLE_NAMES) >= 8


@pytest.mark.parametrize("api", ["v1beta1", "v1alpha1"])
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_dynamo_graph_validates_against_the_crd(name: str, api: str) -> None:
    skip_not_emitted(name, "dynamo")
    crd = schema(DGD_SCHEMA[api])
    w, v = example(name)
    files = build(w, v, "dynamo", dynamo_api=api).files
    doc = yaml.safe_load(files["dynamo-graph.yaml"])
    assert doc["apiVersion"] == f"nvidia.com/{api}"
    assert validation_errors(doc, crd) == []


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_dynamo_disaggregated_layout_validates_too(name: str) -> None:
    """Colocated verdicts also get a valid P/D graph when one is asked for (if it can run)."""
    crd = schema(DGD_SCHEMA["v1beta1"])
    w, v = example(name)
    try:
        files = build(w, v, "dynamo", layout="disaggregated").files
    except UserError as exc:  # refused layouts are covered by the constraint tests
        pytest.skip(f"disaggregated layout refused for {name}: {exc}")
    assert validation_errors(yaml.safe_load(files["dynamo-graph.yaml"]), crd) == []


def test_the_crd_schema_rejects_a_broken_graph() -> None:
    """Guard against a vacuous pass: the same schema must catch real mistakes."""
    crd = schema(DGD_SCHEMA["v1beta1"])
    w, v = example("rag-8k-h200-rdma-dynamo.yaml")
    doc = yaml.safe_load(build(w, v, "dynamo").files["dynamo-graph.yaml"])
    doc["spec"]["components"][0]["replicas"] = "2"
    doc["spec"]["components"][1]["type"] = "prefil"
    errors = validation_errors(doc, crd)
    assert any("replicas" in e for e in errors)
    assert any("prefil" in e for e in errors)
    # A v1beta1 graph is not a valid v1alpha1 one (spec.components does not exist there).
    assert validation_errors(doc, schema(DGD_SCHEMA["v1alpha1"]))


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_llmd_values_validate_raw_and_merged_over_chart_defaults(name: str) -> None:
    skip_not_emitted(name, "llm-d")
    values_schema = schema("llm-d/modelservice-values.schema.json")
    defaults = yaml.safe_load((SCHEMAS / "llm-d/modelservice-values.defaults.yaml").read_text())
    w, v = example(name)
    values = yaml.safe_load(build(w, v, "llm-d").files["modelservice-values.yaml"])
    assert validation_errors(values, values_schema) == []
    assert validation_errors(helm_merge(defaults, values), values_schema) == []


def test_the_values_schema_rejects_a_string_replica_count() -> None:
    values_schema = schema("llm-d/modelservice-values.schema.json")
    w, v = example("k8s-native-shop-llm-d.yaml")
    values = yaml.safe_load(build(w, v, "llm-d").files["modelservice-values.yaml"])
    values["decode"]["parallelism"]["tensor"] = "4"
    assert validation_errors(values, values_schema)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_llmd_autoscalers_validate_against_keda(name: str) -> None:
    skip_not_emitted(name, "llm-d")
    keda = schema("k8s/keda-scaledobject.schema.json")
    w, v = example(name)
    docs = list(yaml.safe_load_all(build(w, v, "llm-d").files["autoscaling.yaml"]))
    assert docs and all(d["kind"] == "ScaledObject" for d in docs)
    for doc in docs:
        assert validation_errors(doc, keda) == []


@pytest.mark.parametrize("target", ["dynamo", "llm-d", "vllm", "sglang"])
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_yaml_parses_and_is_deterministic(name: str, target: str) -> None:
    w, v = example(name)
    try:
        first = build(w, v, target).files
    except UserError as exc:
        pytest.skip(f"{target} refused for {name}: {exc}")
    second = build(w, v, target).files
    assert first == second
    for rel, text in first.items():
        if rel.endswith(".yaml"):
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
            assert docs, rel
        # No dates or times: two generations of the same verdict must diff clean.
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\d\d:\d\d:\d\d", text), rel
