"""`decide render`: regenerate the skill files and example reports, or check they are current.

Imports only typer and pathlib at module level so that `decide --workload` stays fast; jinja2
and the calculator load inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def render_command(
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Write nothing; exit 1 and name the stale files if outputs/ differs from what "
            "the current rules and code produce (CI runs this).",
        ),
    ] = False,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Where the generated files live.")
    ] = Path("outputs"),
    examples_dir: Annotated[
        Path,
        typer.Option("--examples-dir", help="Workloads to report on: one report per *.yaml."),
    ] = Path("examples"),
    rules_dir: Annotated[
        Path | None,
        typer.Option(
            "--rules-dir",
            help="Render from the rulebook in this folder (*.yaml) instead of the shipped one.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Also overwrite files `decide render` did not write.")
    ] = False,
) -> None:
    """Regenerate outputs/: the skill file, the Agent Skill folder and one report per example.

    Writes outputs/skill-disaggregation-decider.md, the skill folder
    outputs/disaggregation-decider/ (SKILL.md, references/*.md, evals.yaml) and
    outputs/reports/<example>.md, and removes generated files it no longer produces; rendering
    the shipped rulebook into a checkout's outputs/ also refreshes the package's
    shipped_data.jsonl (the shipped rulebook and catalogs as JSON, which load faster than their
    YAML). Example: decide render --check
    """
    from disagg_decider import shipped_data
    from disagg_decider.render.outputs import (
        expected_outputs,
        load_rulebook,
        stale_outputs,
        write_outputs,
    )
    from disagg_decider.rules.loader import rulebook_dir

    expected = expected_outputs(load_rulebook(rules_dir), examples_dir)
    snapshot = _shown(shipped_data.SNAPSHOT)
    # The snapshot goes with the repository's own outputs (the shipped rulebook rendered into
    # <checkout>/outputs); renders elsewhere (tests, --rules-dir) leave it alone.
    shipped_rules = rules_dir is None and out_dir.resolve() == _REPOSITORY_OUTPUTS
    if check:
        status = stale_outputs(expected, out_dir)
        if shipped_rules and not shipped_data.snapshot_current(rulebook_dir()):
            typer.echo(f"stale: {snapshot} (the shipped YAML files as JSON)")
            if not status.stale:
                typer.echo("run `decide render` to regenerate it")
                raise typer.Exit(code=1)
        if status.stale:
            for rel in status.changed:
                typer.echo(f"stale: {out_dir / rel}")
            for rel in status.missing:
                typer.echo(f"missing: {out_dir / rel}")
            for rel in status.orphaned:
                typer.echo(f"orphaned (no longer generated): {out_dir / rel}")
            typer.echo("run `decide render` to regenerate them")
            raise typer.Exit(code=1)
        typer.echo(f"{out_dir}: {len(expected)} generated files are current")
        return
    written, removed = write_outputs(expected, out_dir, force)
    try:
        if shipped_rules and shipped_data.write_snapshot(rulebook_dir()):
            typer.echo(f"wrote {snapshot}")
    except OSError as exc:  # an installed package's folder may be read-only; only speed is lost
        typer.echo(f"warning: could not write {snapshot}: {exc.strerror or exc}", err=True)
    for rel in written:
        typer.echo(f"wrote {out_dir / rel}")
    for rel in removed:
        typer.echo(f"removed {out_dir / rel}")
    if not written and not removed:
        typer.echo(f"{out_dir}: {len(expected)} generated files already current")


_REPOSITORY_OUTPUTS = Path(__file__).resolve().parents[3] / "outputs"  # in a checkout


def _shown(path: Path) -> Path:
    """`path` relative to the working folder where it lies below it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path
