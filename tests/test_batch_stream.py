"""`decide batch` at fleet scale (issue 27): worker processes, streamed rows, bounded memory.

`--jobs N` must change nothing but the wall time (same rows, same order); rows must leave as
chunks finish, not after the whole batch; Ctrl-C must leave only complete rows and say how far
it got; memory must follow the chunk size, not the batch's length.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from disagg_decider import batch_stream
from disagg_decider.batch_inputs import plan
from disagg_decider.batch_work import CSV_COLUMNS, Options
from disagg_decider.pool import WorkerPool
from tests.conftest import EXAMPLES, ROOT, edited_example, run_cli
from tests.meaning import differences

HANG_S = 300  # far above any run here; reached only if something hangs
CHEAP = ROOT / "examples" / "two-gpu-colocate.yaml"  # a small search: a cheap decision


def _jsonl(path: Path, n: int, example: Path = CHEAP, mixed: bool = False) -> Path:
    """`n` generated workloads, one JSON object per line (the rate varies; `mixed` cycles the
    homogeneous examples, so chunks mix models, GPUs and engines)."""
    bases = [p for p in EXAMPLES if "b200" not in p.name] if mixed else [example]
    with path.open("w") as f:
        for i in range(n):
            data = edited_example(bases[i % len(bases)])
            data["traffic"]["requests_per_second"] *= 0.5 + (i % 7) * 0.25
            data["name"] = f"w{i}"
            f.write(json.dumps(data) + "\n")
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "skill")}


# --- --jobs changes nothing but the wall time ------------------------------------------------


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    return _jsonl(tmp_path_factory.mktemp("mixed") / "mixed.jsonl", 21, mixed=True)


def test_jobs_2_writes_the_rows_of_jobs_1_in_input_order(mixed):
    one = run_cli("batch", str(mixed), "-f", "jsonl", "--jobs", "1", "--chunk", "4")
    two = run_cli("batch", str(mixed), "-f", "jsonl", "--jobs", "2", "--chunk", "4")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    rows_1 = [json.loads(line) for line in one.stdout.splitlines()]
    rows_2 = [json.loads(line) for line in two.stdout.splitlines()]
    assert [r["file"] for r in rows_2] == [f"{mixed}:{i}" for i in range(1, 22)]
    assert [r["workload"] for r in rows_2] == [f"w{i}" for i in range(21)]
    assert differences(rows_1, rows_2) == []
    assert len({(r["model"], r["gpu"]) for r in rows_2}) >= 4  # chunks mix engines


@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_jobs_2_prints_the_same_csv_and_table(mixed, fmt):
    one = run_cli("batch", str(mixed), "-f", fmt, "--jobs", "1", "--chunk", "5")
    two = run_cli("batch", str(mixed), "-f", fmt, "--jobs", "2", "--chunk", "5")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert two.stdout == one.stdout
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(two.stdout)))
        assert rows[0] == list(CSV_COLUMNS) and len(rows) == 22
        assert all(len(r) == len(CSV_COLUMNS) for r in rows)


# --- rows stream -------------------------------------------------------------------------------


class _Recorder(io.StringIO):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def write(self, text: str) -> int:
        self.events.append(f"write {text.count(chr(10))}")
        return super().write(text)


@pytest.mark.parametrize("jobs", [1, 2])
def test_rows_leave_before_the_last_workload_is_read(tmp_path, monkeypatch, jobs):
    """The input is drawn lazily and the first rows are written while most of it is unread."""
    path = _jsonl(tmp_path / "w.jsonl", 24)
    events: list[str] = []
    real = batch_stream.entries

    def counted(sources):
        for i, entry in enumerate(real(sources)):
            events.append(f"read {i}")
            yield entry

    monkeypatch.setattr(batch_stream, "entries", counted)
    sink = _Recorder(events)
    outcome = batch_stream.run(plan([path]), Options(fmt="jsonl"), sink, jobs=jobs, chunk=3)
    assert outcome.written == 24 and not outcome.errors
    first_row = next(i for i, e in enumerate(events) if e.startswith("write") and e != "write 0")
    assert events.index("read 23") > first_row, events
    reads_before = sum(e.startswith("read") for e in events[:first_row])
    assert reads_before <= 3 * (2 * jobs + 1), events  # chunk x chunks in flight (+1 drawn)


def _square(x: int) -> int:
    return x * x


def test_the_pool_keeps_input_order_and_bounds_what_is_in_flight():
    drawn: list[int] = []

    def inputs():
        for i in range(40):
            drawn.append(i)
            yield i

    seen = []
    with WorkerPool(2) as pool:
        for result in pool.ordered(_square, inputs(), in_flight=3):
            seen.append(result)
            assert len(drawn) <= len(seen) + 3
    assert seen == [i * i for i in range(40)]


# --- Ctrl-C --------------------------------------------------------------------------------


def _interrupt_after_first_row(args: list[str], out: Path) -> subprocess.CompletedProcess:
    """Run `decide batch ARGS --out OUT`, send SIGINT once OUT holds a complete row."""
    command = [sys.executable, "-m", "disagg_decider", "batch", *args, "--out", str(out)]
    proc = subprocess.Popen(
        command, env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + HANG_S
    fmt = args[args.index("-f") + 1]
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and _has_a_row(out.read_text(), fmt):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_S)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _has_a_row(text: str, fmt: str) -> bool:
    if fmt == "json":
        return "\n  }" in text  # an item's closing brace
    return text.count("\n") >= (2 if fmt == "csv" else 1)  # (the header, then) a row


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "json"])
def test_ctrl_c_leaves_complete_rows_and_says_how_far_it_got(tmp_path, fmt):
    path = _jsonl(tmp_path / "w.jsonl", 3000)
    out = tmp_path / f"partial.{fmt}"
    proc = _interrupt_after_first_row([str(path), "-f", fmt, "--jobs", "2"], out)
    assert proc.returncode == 130, proc.stderr
    text = out.read_text()
    if fmt == "jsonl":
        rows = [json.loads(line) for line in text.splitlines()]
    elif fmt == "json":
        rows = json.loads(text)
    else:
        table = list(csv.reader(io.StringIO(text)))
        assert table[0] == list(CSV_COLUMNS) and all(len(r) == len(CSV_COLUMNS) for r in table)
        rows = [dict(zip(CSV_COLUMNS, r, strict=True)) for r in table[1:]]
    assert text.endswith("\n") and 1 <= len(rows) < 3000
    assert [r["file"] for r in rows] == [f"{path}:{i}" for i in range(1, len(rows) + 1)]
    assert f"interrupted after {len(rows):,} of 3,000 workloads; partial output in {out}" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


# --- memory follows the chunk, not the batch ------------------------------------------------------

MEASURE = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_rss_kib(path: Path, tmp_path: Path) -> int:
    """The largest resident set of `decide batch` and its workers, in a fresh process tree."""
    command = [sys.executable, "-m", "disagg_decider", "batch", str(path), "-f", "jsonl"]
    command += ["--jobs", "2", "--chunk", "100", "--out", str(tmp_path / f"{path.stem}.out.jsonl")]
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, *command],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_S * 4,
    )
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


def test_peak_memory_does_not_grow_with_the_batch(tmp_path):
    """Ten times the workloads, about the same peak RSS (the whole-batch pipeline grew ~70 KB
    per workload: 779 MiB at 10,000). 400 against 4,000 keeps the suite's CPU time sane;
    benchmarks/batch_scale.py measures 100,000."""
    small = _peak_rss_kib(_jsonl(tmp_path / "small.jsonl", 400), tmp_path)
    large = _peak_rss_kib(_jsonl(tmp_path / "large.jsonl", 4000), tmp_path)
    assert large < 1.25 * small, (small, large)


# --- files and bad input ------------------------------------------------------------------------


def test_jsonl_lines_that_are_no_workload_are_error_rows(tmp_path):
    path = _jsonl(tmp_path / "w.jsonl", 1)
    with path.open("ab") as f:
        f.write(b"{not json\n\n")
        f.write(b'{"name": "x"}\n')
        f.write(b'"\xff\xfe"\n')
    proc = run_cli("batch", str(path), "-f", "jsonl")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["file"] for r in rows] == [f"{path}:{n}" for n in (1, 2, 4, 5)]
    assert "decision" in rows[0]
    assert "not JSON" in rows[1]["error"]
    assert "model" in rows[2]["error"]  # the missing field is named
    assert "not UTF-8" in rows[3]["error"]
    assert "3 of 4 workloads could not be decided" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "--jobs 0: expected 1 to"),
        (["--chunk", "0"], "--chunk 0: expected 1 to"),
        (["--set", "no_such_parameter=1"], "no_such_parameter"),
    ],
)
def test_bad_flags_are_refused_before_any_row(args, message):
    proc = run_cli("batch", str(CHEAP), *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


def test_a_glob_and_a_missing_path(tmp_path):
    proc = run_cli("batch", str(ROOT / "examples" / "chat-*.yaml"), "-f", "jsonl")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["workload"] for x in proc.stdout.splitlines()] == ["chat-short"]
    proc = run_cli("batch", str(tmp_path / "nothing-*.yaml"))
    assert proc.returncode == 2 and "matches no file" in proc.stderr
    proc = run_cli("batch", str(tmp_path / "absent.yaml"))
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr
