"""The measured step source (`step_source: silicon`, calc/physics/silicon.py) against
aiconfigurator-core.

Its tables must reproduce aiconfigurator-core's own prefill, decode and mixed step estimates on
points between the grid's nodes; a workload the database lacks falls back to the default physics
with a warning; the verdict names the source it used; and the simulator's steps come from the
same source. CI installs the `silicon` extra (`.ci/run`), so these run there rather than skip.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.physics import silicon, silicon_steps
from disagg_decider.calc.physics.step import iteration_ms
from disagg_decider.calc.replicas.decode import decode_step_ms
from disagg_decider.calc.replicas.prefill import prefill_ms
from disagg_decider.decide import decide
from disagg_decider.workload import load_workload, resolve

pytest.importorskip("aiconfigurator_core")

ROOT = Path(__file__).resolve().parents[1]
RAG = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"  # llama-3.3-70b fp8, H200, vLLM


def _resolved(path: Path = RAG, **update):
    w = load_workload(path)
    return resolve(w.model_copy(update={"step_source": "silicon", **update}), path.parent)


def _dense_bf16():
    return _resolved(weights_dtype="bf16", kv_cache_dtype="bf16")


def _moe_bf16():
    return _resolved(model="qwen3-235b-a22b", weights_dtype="bf16", kv_cache_dtype="bf16")


# Points off the tables' nodes (prefill tokens; decode batch per rank, context; mixed chunk,
# decode batch per rank, prompt).
PREFILL = (300, 3000, 11000)
DECODE = ((3, 700), (48, 5000), (200, 20000))
MIXED = ((512, 16, 4096), (1536, 40, 6000))


@pytest.mark.parametrize(
    ("make", "layout"),
    [
        (_dense_bf16, (2, 1, 1)),
        (_dense_bf16, (8, 1, 1)),
        (_moe_bf16, (4, 1, 1)),
        (_moe_bf16, (1, 8, 8)),
    ],
    ids=["llama70b-TP2", "llama70b-TP8", "qwen235b-TP4", "qwen235b-DP8EP8"],
)
def test_the_silicon_source_matches_aiconfigurator_core_on_sampled_points(make, layout):
    r = make()
    tp, dp, ep = layout
    engine = engine_for(r, tp, dp, ep)
    assert engine.steps is not None
    h = silicon.handle(silicon.key_of(r), tp, dp, ep, r.model.moe is not None)
    errors = []
    for n in PREFILL:
        # one prompt on each attention rank: the pass's attention work kept whole
        ours = float(iteration_ms(engine, 0.0, 0.0, dp * n, -(dp - 1) * n / 2.0))
        errors.append(ours / silicon.prefill_ms(h, n) - 1)
    for b, c in DECODE:
        ours = float(np.ravel(decode_step_ms(engine, float(b * dp), float(c)))[0])
        errors.append(ours / silicon.decode_ms(h, b, c) - 1)
    for k, b, p in MIXED:
        start = (p - k) / 2.0 - (dp - 1) * k / 2.0
        ours = float(iteration_ms(engine, float(b * dp), float(p), dp * k, start))
        errors.append(ours / silicon.mixed_ms(h, k, b, p) - 1)
    errors = np.abs(errors)
    assert np.median(errors) <= 0.03, errors
    assert errors.max() <= 0.08, errors


def test_a_one_prompt_prefill_is_the_databases_prefill_without_our_overhead():
    r = _dense_bf16()
    engine = engine_for(r, 4)
    h = silicon.handle(silicon.key_of(r), 4, 1, 1, False)
    ours = float(np.ravel(prefill_ms(engine, 4000.0))[0])
    assert ours == pytest.approx(silicon.prefill_ms(h, 4000), rel=0.02)
    assert engine.prefill_overhead_ms == 0.0


def test_the_source_broadcasts_over_candidate_layouts_like_the_roofline():
    r = _dense_bf16()
    tps = np.array([1, 2, 4, 8]).reshape(-1, 1)
    contexts = np.array([1000.0, 8000.0]).reshape(1, -1)
    together = decode_step_ms(engine_for(r, tps), 16.0, contexts)
    assert together.shape == (4, 2)
    for i, tp in enumerate((1, 2, 4, 8)):
        alone = decode_step_ms(engine_for(r, tp), 16.0, contexts)
        np.testing.assert_allclose(together[i], np.ravel(alone), rtol=1e-12)


def test_a_workload_the_database_lacks_falls_back_to_the_default_with_a_warning():
    w = load_workload(RAG).model_copy(update={"cluster": load_workload(RAG).cluster})
    mi300x = w.cluster.model_copy(update={"gpu": "mi300x", "network": "ib-ndr-400"})
    silicon_w = w.model_copy(update={"cluster": mi300x, "step_source": "silicon"})
    default_w = silicon_w.model_copy(update={"step_source": "default"})
    v = decide(silicon_w, base_dir=RAG.parent)
    assert v.step_source == "default"
    assert any("step_source silicon unavailable" in x and "mi300x" in x for x in v.warnings)
    d = decide(default_w, base_dir=RAG.parent)
    assert v.decision == d.decision
    assert v.sizing == d.sizing
    assert v.colocated == d.colocated and v.disaggregated == d.disaggregated


def test_layouts_the_database_refuses_are_priced_by_the_roofline_and_named():
    # gpt-oss-120b's MXFP4 experts under TensorRT-LLM on B200: 0.12.0 has MoE data for TP1 and
    # DP/EP layouts, none for the experts sharded over TP4.
    w = load_workload(RAG)
    b200 = w.cluster.model_copy(update={"gpu": "b200"})
    r = _resolved(
        model="gpt-oss-120b",
        weights_dtype="fp4",
        kv_cache_dtype="fp8",
        engine="trtllm",
        cluster=b200,
    )
    default = resolve(r.workload.model_copy(update={"step_source": "default"}), RAG.parent)
    tps = np.array([1, 4])
    ours = np.ravel(decode_step_ms(engine_for(r, tps), 32.0, 4000.0))
    roofline = np.ravel(decode_step_ms(engine_for(default, tps), 32.0, 4000.0))
    h = silicon.handle(silicon.key_of(r), 1, 1, 1, True)
    assert ours[0] == pytest.approx(silicon.decode_ms(h, 32, 4000), rel=0.03)
    assert ours[0] != pytest.approx(roofline[0], rel=0.03)
    assert ours[1] == roofline[1]
    used, notes = silicon_steps.verdict_notes(r)
    assert used == "silicon"
    assert len(notes) == 1 and "TP4" in notes[0] and "MoE data missing" in notes[0]


def test_a_layout_whose_prompt_passes_the_database_lacks_keeps_its_measured_decode_steps():
    # DeepSeek-V3 under SGLang on H200: 0.12.0 has its decode kernels, not its MLA prefill.
    r = _resolved(model="deepseek-v3", weights_dtype="fp8", kv_cache_dtype="fp8", engine="sglang")
    default = resolve(r.workload.model_copy(update={"step_source": "default"}), RAG.parent)
    engine, roofline = engine_for(r, 8), engine_for(default, 8)
    h = silicon.handle(silicon.key_of(r), 8, 1, 1, True)
    decode = float(np.ravel(decode_step_ms(engine, 32.0, 4000.0))[0])
    assert decode == pytest.approx(silicon.decode_ms(h, 32, 4000), rel=0.03)
    assert decode != pytest.approx(float(np.ravel(decode_step_ms(roofline, 32.0, 4000.0))[0]))
    assert float(np.ravel(prefill_ms(engine, 4000.0))[0]) == float(
        np.ravel(prefill_ms(roofline, 4000.0))[0]
    )
    used, notes = silicon_steps.verdict_notes(r)
    assert used == "silicon"
    assert any("TP8 (passes with prompt tokens)" in n and "MLA" in n for n in notes)


def test_the_verdict_names_its_step_source():
    w = load_workload(RAG)
    v = decide(w.model_copy(update={"step_source": "silicon"}), base_dir=RAG.parent)
    assert v.step_source == "silicon"
    plain = decide(w, base_dir=RAG.parent)
    assert plain.step_source is None and "step_source" not in plain.model_dump(mode="json")
    asked = decide(w.model_copy(update={"step_source": "silicon"}), base_dir=RAG.parent)
    assert asked.model_dump(mode="json")["step_source"] == "silicon"


def test_the_simulator_takes_its_steps_from_the_same_source():
    from disagg_decider.sim import run
    from disagg_decider.sim.steps import DecodeTable

    r = _dense_bf16()
    engine = run.engine(r, 4)
    assert engine.steps is not None
    table = DecodeTable(engine, 64, 10_000.0)
    h = silicon.handle(silicon.key_of(r), 4, 1, 1, False)
    for b, c in ((8, 3000.0), (64, 9000.0)):
        direct = float(iteration_ms(engine, float(b), c, 0.0, 0.0))
        assert table.ms(b, c) == pytest.approx(direct, rel=0.01)
        assert table.ms(b, c) == pytest.approx(silicon.decode_ms(h, b, c), rel=0.03)


def test_the_physics_benchmark_prints_its_schema_and_the_silicon_source_within_3_percent(
    tmp_path, capsys
):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import physics_vs_silicon

    csv_path = tmp_path / "rows.csv"
    argv = ["--quick", "--step-source", "silicon", "--format", "json", "--csv", str(csv_path)]
    assert physics_vs_silicon.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"points", "refused", "step_source", "groups"}
    assert out["step_source"] == "silicon" and out["points"] > 0 and out["refused"] == 0
    keys = {"family", "phase", "gpu", "engine", "n", "median_signed_pct", "median_abs_pct"}
    for g in out["groups"]:
        assert set(g) == keys | {"p90_abs_pct"}
        assert g["median_abs_pct"] <= 3.0, g
    header = csv_path.read_text().splitlines()[0]
    assert header == "model,gpu,engine,layout,phase,batch,context,tokens,ours_ms,silicon_ms"
    assert physics_vs_silicon.main(argv) == 2  # the CSV exists: not overwritten without --force
