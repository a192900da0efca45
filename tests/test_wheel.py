"""The installed package (a built wheel, as `pip install .` makes) works outside the checkout.

Rules and catalogs must ship as package data. CI installs the project into a fresh virtual
environment; this test runs that installation from an empty directory with no PYTHONPATH.
It is skipped where the package is not installed (a plain checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _installed_location() -> str | None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import disagg_decider, sys; sys.stdout.write(disagg_decider.__file__)"
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    return proc.stdout if proc.returncode == 0 else None


def test_installed_wheel_decides_from_anywhere(tmp_path):
    location = _installed_location()
    if location is None or str(ROOT / "skill") in location:
        pytest.skip("disagg-decider is not installed as a package in this interpreter")
    decide = Path(sys.executable).with_name("decide")
    if not decide.exists():
        decide = Path(shutil.which("decide") or "decide")
    example = tmp_path / "w.yaml"
    shutil.copy(ROOT / "examples" / "tcp-25gbe-colocate.yaml", example)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(decide), "--workload", str(example), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)
    assert "site-packages" in location
    assert any(r["id"].startswith("DSG") for r in verdict["fired_rules"])
    rules = subprocess.run(
        [str(decide), "catalog", "links", "--json"], capture_output=True, text=True, env=env
    )
    assert rules.returncode == 0 and "ib-ndr-400" in rules.stdout
