"""Every default a verdict fills in is named in its `assumptions` (issue 26).

A workload with no network, Kubernetes or ops block was priced on 400G InfiniBand RDMA,
Kubernetes and medium maturity with `warnings` empty: the defaults showed only in the
markdown's inputs table.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from disagg_decider import catalog
from disagg_decider.assumptions import DEFAULTS, assumed
from disagg_decider.decide import decide
from disagg_decider.workload import Workload
from tests.conftest import MINIMAL_WORKLOAD, RAG_EXAMPLE, ROOT, edited_example, run_cli

MINIMAL = MINIMAL_WORKLOAD


def _fields(data: dict) -> set[str]:
    v = decide(Workload.model_validate(data))
    return {a.field for a in v.assumptions}


def test_a_minimal_workload_names_network_kubernetes_maturity_and_dtypes():
    v = decide(Workload.model_validate(MINIMAL))
    by_field = {a.field: a for a in v.assumptions}
    for field in ("cluster.network", "cluster.kubernetes", "ops.maturity", "weights_dtype"):
        assert field in by_field, sorted(by_field)
    assert by_field["cluster.network"].value == "ib-ndr-400"
    assert by_field["cluster.kubernetes"].value is True
    assert by_field["ops.maturity"].value == "medium"
    assert "RDMA" in by_field["cluster.network"].affects


def test_a_field_the_workload_gives_is_not_assumed():
    data = {**MINIMAL, "cluster": {**MINIMAL["cluster"], "network": "tcp-25"}}
    data["ops"] = {"maturity": "high"}
    fields = _fields(data)
    assert "cluster.network" not in fields and "ops.maturity" not in fields
    assert "cluster.kubernetes" in fields  # the cluster block is given, this key is not


def test_the_text_and_the_report_state_the_assumptions(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(MINIMAL))
    text = " ".join(run_cli("--workload", str(path)).stdout.split())
    assert "Assumed (not in the workload" in text and "cluster.network = ib-ndr-400" in text
    report = run_cli("--workload", str(path), "--format", "markdown").stdout
    assert "**Assumed** (not in the workload): `ops.maturity` = medium" in report


def test_mixed_traffic_does_not_list_a_prefix_hit_rate_it_derives():
    data = edited_example(ROOT / "examples" / "mixed-chat-rag-llm-d.yaml")
    assert "traffic.prefix_cache_hit_rate" not in _fields(data)


def _set(data: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        data = data.setdefault(p, {})
    data[leaf] = value


def _drop(data: dict, path: str) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        data = data.get(p, {})
    data.pop(leaf, None)


@given(dropped=st.sets(st.sampled_from([d.path for d in DEFAULTS])))
def test_every_default_left_out_is_listed_and_nothing_else(dropped):
    """All the defaults given, then some left out: exactly those are listed, with the values
    the verdict used."""
    data = edited_example(RAG_EXAMPLE)
    full = Workload.model_validate(data)
    for d in DEFAULTS:  # give every one explicitly, at the value it has
        value = full.model_dump(mode="json")
        for part in d.path.split("."):
            value = value[part]
        _set(data, d.path, value if d.path != "kv_cache_dtype" else full.kv_dtype)
    for path in dropped:
        _drop(data, path)
    found = {a.field: a.value for a in assumed(Workload.model_validate(data))}
    assert set(found) == set(dropped)
    defaults = Workload.model_validate(MINIMAL)
    if "weights_dtype" in dropped:  # the model's own published format
        assert found["weights_dtype"] == catalog.get_model(data["model"]).weights_dtype
    for path in dropped - {"kv_cache_dtype", "traffic.prefix_cache_hit_rate", "weights_dtype"}:
        value = defaults.model_dump(mode="json")
        for part in path.split("."):
            value = value[part]
        assert found[path] == value, path
