"""decide calibrate: readers per format, the fit, the calibration file and its use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from disagg_decider import catalog
from disagg_decider.calibrate import fit, readers, synthetic
from disagg_decider.calibrate.build import calibrate
from disagg_decider.catalog import step_fit
from disagg_decider.errors import UserError
from disagg_decider.workload import Efficiency
from tests.conftest import ROOT, run_cli

PUBLISHED = ROOT / "tests" / "data" / "benchmarks" / "published"
# `decide calibrate` fits three constants on top of the default step physics (the fitted
# table's entry for the target), so the runs are written with that physics too.
BASE = Efficiency(**step_fit.fitted("h100", "vllm", False, "bf16").constants)
TRUE = BASE.model_copy(update={"prefill_mfu": 0.55, "decode_mbu": 0.62, "step_overhead_ms": 2.5})
TARGET = fit.Target(
    catalog.get_model("llama-3.1-8b"),
    catalog.get_gpu("h100"),
    "vllm",
    1,
    "bf16",
    "bf16",
    8192,
    256,
    base=BASE,
)
# (prompt, output, open-loop rate or None, closed-loop concurrency or None)
SWEEP = [
    (1024, 256, 2.0, None),
    (1024, 256, None, 48),
    (4096, 256, 1.0, None),
    (4096, 128, None, 8),
]
WRITERS = {
    "vllm": lambda run: synthetic.vllm_json(run, detailed=False),
    "vllm-detailed": lambda run: synthetic.vllm_json(run, detailed=True),
    "sglang": synthetic.sglang_jsonl_line,
    "aiperf": synthetic.aiperf_json,
}


def _write_calculated(tmp_path: Path, fmt: str) -> list[Path]:
    engine = TARGET.engine_with(TRUE)
    paths = []
    for i, (p, o, rate, conc) in enumerate(SWEEP):
        run = synthetic.calculated_run(engine, p, o, rate_per_s=rate, concurrency=conc)
        path = tmp_path / f"{fmt}-{i}.json"
        path.write_text(WRITERS[fmt](run))
        paths.append(path)
    return paths


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_mean_field_fit_recovers_the_constants_of_calculated_runs_in_each_format(tmp_path, fmt):
    """The closed-form part of the fit on its own (no simulator): runs the mean-field model
    itself wrote, open and closed loop, in every format, come back exactly."""
    runs, files = readers.read_results(_write_calculated(tmp_path, fmt))
    assert {f.format for f in files} == {fmt.removesuffix("-detailed")}
    assert [r.concurrency is not None for r in runs] == [c is not None for *_, c in SWEEP]
    if fmt == "vllm-detailed":
        assert all(r.per_request for r in runs)
    result = fit.fit(runs, TARGET, simulate=False)
    assert result.efficiency.prefill_mfu == pytest.approx(TRUE.prefill_mfu, rel=0.05)
    assert result.efficiency.decode_mbu == pytest.approx(TRUE.decode_mbu, rel=0.05)
    assert result.efficiency.step_overhead_ms == pytest.approx(TRUE.step_overhead_ms, rel=0.1)
    assert max(abs(r.error) for r in result.residuals) < 0.02
    assert max(result.uncertainty.values()) < 0.01  # exact runs leave nothing uncertain
    assert not any("loosely" in w for w in result.warnings)


# Simulator fixtures: (model, GPU, TP, (prefill MFU, decode MBU, step overhead ms), format,
# [(prompt tokens, request rate)]). Four prompt lengths, each at 15%, 40% and 65% of the rate the
# replica carries before its prompts queue without bound (mean-field capacity at these
# constants), 256 output tokens, lengths uniform on [0.8 L, L], 1000 requests a run (`vllm bench
# serve`'s default), seeds 0-11 (CALIBRATE_FIXTURE_SEED=k: seeds 100 k + 0-11, to try others).
SIMULATED = {
    "llama-3.1-8b-h100-vllm-detailed": (
        "llama-3.1-8b", "h100", 1, (0.55, 0.62, 2.5), "vllm-detailed",
        [(512, 5.57), (512, 14.86), (512, 24.15), (1024, 3.66), (1024, 9.77), (1024, 15.87),
         (2048, 1.99), (2048, 5.32), (2048, 8.64), (4096, 0.89), (4096, 2.37), (4096, 3.85)],
    ),
    "llama-3.3-70b-4xh100-vllm": (
        "llama-3.3-70b", "h100", 4, (0.6, 0.55, 4.0), "vllm",
        [(512, 2.49), (512, 6.64), (512, 10.79), (1024, 1.63), (1024, 4.34), (1024, 7.05),
         (2048, 0.92), (2048, 2.46), (2048, 4.0), (4096, 0.45), (4096, 1.2), (4096, 1.95)],
    ),
    "qwen3-32b-2xh200-sglang": (
        "qwen3-32b", "h200", 2, (0.45, 0.5, 1.5), "sglang",
        [(512, 2.29), (512, 6.12), (512, 9.94), (1024, 1.47), (1024, 3.93), (1024, 6.39),
         (2048, 0.85), (2048, 2.27), (2048, 3.7), (4096, 0.44), (4096, 1.17), (4096, 1.9)],
    ),
    "mixtral-8x7b-2xh100-aiperf": (
        "mixtral-8x7b", "h100", 2, (0.5, 0.6, 2.0), "aiperf",
        [(512, 4.86), (512, 12.96), (512, 21.06), (1024, 3.99), (1024, 10.64), (1024, 17.29),
         (2048, 1.92), (2048, 5.11), (2048, 8.3), (4096, 0.85), (4096, 2.26), (4096, 3.67)],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SIMULATED))
def test_fit_recovers_mfu_and_mbu_from_simulated_runs(tmp_path, case):
    """Discrete-event runs (Poisson arrivals, varying lengths, ramp-up and drain measured as
    `vllm bench serve` measures them) on four model x GPU x TP settings, one result format
    each: prefill MFU and decode MBU come back within 5% of what they were simulated with.

    The mean-field model alone reads MBU 14-17% low on the first three: near saturation the
    simulated batch fluctuates (variance 2.5-4x its mean) and TPOT sits above the mean-field
    figure. The fit corrects each open-loop run by the simulator at the current constants until
    they settle.
    """
    model, gpu, tp, (mfu, mbu, overhead), fmt, sweep = SIMULATED[case]
    seed = int(os.environ.get("CALIBRATE_FIXTURE_SEED", "0"))  # other seeds on demand
    true = Efficiency(prefill_mfu=mfu, decode_mbu=mbu, step_overhead_ms=overhead)
    target = fit.Target(
        catalog.get_model(model), catalog.get_gpu(gpu), "vllm", tp, "bf16", "bf16", 8192, 256
    )
    engine = target.engine_with(true)
    paths = []
    for i, (prompt, rate) in enumerate(sweep):
        run = synthetic.simulate_run(
            engine, rate, prompt, 256, requests=1000, range_ratio=0.8, seed=100 * seed + i
        )
        paths.append(tmp_path / f"sim{i}.json")
        paths[-1].write_text(WRITERS[fmt](run))
    runs, files = readers.read_results(paths)
    assert {f.format for f in files} == {fmt.removesuffix("-detailed")}
    result = fit.fit(runs, target)
    assert result.efficiency.prefill_mfu == pytest.approx(mfu, rel=0.05)
    assert result.efficiency.decode_mbu == pytest.approx(mbu, rel=0.05)
    # The reported standard error is honest: the miss is within two of them, and it is tight
    # enough to be worth having (medians, as SGLang reports them, scatter more than means).
    miss = abs(result.efficiency.decode_mbu / mbu - 1)
    se = result.uncertainty["decode_mbu"]
    assert miss <= 2 * se and se < 0.08
    assert {r.by for r in result.residuals} == {"simulator"}
    errors = [abs(r.error) for r in result.residuals]
    assert np.median(errors) < 0.03 and max(errors) < 0.12


def test_a_constant_no_prediction_responds_to_is_reported_not_fitted(tmp_path):
    """Qwen3-32B on 2 x H200 at MBU 0.75: every decode pass is bound by compute in the step
    model (small passes reach little MFU), so no run says anything about MBU. The fit must say
    so instead of writing the search's starting point as if measured."""
    target = fit.Target(
        catalog.get_model("qwen3-32b"), catalog.get_gpu("h200"), "vllm", 2, "bf16", "bf16",
        8192, 256,
    )  # fmt: skip
    engine = target.engine_with(Efficiency(prefill_mfu=0.45, decode_mbu=0.75))
    paths = []
    for i, (p, o, rate, conc) in enumerate(SWEEP):
        run = synthetic.calculated_run(engine, p, o, rate_per_s=rate, concurrency=conc)
        paths.append(tmp_path / f"c{i}.json")
        paths[-1].write_text(synthetic.vllm_json(run, detailed=False))
    result = fit.fit(readers.read_results(paths)[0], target, simulate=False)
    assert result.uncertainty["decode_mbu"] == float("inf")
    assert any("decode_mbu moves no prediction" in w for w in result.warnings)
    assert result.efficiency.prefill_mfu == pytest.approx(0.45, rel=0.05)


def test_one_load_point_and_one_prompt_length_are_flagged(tmp_path):
    run = synthetic.calculated_run(TARGET.engine_with(TRUE), 1024, 256, rate_per_s=2.0)
    path = tmp_path / "one.json"
    path.write_text(synthetic.vllm_json(run, detailed=False))
    result = fit.fit(readers.read_results([path])[0], TARGET)
    text = " ".join(result.warnings)
    assert "one load point" in text and "one prompt length" in text


# --- published files ----------------------------------------------------------------------


def test_published_vllm_results_parse():
    runs = readers.parse_text((PUBLISHED / "vllm_llama32_3b_l40s.jsonl").read_text(), "v")
    assert [r.format for r in runs] == ["vllm"] * 3
    assert runs[0].request_rate_per_s == 10.0 and runs[0].ttft_ms == pytest.approx(54.5956, 1e-4)
    assert runs[0].prompt_tokens == pytest.approx(999.0)  # 299700 tokens / 300 requests
    assert runs[2].burst and runs[2].tpot_stat == "mean TPOT"


def test_published_sglang_results_parse():
    runs = readers.parse_text((PUBLISHED / "sglang_llama33_70b_h200_online.jsonl").read_text(), "s")
    assert [r.request_rate_per_s for r in runs] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert runs[0].ttft_stat == "median" and runs[0].ttft_ms == pytest.approx(82.8708, 1e-4)
    assert runs[0].tpot_stat == "median ITL"
    assert runs[0].prompt_cv == pytest.approx(1 / np.sqrt(3))  # uniform on [0, 1024]


def test_published_aiperf_results_parse():
    (run,) = readers.parse_text((PUBLISHED / "aiperf_qwen36_5090_c16.json").read_text(), "a")
    assert run.format == "aiperf" and run.concurrency == 16
    assert run.ttft_ms == pytest.approx(119.1305, 1e-4) and run.tpot_ms == pytest.approx(
        13.0502, 1e-4
    )
    assert run.output_tokens == pytest.approx(198.802, 1e-4)


def test_published_files_calibrate_end_to_end(tmp_path):
    out = tmp_path / "cal.yaml"
    proc = run_cli(
        "calibrate",
        str(PUBLISHED / "vllm_llama32_3b_l40s.jsonl"),
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l40s",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    entry = yaml.safe_load(out.read_text())["entries"][0]
    assert entry["data"][0]["sha256"] and entry["data"][0]["runs"] == 3
    assert any("burst" in w for w in entry["warnings"])
    assert all(p["metric"] != "ttft_ms" or "burst" not in p["load"] for p in entry["points"])
    assert "predicted by the simulator replaying the run (open loops)" in proc.stdout


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"model_id": "m", "completed": "many"}', "field 'completed': expected a number"),
        ('{"model_id": "m", "completed": 10}', "field 'total_input_tokens': required"),
        (
            '{"time_to_first_token": {"unit": "ms"}, "input_sequence_length": {"avg": 5},'
            ' "output_sequence_length": {"avg": 5}}',
            "field 'time_to_first_token': expected an object with 'avg'",
        ),
        ('{"foo": 1}', "not a recognised benchmark result"),
        ("not json at all", "not JSON"),
        (
            '{"dataset_name": "random", "completed": 3, "total_input_tokens": 9,'
            ' "total_output_tokens": 9}',
            "field 'median_ttft_ms'",
        ),
    ],
)
def test_bad_result_file_names_file_and_field_and_exits_2(tmp_path, text, expected):
    path = tmp_path / "broken-result.json"
    path.write_text(text)
    proc = run_cli("calibrate", str(path), "--model", "llama-3.1-8b", "--gpu", "h100")
    assert proc.returncode == 2
    assert "broken-result.json" in proc.stderr and expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_jsonl_bad_line_is_named(tmp_path):
    path = tmp_path / "runs.jsonl"
    good = synthetic.sglang_jsonl_line(
        synthetic.calculated_run(TARGET.engine_with(TRUE), 512, 64, rate_per_s=1.0)
    )
    path.write_text(good + "\n{broken\n")
    with pytest.raises(UserError, match=r"runs.jsonl: line 2: not JSON"):
        readers.read_results([path])


def test_calibrate_does_not_overwrite_without_force(tmp_path):
    paths = _write_calculated(tmp_path, "vllm")
    out = tmp_path / "cal.yaml"
    out.write_text("mine\n")
    args = ["calibrate", *map(str, paths), "--model", "llama-3.1-8b", "--gpu", "h100"]
    proc = run_cli(*args, "--out", str(out))
    assert proc.returncode == 2 and "--force" in proc.stderr and out.read_text() == "mine\n"
    proc = run_cli(*args, "--out", str(out), "--force", "--json")
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(proc.stdout)["entries"][0]
    assert entry["efficiency"]["decode_mbu"] == pytest.approx(0.62, rel=0.05)
    # Open loops are replayed on the simulator, closed loops priced by the mean-field model.
    by = {(p["load"].startswith("concurrency"), p["predicted_by"]) for p in entry["points"]}
    assert by == {(False, "simulator"), (True, "mean-field")}


# --- calibrations are used ------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("cal")
    cal = calibrate(
        _write_calculated(tmp, "aiperf"),
        model=TARGET.model,
        gpu=TARGET.gpu,
        engine="vllm",
        tp=1,
    )
    from disagg_decider.calibrate.file import dump_calibration

    path = tmp / "calibration.yaml"
    path.write_text(dump_calibration(cal))
    return path


def _chat_workload(tmp_path: Path, **extra) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "chat-short-colocate.yaml").read_text())
    data.update(extra)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_decide_with_calibration_changes_the_numbers_and_lists_it(tmp_path, calibration_file):
    w = _chat_workload(tmp_path)
    plain = json.loads(run_cli("-w", str(w), "--format", "json").stdout)
    proc = run_cli("-w", str(w), "--format", "json", "--calibration", str(calibration_file))
    assert proc.returncode == 0, proc.stderr
    calibrated = json.loads(proc.stdout)
    assert calibrated["calibration"] and "decode_mbu 0.62" in calibrated["calibration"][0]
    assert "residual error median" in calibrated["calibration"][0]
    assert calibrated["metrics"]["decode_step_ms"] != plain["metrics"]["decode_step_ms"]
    assert plain["calibration"] == []


def test_workload_calibration_path_is_relative_to_the_workload(tmp_path, calibration_file):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cal.yaml").write_text(calibration_file.read_text())
    w = _chat_workload(tmp_path, calibration="sub/cal.yaml")
    verdict = json.loads(run_cli("-w", str(w), "--format", "json").stdout)
    assert verdict["calibration"] and "cal.yaml" in verdict["calibration"][0]


def test_calibration_for_another_gpu_is_reported_not_applied(tmp_path, calibration_file):
    data = yaml.safe_load((ROOT / "examples" / "chat-short-colocate.yaml").read_text())
    data["cluster"]["gpu"] = "h200"
    w = tmp_path / "w.yaml"
    w.write_text(yaml.safe_dump(data))
    verdict = json.loads(
        run_cli("-w", str(w), "--format", "json", "--calibration", str(calibration_file)).stdout
    )
    assert verdict["calibration"] == []
    assert any("no entry for llama-3.1-8b on h200" in x for x in verdict["warnings"])


def test_catalog_shows_calibrated_entries(calibration_file):
    proc = run_cli("catalog", "calibration", str(calibration_file))
    assert proc.returncode == 0, proc.stderr
    assert "llama-3.1-8b" in proc.stdout and "0.62" in proc.stdout
    bad = run_cli("catalog", "calibration", str(ROOT / "examples" / "chat-short-colocate.yaml"))
    assert bad.returncode == 2 and "not a calibration file" in bad.stderr


def test_gpu_microbench_skips_cleanly_and_writes_ceilings_as_a_calibration(tmp_path):
    import importlib.util
    import subprocess
    import sys

    script = ROOT / "benchmarks" / "gpu_microbench.py"
    out = tmp_path / "gpu.yaml"
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            "--gpu",
            "h100",
            "--model",
            "llama-3.1-8b",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "skill")},
        timeout=60,
    )
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        assert proc.returncode == 0 and proc.stdout.startswith("skipped:") and not out.exists()
    spec = importlib.util.spec_from_file_location("gpu_microbench", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cal = bench.calibration_from(
        {"bf16_tflops": 700.0, "hbm_gb_per_s": 2800.0}, "h100", "llama-3.1-8b", 1, "vllm", "bf16"
    )
    from disagg_decider.calibrate.file import dump_calibration, load_calibration

    out.write_text(dump_calibration(cal))
    entry = load_calibration(out).entries[0]
    assert entry.efficiency.prefill_mfu == pytest.approx(700 / 989.4, rel=1e-3)
    assert entry.efficiency.decode_mbu == pytest.approx(2800 / 3350, rel=1e-3)
    assert "step_overhead_ms" in entry.held


def test_simulate_runs_on_the_calibrated_constants(tmp_path, calibration_file):
    from disagg_decider.sim.cli import _load

    (tmp_path / "cal.yaml").write_text(calibration_file.read_text())
    w = _chat_workload(tmp_path, calibration="cal.yaml")
    _, resolved, verdict = _load(w)
    assert resolved.workload.efficiency.decode_mbu == pytest.approx(0.62, rel=0.05)
    assert verdict.calibration


def test_genai_perf_export_with_top_level_concurrency_parses():
    doc = {
        "request_throughput": {"unit": "requests/sec", "avg": 4.0},
        "time_to_first_token": {"unit": "ms", "avg": 120.0, "p99": 300.0},
        "inter_token_latency": {"unit": "ms", "avg": 15.0},
        "output_token_throughput": {"unit": "tokens/sec", "avg": 800.0},
        "input_sequence_length": {"unit": "tokens", "avg": 512.0},
        "output_sequence_length": {"unit": "tokens", "avg": 200.0},
        "input_config": {"model": ["m"], "concurrency": 8, "endpoint_type": "chat"},
    }
    (run,) = readers.parse_text(json.dumps(doc), "profile_export_genai_perf.json")
    assert run.format == "aiperf" and run.concurrency == 8 and run.tpot_ms == 15.0


def test_markdown_report_states_the_calibrated_constants(tmp_path, calibration_file):
    w = _chat_workload(tmp_path)
    proc = run_cli("-w", str(w), "--format", "markdown", "--calibration", str(calibration_file))
    assert proc.returncode == 0, proc.stderr
    assert "**Calibrated:**" in proc.stdout
    assert "decode memory-bandwidth utilisation 0.62" in proc.stdout


def test_batch_applies_one_calibration_to_every_workload(tmp_path, calibration_file):
    w = _chat_workload(tmp_path)
    proc = run_cli(
        "batch", str(w), str(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"),
        "--format", "jsonl", "--calibration", str(calibration_file),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    chat, rag = (json.loads(line) for line in proc.stdout.splitlines())
    assert chat["calibration"] and not rag["calibration"]
    assert any("no entry for llama-3.3-70b" in x for x in rag["warnings"])


def test_workload_far_from_the_calibrated_prompts_is_warned(tmp_path, calibration_file):
    data = yaml.safe_load((ROOT / "examples" / "chat-short-colocate.yaml").read_text())
    data["traffic"]["prompt_tokens"] = {"p50": 32000, "p99": 60000}
    w = tmp_path / "long.yaml"
    w.write_text(yaml.safe_dump(data))
    verdict = json.loads(
        run_cli("-w", str(w), "--format", "json", "--calibration", str(calibration_file)).stdout
    )
    assert any("measured on prompts of 1,024-4,096 tokens" in x for x in verdict["warnings"])


def test_aiperf_metrics_nested_under_records_parse():
    run = synthetic.calculated_run(TARGET.engine_with(TRUE), 1024, 256, concurrency=4)
    doc = json.loads(synthetic.aiperf_json(run))
    nested = {"records": {k: v for k, v in doc.items() if k != "input_config"}}
    nested["input_config"] = doc["input_config"]
    (parsed,) = readers.parse_text(json.dumps(nested), "old-aiperf.json")
    assert parsed.concurrency == 4 and parsed.ttft_ms == pytest.approx(run.ttft_ms[0])
