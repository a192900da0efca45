"""A verdict's start-up loads only what the verdict needs (issue 17).

Each check runs `decide --workload FILE --format json` through the real entry point in a fresh
interpreter and then reads that interpreter's `sys.modules`: an import added at module level
anywhere on the verdict path (a subcommand, the simulator, the MCP SDK, rich) fails it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml"

# What `decide --workload` must not load: other subcommands' modules, the MCP SDK and its web
# stack, rich (only text output prints with it), numpy's masked arrays (pulled in by np.unique).
NOT_ON_VERDICT_PATH = [
    "disagg_decider.sim",
    "disagg_decider.deploy",
    "disagg_decider.render",
    "disagg_decider.mcp_server",
    "disagg_decider.mcp_tools",
    "disagg_decider.mcp_cli",
    "disagg_decider.mcp_http",
    "disagg_decider.rules.cli",
    "disagg_decider.calibrate.cli",
    "disagg_decider.calibrate.file",  # the example names no calibration file
    "disagg_decider.batch_cli",
    "disagg_decider.batch_inputs",
    "disagg_decider.batch_stream",
    "disagg_decider.batch_work",
    "disagg_decider.pool",  # the worker processes of batches and sweeps
    "disagg_decider.progress",
    "multiprocessing",
    "concurrent.futures",
    "disagg_decider.catalog_cli",
    "disagg_decider.verdict_text",
    "mcp",
    "starlette",
    "uvicorn",
    "httpx",
    "rich",
    "jinja2",
    "matplotlib",
    "numpy.ma",
    "numpy.polynomial",  # calc/queues/queueing.py writes its Gauss-Hermite constants out
    # the measured step source (`step_source: silicon`) and its database, even when installed
    "disagg_decider.calc.physics.silicon",
    "aiconfigurator_core",
]
# What the installed `decide` (`entry.main`) also spares a plain verdict: the command-line
# framework (typer, its vendored click, its pydantic TypeAdapters per option) and pydantic's
# plugin discovery (importlib.metadata scanning every installed distribution).
NOT_IN_THE_FAST_LANE = ["typer", "click", "importlib.metadata", "disagg_decider.cli_lazy"]

PROBE = """
import contextlib, io, json, sys
sys.argv = ["decide", *json.loads(sys.argv[1])]
from disagg_decider.entry import main
printed = io.StringIO()
code = 0
with contextlib.redirect_stdout(printed):
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
sys.stderr.write(json.dumps({"code": code, "stdout": printed.getvalue(),
                             "modules": sorted(sys.modules)}))
"""


def loaded_after(args: list[str]) -> tuple[dict, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    report = json.loads(proc.stderr)
    return report, set(report["modules"])


def heavy(modules: set[str], names: list[str] = NOT_ON_VERDICT_PATH) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in names))


def test_json_verdict_loads_no_subcommand_simulator_mcp_or_masked_arrays():
    report, modules = loaded_after(["--workload", str(EXAMPLE), "--format", "json"])
    assert report["code"] == 0
    verdict = json.loads(report["stdout"])
    assert verdict["decision"] in {"colocate", "dynamo", "llm-d"}
    assert "disagg_decider.decide" in modules  # the probe did run a verdict
    assert heavy(modules) == []
    assert heavy(modules, NOT_IN_THE_FAST_LANE) == []


def test_any_other_command_line_gets_typer_and_the_same_verdict():
    """`--workload=FILE` is not the fast lane's shape: typer parses it, and prints the same."""
    fast, _ = loaded_after(["--workload", str(EXAMPLE), "--format", "json"])
    report, modules = loaded_after([f"--workload={EXAMPLE}", "--format", "json"])
    assert "typer" in modules
    assert report["code"] == 0
    assert report["stdout"] == fast["stdout"]


def test_a_subcommand_loads_its_own_module_only_when_named():
    report, modules = loaded_after(["catalog", "gpus", "--json"])
    assert report["code"] == 0
    assert any(g["id"] == "h200" for g in json.loads(report["stdout"]))
    assert "disagg_decider.catalog_cli" in modules
    assert [m for m in heavy(modules) if m != "disagg_decider.catalog_cli"] == []


EXIT_PROBE = """
import atexit, contextlib, gc, io, sys
# atexit runs handlers last-registered first: this one runs after the CLI's own
atexit.register(lambda: sys.stderr.write(f"frozen at exit: {gc.get_freeze_count()}"))
sys.argv = ["decide", "--workload", sys.argv[1], "--format", "json"]
from disagg_decider.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main()
"""


def test_the_process_skips_the_cycle_collectors_last_pass_at_exit():
    """Python's shutdown collects every generation, ~35-100 ms after a verdict; `cli.main` moves
    the survivors out of the collector's reach at exit (`gc.freeze`) instead."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, str(EXAMPLE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    frozen = int(proc.stderr.rsplit("frozen at exit: ", 1)[1])
    assert frozen > 10_000


COLLECTOR_PROBE = """
import contextlib, gc, io, json, sys
from disagg_decider import cli_lazy
from disagg_decider.cli import main
seen = {}
collections = [0]
def count(phase, info):
    collections[0] += phase == "start"
gc.callbacks.append(count)
def probe_command(app):
    app.command("probe")(lambda: seen.__setitem__("subcommand", gc.isenabled()))
cli_lazy.SUBCOMMANDS["probe"] = probe_command
for args in (["--workload", sys.argv[1], "--format", "json"], ["probe"]):
    sys.argv = ["decide", *args]
    before = collections[0]
    with contextlib.redirect_stdout(io.StringIO()):
        main()
    seen[args[0] + " collections"] = collections[0] - before
    seen[args[0] + " enabled after"] = gc.isenabled()
print(json.dumps(seen))
"""


def test_the_collector_pauses_for_a_verdict_only_and_comes_back():
    """A verdict runs without cycle-collector passes; a subcommand (`decide mcp` serves for
    hours) runs with the collector on, and `main` leaves it on for an in-process caller."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "skill")}
    proc = subprocess.run(
        [sys.executable, "-c", COLLECTOR_PROBE, str(EXAMPLE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    assert seen["--workload collections"] == 0
    assert seen["--workload enabled after"] is True
    assert seen["subcommand"] is True
    assert seen["probe enabled after"] is True


def test_a_jsonl_batch_parses_no_yaml_and_so_never_imports_pyyaml(tmp_path):
    """The rulebook and catalogs come from their JSON snapshot and the workloads are JSON:
    `yamlio` imports PyYAML only for a document it reads."""
    from tests.golden_outputs import workload_mix  # puts benchmarks/ on the path

    lines = [json.dumps(w.model_dump(mode="json", exclude_none=True)) for w in workload_mix(3)]
    fleet = tmp_path / "fleet.jsonl"
    fleet.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report, modules = loaded_after(["batch", str(fleet), "-f", "csv", "-j", "1", "-q"])
    assert report["code"] == 0
    assert report["stdout"].count("\n") == 4  # the header and three rows
    assert "disagg_decider.yamlio" in modules and "yaml" not in modules
    report, modules = loaded_after(["batch", str(EXAMPLE), "-f", "csv", "-j", "1", "-q"])
    assert report["code"] == 0 and "yaml" in modules  # a YAML workload still reads
