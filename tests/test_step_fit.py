"""The fitted step-physics table (`calc/step_fit.json`) reproduces from its script.

`benchmarks/fit_step_physics.py` fits the roofline's efficiency constants per GPU x engine x
model family to aiconfigurator-core's measured step times; the table ships with its source and
residuals. Refitting one GPU and engine here must give the shipped entries exactly (the fit is
a deterministic search over fixed grids), so the table cannot drift from its script or data.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiconfigurator_core")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fit_step_physics  # noqa: E402


def test_the_shipped_table_reproduces_from_the_script_for_h200_vllm():
    shipped = json.loads(fit_step_physics.TABLE.read_text())
    assert shipped["source"].startswith("aiconfigurator-core 0.12.0")
    mine = [f for f in shipped["fits"] if (f["gpu"], f["engine"]) == ("h200", "vllm")]
    assert {f["family"] for f in mine} == {"dense", "moe"}
    assert fit_step_physics.fit_table(("h200",), ("vllm",)) == mine


def test_every_entry_names_its_constants_and_residuals_per_phase():
    shipped = json.loads(fit_step_physics.TABLE.read_text())
    for f in shipped["fits"]:
        assert set(f["constants"]) == set(fit_step_physics.GRIDS)
        assert set(f["residuals"]) == {"prefill", "decode", "mixed"}
        assert sum(r["n"] for r in f["residuals"].values()) == f["n"]
