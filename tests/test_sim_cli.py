"""`decide simulate` and `decide sweep` from the command line."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAT = str(ROOT / "examples" / "chat-short-colocate.yaml")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    return subprocess.run(
        [sys.executable, "-m", "disagg_decider", *args], capture_output=True, text=True, env=env
    )


def test_simulate_json_has_both_modes_with_percentiles() -> None:
    proc = _cli("simulate", "-w", CHAT, "-n", "1500", "--seed", "3", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for mode in ("colocated", "disaggregated"):
        m = data[mode]
        for key in ("ttft_ms", "tpot_ms"):
            assert m[key]["p50"] <= m[key]["p90"] <= m[key]["p99"]
        assert 0.0 <= m["slo_attainment"] <= 1.0
        assert m["throughput_tokens_per_s"] > 0
        assert m["goodput_per_gpu"] > 0
        assert m["cost_per_million_tokens_usd"] > 0
    again = json.loads(
        _cli("simulate", "-w", CHAT, "-n", "1500", "--seed", "3", "-f", "json").stdout
    )
    assert again == data


def test_simulate_text_and_pool_options() -> None:
    sizing = json.loads(_cli("--workload", CHAT, "-f", "json").stdout)["sizing"]
    c_tp, d_tp = sizing["colocated_tp"], sizing["decode_tp"]
    args = ["--colocated-gpus", str(3 * c_tp), "--decode-gpus", str(2 * d_tp)]
    proc = _cli("simulate", "-w", CHAT, "-n", "500", "-f", "json", *args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["colocated"]["layout"].startswith(f"3 x TP{c_tp}")
    assert f"2D x TP{d_tp}" in data["disaggregated"]["layout"]
    text = _cli("simulate", "-w", CHAT, "-n", "300")
    assert text.returncode == 0 and "SLO attainment" in text.stdout
    bad = _cli("simulate", "-w", CHAT, "-n", "500", "--requests", "10", "--cv", "-1")
    assert bad.returncode == 2


def test_sweep_text_json_markdown(tmp_path: Path) -> None:
    proc = _cli("sweep", "-w", CHAT, "--prompt-tokens", "256:32768", "--steps", "5", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["prompt_tokens"][0] == 256 and data["prompt_tokens"][-1] == 32768
    assert len(data["analytic_gain"]) == 5
    md = _cli("sweep", "-w", CHAT, "--steps", "4", "-f", "markdown").stdout
    assert "```mermaid" in md and "xychart-beta" in md and "| prompt p50 |" in md
    text = _cli("sweep", "-w", CHAT, "--steps", "4").stdout
    assert "crossover (analytic, as in the verdict)" in text
    bad = _cli("sweep", "-w", CHAT, "--prompt-tokens", "900:100")
    assert bad.returncode == 2 and "LOW:HIGH" in bad.stderr


def test_sweep_simulated_with_plot(tmp_path: Path) -> None:
    png = tmp_path / "gain.png"
    args = [
        "sweep",
        "-w",
        CHAT,
        "--prompt-tokens",
        "512:4096",
        "--steps",
        "2",
        "--simulate",
        "-n",
        "400",
        "--plot",
        str(png),
        "-f",
        "json",
    ]
    proc = _cli(*args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["colocated_goodput_per_gpu"]) == 2
    assert all(g > 0 for g in data["disaggregated_goodput_per_gpu"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = _cli(*args)
    assert again.returncode == 2 and "--force" in again.stderr


def test_sweep_plot_must_be_a_png_name(tmp_path: Path) -> None:
    # matplotlib would write "<name>.png" beside a directory or an extension-less name
    for target in (tmp_path, tmp_path / "chart"):
        proc = _cli("sweep", "-w", CHAT, "--steps", "2", "--plot", str(target), "--force")
        assert proc.returncode == 2 and "expected a .png file name" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []
