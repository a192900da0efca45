"""`step_source: silicon` without the `silicon` extra: the default physics, and a warning saying
how to install it. Runs whether or not aiconfigurator-core is installed (it pretends it is not).
"""

from __future__ import annotations

from pathlib import Path

from disagg_decider.calc.physics import silicon
from disagg_decider.decide import decide
from disagg_decider.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
RAG = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"


def test_without_the_extra_the_verdict_is_the_default_one_with_a_warning(monkeypatch):
    monkeypatch.setattr(silicon, "installed", lambda: False)
    w = load_workload(RAG)
    asked = decide(w.model_copy(update={"step_source": "silicon"}), base_dir=RAG.parent)
    plain = decide(w, base_dir=RAG.parent)
    assert asked.step_source == "default"
    assert [x for x in asked.warnings if x not in plain.warnings] == [
        "step_source silicon unavailable, default physics used: aiconfigurator-core is not "
        "installed (pip install 'disagg-decider[silicon]')"
    ]
    assert asked.decision == plain.decision and asked.sizing == plain.sizing
    assert asked.colocated == plain.colocated and asked.disaggregated == plain.disaggregated


def test_a_step_source_the_workload_cannot_name_is_refused_with_the_choices(tmp_path):
    import subprocess
    import sys

    text = RAG.read_text().replace("engine: vllm\n", "engine: vllm\nstep_source: measured\n")
    path = tmp_path / "w.yaml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "disagg_decider", "--workload", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "step_source" in done.stderr and "'silicon'" in done.stderr
    assert "Traceback" not in done.stderr
