"""`decide render` and `--check`: the committed outputs are current, and drift is caught."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from disagg_decider.render.outputs import (
    MARKER,
    expected_outputs,
    load_rulebook,
    stale_outputs,
)
from disagg_decider.rules.loader import shipped
from tests.conftest import ROOT, run_cli


def _run(*args: str | Path) -> subprocess.CompletedProcess:
    return run_cli(*map(str, args))


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """rules/, examples/ and outputs/ copied, so a test may change them."""
    for name in ("rules", "examples", "outputs"):
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


def _dirs(base: Path) -> list[str | Path]:
    return [
        "--rules-dir",
        base / "rules",
        "--out-dir",
        base / "outputs",
        "--examples-dir",
        base / "examples",
    ]


def test_committed_outputs_are_current() -> None:
    expected = expected_outputs(shipped(), ROOT / "examples")
    status = stale_outputs(expected, ROOT / "outputs")
    assert status.stale == [], "run `decide render` and commit outputs/"
    assert "skill-disaggregation-decider.md" in expected
    assert "disaggregation-decider/SKILL.md" in expected
    stems = {p.stem for p in (ROOT / "examples").glob("*.yaml")}
    assert {f"reports/{s}.md" for s in stems} <= set(expected)


def test_check_cli_passes_on_the_repository() -> None:
    done = _run("render", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "current" in done.stdout


def test_parameter_change_is_stale_until_rendered(repo_copy: Path) -> None:
    rules = repo_copy / "rules/disaggregation.yaml"
    text = rules.read_text()
    assert "  min_gain:\n    value: 1.1\n" in text
    rules.write_text(
        text.replace("  min_gain:\n    value: 1.1\n", "  min_gain:\n    value: 1.15\n")
    )

    before = _run("render", "--check", *_dirs(repo_copy))
    assert before.returncode == 1, before.stdout + before.stderr
    assert "skill-disaggregation-decider.md" in before.stdout
    assert "disaggregation-decider/SKILL.md" in before.stdout
    # rag-8k-h200's gain sits between 1.1 and 1.15, so DSG007 stops firing: its report changes.
    assert "reports/rag-8k-h200-rdma-dynamo.md" in before.stdout
    assert "decide render" in before.stdout

    written = _run("render", *_dirs(repo_copy))
    assert written.returncode == 0, written.stdout + written.stderr
    assert "wrote" in written.stdout

    after = _run("render", "--check", *_dirs(repo_copy))
    assert after.returncode == 0, after.stdout + after.stderr
    skill = (repo_copy / "outputs/skill-disaggregation-decider.md").read_text()
    assert "| `min_gain` | 1.15 |" in skill
    assert "(1.15 ratio)" in skill


def test_unchanged_copy_is_current(repo_copy: Path) -> None:
    done = _run("render", "--check", *_dirs(repo_copy))
    assert done.returncode == 0, done.stdout + done.stderr


def test_edited_output_and_missing_output_are_named(repo_copy: Path) -> None:
    report = repo_copy / "outputs/reports/two-gpu-colocate.md"
    report.write_text(report.read_text() + "hand edit\n")
    (repo_copy / "outputs/disaggregation-decider/SKILL.md").unlink()
    done = _run("render", "--check", *_dirs(repo_copy))
    assert done.returncode == 1
    assert "stale: " in done.stdout and "two-gpu-colocate.md" in done.stdout
    assert "missing: " in done.stdout and "SKILL.md" in done.stdout


def test_orphaned_report_is_stale_then_removed(repo_copy: Path) -> None:
    (repo_copy / "examples/two-gpu-colocate.yaml").unlink()
    done = _run("render", "--check", *_dirs(repo_copy))
    assert done.returncode == 1
    assert "orphaned" in done.stdout and "two-gpu-colocate.md" in done.stdout
    assert _run("render", *_dirs(repo_copy)).returncode == 0
    assert not (repo_copy / "outputs/reports/two-gpu-colocate.md").exists()


def test_hand_written_file_is_not_overwritten_without_force(repo_copy: Path) -> None:
    mine = repo_copy / "outputs/skill-disaggregation-decider.md"
    mine.write_text("# my own notes\n")
    refused = _run("render", *_dirs(repo_copy))
    assert refused.returncode == 2
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert mine.read_text() == "# my own notes\n"
    forced = _run("render", "--force", *_dirs(repo_copy))
    assert forced.returncode == 0
    assert MARKER in mine.read_text()


def test_bad_rules_dir_exits_2(tmp_path: Path) -> None:
    done = _run("render", "--check", "--rules-dir", tmp_path)
    assert done.returncode == 2
    assert "no *.yaml rule files" in done.stderr


def test_rules_dir_replaces_the_shipped_rulebook(repo_copy: Path) -> None:
    (repo_copy / "rules/orchestrator.yaml").unlink()
    loaded = load_rulebook(repo_copy / "rules")
    assert not any(r.id.startswith("ORC") for r in loaded.book.rules)
    expected = expected_outputs(loaded, repo_copy / "examples")
    assert "ORC001" not in expected["skill-disaggregation-decider.md"]


def test_ci_runs_the_check() -> None:
    ci = (ROOT / ".ci/run").read_text().splitlines()
    pytest_line = next(i for i, line in enumerate(ci) if "-m pytest" in line)
    assert ci[pytest_line + 1] == ".venv/bin/decide render --check"


def test_skill_file_no_longer_generated_is_orphaned_then_removed(repo_copy: Path) -> None:
    """A reference file an older render wrote is reported and removed; a hand-written one stays."""
    folder = repo_copy / "outputs/disaggregation-decider/references"
    old = folder / "retired.md"
    old.write_text(f"# Retired\n\n<!-- {MARKER} from the rulebook. -->\n")
    mine = folder / "my-notes.md"
    mine.write_text("# My notes\n")
    done = _run("render", "--check", *_dirs(repo_copy))
    assert done.returncode == 1
    assert "orphaned" in done.stdout and "retired.md" in done.stdout
    assert "my-notes.md" not in done.stdout
    assert _run("render", *_dirs(repo_copy)).returncode == 0
    assert not old.exists() and mine.read_text() == "# My notes\n"
