"""The default step physics: the fitted table (`calc/step_fit.json`) and how workloads get it.

`benchmarks/fit_step_physics.py` fits the pass model's constants (`calc/physics/step_split.py`) per
GPU x engine x model family x weight format to aiconfigurator-core's measured step times; the
table ships with its source and residuals. Refitting one GPU and engine here must give the
shipped entries exactly (the fit is a deterministic search over fixed grids), so the table
cannot drift from its script or data; and the script's `predict` must be the calculator's pass,
so the residuals it ships are the calculator's. A workload that sets no `efficiency.*` is priced
with its entry; a constant it sets is kept.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from disagg_decider.calc.physics.step import Engine, iteration_ms
from disagg_decider.catalog import get_gpu, get_model, step_fit
from disagg_decider.workload import Efficiency, parse_workload, resolve
from tests.conftest import MINIMAL_WORKLOAD

ROOT = Path(__file__).resolve().parents[1]
TABLE = json.loads(step_fit.TABLE_PATH.read_text())


def _fit_script():
    pytest.importorskip("aiconfigurator_core")
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    import fit_step_physics

    return fit_step_physics


def _resolved(**update):
    return resolve(parse_workload({**MINIMAL_WORKLOAD, **update}, "test"))


def test_the_shipped_table_reproduces_from_the_script_for_h200_vllm():
    fit_step_physics = _fit_script()
    assert TABLE["source"].startswith("aiconfigurator-core 0.12.0")
    mine = [f for f in TABLE["fits"] if (f["gpu"], f["engine"]) == ("h200", "vllm")]
    assert {(f["family"], f["format"]) for f in mine} == {
        ("dense", "bf16"),
        ("moe", "bf16"),
        ("moe", "fp8"),
        ("moe", "fp4"),
    }
    assert fit_step_physics.fit_table(("h200",), ("vllm",)) == mine


def test_the_scripts_prediction_is_the_calculators_pass():
    """The fit's residuals are the calculator's: `predict` on the features read off the
    engine equals `physics_vs_silicon.ours_ms` with the fitted constants, row by row."""
    fit_step_physics = _fit_script()
    import physics_vs_silicon as pvs

    rows, _ = pvs.run(pvs.QUICK, "roofline", lambda s: None)
    assert len(rows) > 40
    p = fit_step_physics.arrays(rows)
    for i, r in enumerate(rows):
        model = get_model(r["model"])
        fit = step_fit.fitted(r["gpu"], r["engine"], model.moe is not None, r["_dtype"])
        eff = Efficiency(**fit.constants)
        engine = pvs.our_engine(model, get_gpu(r["gpu"]), r["_dtype"], r["_layout"], None, eff)
        ours = pvs.ours_ms(engine, r["phase"], r["batch"], r["context"], r["tokens"])
        one = {k: v[i : i + 1] for k, v in p.items()}
        assert float(fit_step_physics.predict(fit.constants, one)[0]) == pytest.approx(
            ours, rel=1e-9
        ), r


def test_every_entry_names_its_constants_source_and_residuals():
    names = set(Efficiency.model_fields)
    for f in TABLE["fits"]:
        assert set(f["constants"]) <= names, f["constants"].keys() - names
        assert f["family"] in ("dense", "moe") and f["format"] in ("bf16", "fp8", "fp4")
        assert f["models"], f
        assert set(f["residuals"]) <= {"prefill", "decode", "mixed"} and f["residuals"]
        assert sum(r["n"] for r in f["residuals"].values()) == f["n"]
        Efficiency(**f["constants"])  # every fitted value is a valid setting
    assert "fallbacks" in TABLE and TABLE["model"]


def test_a_workload_without_efficiency_gets_the_fitted_constants():
    r = _resolved()
    entry = step_fit.fitted("h100", "vllm", False, "bf16")
    assert entry is not None and entry.entry == "h100 vllm dense bf16"
    eff = r.workload.efficiency
    for name, value in entry.constants.items():
        assert getattr(eff, name) == value, name
    assert eff.prefill_mfu != Efficiency().prefill_mfu  # not the plain roofline's 0.45
    assert eff.attention_mfu is not None  # the split pass, not the plain roofline
    assert not eff.model_fields_set  # filled in, not given: listed as assumed
    assert r.efficiency_from.startswith("calc/step_fit.json h100 vllm dense bf16")


def test_a_workload_that_sets_a_constant_keeps_it_and_gets_the_rest():
    r = _resolved(efficiency={"prefill_mfu": 0.31, "step_overhead_ms": 2.0})
    entry = step_fit.fitted("h100", "vllm", False, "bf16")
    eff = r.workload.efficiency
    assert eff.prefill_mfu == 0.31 and eff.step_overhead_ms == 2.0
    assert eff.decode_mbu == entry.constants["decode_mbu"]
    assert eff.model_fields_set == {"prefill_mfu", "step_overhead_ms"}


def test_the_entry_follows_engine_family_and_format():
    moe = _resolved(model="gpt-oss-120b", engine="sglang", cluster={"gpu": "b200", "gpus": 8})
    entry = step_fit.fitted("b200", "sglang", True, moe.workload.weights_dtype)
    assert entry.entry == "b200 sglang moe fp4"
    assert moe.workload.efficiency.decode_mbu == entry.constants["decode_mbu"]
    # No dense FP8 data: the dense BF16 entry, said so.
    fp8 = step_fit.fitted("h200", "trtllm", False, "fp8")
    assert fp8.entry == "h200 trtllm dense bf16" and "no dense fp8 fit" in fp8.source()


@pytest.mark.parametrize(
    ("gpu", "used"), [("mi300x", "h200"), ("a100-80g", "h100"), ("l40s", "h100")]
)
def test_gpus_the_database_lacks_take_the_nearest_covered_one_and_say_so(gpu, used):
    r = _resolved(cluster={"gpu": gpu, "gpus": 8})
    assert r.efficiency_from.startswith(f"calc/step_fit.json {used} vllm dense bf16")
    assert f"priced as {used}" in r.efficiency_from
    entry = step_fit.fitted(used, "vllm", False, "bf16")
    assert r.workload.efficiency.decode_mbu == entry.constants["decode_mbu"]


def test_the_verdicts_assumptions_name_the_fitted_table():
    from disagg_decider.assumptions import assumed

    r = _resolved()
    got = {a.field: a for a in assumed(r.workload, r.efficiency_from)}
    entry = step_fit.fitted("h100", "vllm", False, "bf16")
    for name in ("prefill_mfu", "decode_mbu"):
        a = got[f"efficiency.{name}"]
        assert a.value == entry.constants[name]
        assert "fitted to measured silicon: calc/step_fit.json h100 vllm dense bf16" in a.affects
    assert "efficiency.prefill_mfu" not in {
        a.field for a in assumed(_resolved(efficiency={"prefill_mfu": 0.3}).workload)
    }


def test_the_split_pass_with_neutral_terms_is_the_roofline_where_attention_is_free():
    """With attention free (a tiny context) and no routed experts, the split pass is the plain
    roofline's max(memory, compute) plus the same communication: one physics, two shapes."""
    model, gpu = get_model("llama-3.3-70b"), get_gpu("h200")
    plain = Engine(model, gpu, "bf16", "bf16", 4, Efficiency())
    split = Engine(model, gpu, "bf16", "bf16", 4, Efficiency(attention_mfu=1.0))
    for batch, prompt in ((64, 0.0), (0, 512.0)):
        a = float(iteration_ms(plain, batch, 0.0, prompt, 0.0))
        b = float(iteration_ms(split, batch, 0.0, prompt, 0.0))
        assert b == pytest.approx(a, rel=0.02), (batch, prompt)


def test_the_default_install_prices_without_aiconfigurator():
    """Resolving a workload and pricing a pass with the fitted table imports nothing of
    aiconfigurator-core (blocked here as if it were not installed)."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'aiconfigurator_core':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from disagg_decider.workload import parse_workload, resolve\n"
        "from disagg_decider.calc.layouts.layout_choices import engine_for\n"
        "from disagg_decider.calc.physics.step import iteration_ms\n"
        f"r = resolve(parse_workload({MINIMAL_WORKLOAD!r}, 'w'))\n"
        "assert r.efficiency_from, r\n"
        "print(float(iteration_ms(engine_for(r, 2), 8, 2048.0, 512.0, 0.0)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "skill"), "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) > 0


def test_a_dumped_and_revalidated_workload_is_priced_on_the_same_physics():
    """Sweeps and rate variants copy a workload through `model_dump` -> `model_validate`, which
    marks every efficiency field set; the copy must still take the table, not 0.45/0.7."""
    from disagg_decider.workload import Workload

    w = parse_workload({**MINIMAL_WORKLOAD, "efficiency": {"prefill_mfu": 0.31}}, "test")
    copy = Workload.model_validate(w.model_dump(mode="json", exclude_none=True))
    assert resolve(copy).workload.efficiency == resolve(w).workload.efficiency
    assert resolve(copy).workload.efficiency.prefill_mfu == 0.31
