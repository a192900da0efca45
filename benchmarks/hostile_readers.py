"""What hostile and big inputs cost the calibrate and trace readers (issue 29), as measured.

- a 20 MB Azure trace (544,000 rows; 2023 naive and 2024 +00:00 timestamps): CPU-s of
  `trace.load` (4.3 before the chunked numpy parse);
- `decide calibrate` on a 1M-request `--save-detailed` file, a 100 MB file, a 60,000-run list,
  a 100,000-line JSON Lines file: exit code, CPU-s and peak RSS of the process (`os.wait4`).

    PYTHONPATH=skill python benchmarks/hostile_readers.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from disagg_decider.sim import trace

ROOT = Path(__file__).resolve().parents[1]
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
RUN = (
    '{"model_id": "m", "completed": 100, "total_input_tokens": 100000, '
    '"total_output_tokens": 12800, "request_rate": 2.0, "duration": 50.0, '
    '"mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0}'
)


def azure_trace(path: Path, suffix: str, rows: int = 544_000) -> None:
    rng = np.random.default_rng(1)
    gaps = rng.integers(1, 200_000, rows).astype("timedelta64[us]")
    stamps = np.datetime64("2023-11-16T18:15:46") + np.cumsum(gaps)
    text = [t.replace("T", " ") + "0" + suffix for t in np.datetime_as_string(stamps, unit="us")]
    prompts, outputs = rng.integers(1, 8000, rows).tolist(), rng.integers(1, 800, rows).tolist()
    body = "".join(f"{t},{p},{o}\n" for t, p, o in zip(text, prompts, outputs, strict=True))
    path.write_text(HEADER + body)


def calibrate_cost(*paths: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    args = [sys.executable, "-m", "disagg_decider", "calibrate", *map(str, paths)]
    args += ["--model", "llama-3.1-8b", "--gpu", "h100"]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=env)
        peak_kb = 0
        while True:  # VmHWM of the process itself (ru_maxrss would count this one's, from fork)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_kb = max(peak_kb, _hwm_kb(proc.pid))
            time.sleep(0.005)
        err.seek(0)
        message = err.read().decode()[:90].strip()
    return (
        f"exit {os.waitstatus_to_exitcode(status)}, {usage.ru_utime + usage.ru_stime:.2f} CPU-s, "
        f"peak RSS >= {peak_kb / 1024:.0f} MB (sampled): {message}"
    )


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    except (OSError, StopIteration):
        return 0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, suffix in (("2023", ""), ("2024", "+00:00")):
            path = d / f"{name}.csv"
            azure_trace(path, suffix)
            start = time.process_time()
            loaded = trace.load(path)
            cpu_s = time.process_time() - start
            size_mb = path.stat().st_size / 1e6
            print(f"Azure {name} trace, {size_mb:.1f} MB, {len(loaded):,} rows: {cpu_s:.2f} CPU-s")
        million = d / "detailed.json"
        n = 1_000_000
        lists = ", ".join(
            f'"{k}": [' + ", ".join([v] * n) + "]"
            for k, v in (("input_lens", "1000"), ("output_lens", "128"), ("ttfts", "0.05"))
        )
        million.write_text(RUN[:-1] + f', "completed": {n}, ' + lists + "}")
        print("1M-request detailed file:", calibrate_cost(million))
        big = d / "big.json"
        big.write_text("[" + (RUN + ", ") * 560_000 + RUN + "]")
        print(f"{big.stat().st_size / 1e6:.0f} MB file:", calibrate_cost(big))
        many = d / "runs.json"
        many.write_text("[" + ", ".join([RUN] * 60_000) + "]")
        print("60,000-run list:", calibrate_cost(many))
        lines = d / "runs.jsonl"
        lines.write_text((RUN + "\n") * 100_000)
        print("100,000-line JSONL:", calibrate_cost(lines))


if __name__ == "__main__":
    main()
