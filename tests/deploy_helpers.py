"""Shared helpers for the deploy tests: the examples' verdicts, the CLI, published schemas."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from disagg_decider.decide import decide
from disagg_decider.verdict import Verdict
from disagg_decider.workload import Workload, load_workload, load_workload_text
from tests.conftest import EXAMPLES, ROOT, run_cli

__all__ = ["EXAMPLES", "ROOT", "run_cli"]

# The published schemas live beside the project (../shared); a checkout elsewhere (a git
# worktree) can point DISAGG_DECIDER_SHARED at that folder instead.
SHARED = ROOT.parent / "shared"
if not SHARED.exists() and os.environ.get("DISAGG_DECIDER_SHARED"):
    SHARED = Path(os.environ["DISAGG_DECIDER_SHARED"])
SCHEMAS = SHARED / "schemas"


@functools.cache
def example(name: str) -> tuple[Workload, Verdict]:
    path = ROOT / "examples" / name
    w = load_workload(path)
    return w, decide(w, base_dir=path.parent)


def skip_not_emitted(name: str, target: str) -> None:
    """Skip an example `target` does not emit, as test_deploy_multinode checks: replicas wider
    than a node on llm-d with SGLang (its LeaderWorkerSet path runs vLLM)."""
    w, v = example(name)
    s = v.sizing
    roles = ("prefill", "decode") if v.disaggregate else ("colocated",)
    widest = max(getattr(s, f"{r}_tp") * getattr(s, f"{r}_dp") for r in roles)
    if widest > w.cluster.gpus_per_node and target == "llm-d" and w.engine == "sglang":
        pytest.skip(f"{name}: multi-node SGLang replicas ({widest} GPUs) are not emitted for llm-d")


def pinned(name: str, **parallelism: int) -> tuple[Workload, Verdict]:
    """An example with `parallelism:` pinned, decided afresh."""
    path = ROOT / "examples" / name
    w = load_workload(path)
    data = w.model_dump(mode="json", exclude_defaults=True)
    data["parallelism"] = parallelism
    w2 = load_workload_text(json.dumps(data), source=name)
    return w2, decide(w2, base_dir=path.parent)


def deployed(w: Workload, v: Verdict, target: str | None = None) -> SimpleNamespace:
    """The pools `decide deploy` (layout auto) emits for a disaggregating verdict: the
    conditional layout's when that is the verdict's layout (issue 14), else the sizing's; for
    `target` dynamo, the sizing's where Dynamo's router cannot run the conditional layout
    (`Verdict.dynamo_layout`, issue 14b)."""
    k = v.conditional
    on_dynamo_split = target == "dynamo" and v.dynamo_layout == "disaggregated"
    if k is not None and k.layout == "conditional" and not on_dynamo_split:
        return SimpleNamespace(
            prefill_tp=k.prefill_tp,
            prefill_replicas=k.prefill_replicas,
            decode_tp=k.decode_tp,
            decode_replicas=k.decode_replicas,
            decode_max_batch=min(w.efficiency.max_decode_batch, k.chunk_tokens),
            threshold=k.threshold_tokens,
        )
    s = v.sizing
    return SimpleNamespace(
        prefill_tp=s.prefill_tp,
        prefill_replicas=s.prefill_replicas,
        decode_tp=s.decode_tp,
        decode_replicas=s.decode_replicas,
        decode_max_batch=s.decode_max_batch,
        threshold=0,
    )


def schema(rel: str) -> dict[str, Any]:
    path = SCHEMAS / rel
    if not path.exists():
        pytest.skip(
            f"published schema {path} is absent: the deploy schema tests need the shared "
            "folder (../shared/schemas relative to the project root, or DISAGG_DECIDER_SHARED)"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def validation_errors(doc: Any, schema_doc: dict[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft7Validator(schema_doc)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


def helm_merge(base: Any, over: Any) -> Any:
    """Helm's values merge: maps merge recursively, lists and scalars replace, null deletes."""
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = helm_merge(base.get(key), value)
    return out
