"""`decide calibrate` reports constants its runs cannot pin as unbounded (issue 26).

Three constants (prefill MFU, decode MBU, step overhead) from two measured values, or from two
runs that repeat one another, leave a direction of the fit that no measurement moves: the fit
passes through the points (residual ~0) wherever on that direction it stops. Before, that read
"residual 0.1%" with `uncertainty: {}` (or a standard error of 1e-15); now each such constant
is `unbounded`, in the fit, the file, the JSON and the text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from disagg_decider.calibrate import fit, readers, synthetic
from tests.conftest import run_cli
from tests.test_calibrate import TARGET, TRUE


def _runs(tmp_path: Path, specs) -> list[Path]:
    engine = TARGET.engine_with(TRUE)
    paths = []
    for i, (prompt, output, rate, concurrency) in enumerate(specs):
        run = synthetic.calculated_run(
            engine, prompt, output, rate_per_s=rate, concurrency=concurrency
        )
        paths.append(tmp_path / f"run{i}.json")
        paths[-1].write_text(synthetic.vllm_json(run, detailed=False))
    return paths


def test_two_measured_values_cannot_pin_three_constants(tmp_path):
    """One run: its mean TTFT and TPOT, two values for three constants."""
    runs, _ = readers.read_results(_runs(tmp_path, [(1024, 256, 2.0, None)]))
    assert sum(len(fit.measured_values(r)) for r in runs) == 2
    result = fit.fit(runs, TARGET, simulate=False)
    assert set(result.fitted) == set(fit.FITTED)
    assert result.uncertainty == {n: math.inf for n in fit.FITTED}
    assert any("cannot be pinned" in w and "2 measured values" in w for w in result.warnings)


def test_two_runs_that_repeat_one_another_leave_the_constants_unbounded(tmp_path):
    """Two runs at the same load and lengths: four values, but only two independent ones. The
    fit reproduces them exactly with decode MBU far from the truth (0.62): nothing may call
    that measured."""
    same = (1024, 256, 2.0, None)
    runs, _ = readers.read_results(_runs(tmp_path, [same, same]))
    result = fit.fit(runs, TARGET, simulate=False)
    assert max(abs(r.error) for r in result.residuals) < 0.01  # a perfect-looking fit
    assert math.isinf(result.uncertainty["decode_mbu"])
    assert math.isinf(result.uncertainty["step_overhead_ms"])


def test_runs_at_two_loads_still_pin_the_constants(tmp_path):
    """The check does not cry wolf: the same prompt at two rates separates MBU from the
    overhead (the batch differs), and the constants come back with a finite spread."""
    runs, _ = readers.read_results(
        _runs(tmp_path, [(1024, 256, 2.0, None), (1024, 256, 1.0, None)])
    )
    result = fit.fit(runs, TARGET, simulate=False)
    assert all(math.isfinite(u) for u in result.uncertainty.values())
    assert not any("cannot be pinned" in w for w in result.warnings)


def test_the_cli_writes_and_prints_unbounded(tmp_path):
    """Two closed-loop runs at one concurrency (the mean-field model, no replays): the file and
    --json carry "unbounded" for each constant, and the text says so beside each."""
    paths = _runs(tmp_path, [(1024, 256, None, 8), (1024, 256, None, 8)])
    args = ["calibrate", *map(str, paths), "--model", "llama-3.1-8b", "--gpu", "h100"]
    out = tmp_path / "cal.yaml"
    proc = run_cli(*args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    entry = yaml.safe_load(out.read_text())["entries"][0]
    assert entry["uncertainty"] == {n: "unbounded" for n in fit.FITTED}
    text = " ".join(proc.stdout.split())
    assert "decode_mbu" in text and "(unbounded: the runs cannot pin it)" in text
    assert "not a measure of prefill_mfu, decode_mbu, step_overhead_ms" in text
    assert "error = predicted / measured - 1" in text
    as_json = run_cli(*args, "--json")
    assert as_json.returncode == 0, as_json.stderr
    uncertainty = json.loads(as_json.stdout)["entries"][0]["uncertainty"]
    assert set(uncertainty.values()) == {"unbounded"}
    shown = run_cli("catalog", "calibration", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "unbounded by these runs" in " ".join(shown.stdout.split())
    data = {
        "name": "uses-it",
        "model": "llama-3.1-8b",
        "weights_dtype": "bf16",
        "traffic": {"prompt_tokens": 1024, "output_tokens": 256, "requests_per_second": 2},
        "slo": {"ttft_ms": 1000, "tpot_ms": 40},
        "cluster": {"gpu": "h100", "gpus": 8},
    }
    (workload := tmp_path / "w.yaml").write_text(yaml.safe_dump(data))
    verdict = run_cli("--workload", str(workload), "--calibration", str(out), "--format", "json")
    assert verdict.returncode == 0, verdict.stderr
    note = json.loads(verdict.stdout)["calibration"][0]
    assert "unbounded by these runs" in note
