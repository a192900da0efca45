"""`decide trace summarize --classes`: parsing the option, checking and writing the traffic
fragment, and the classes table (`sim.trace_classes` does the clustering)."""

from __future__ import annotations

from pathlib import Path

from disagg_decider.errors import UserError


def classes_option(value: str | None) -> int | None:
    """`--classes`: None or 'auto' choose k; a number fixes it."""
    from disagg_decider.sim.trace_classes import MAX_CLASSES

    if value is None or value.strip().lower() == "auto":
        return None
    try:
        k = int(value)
    except ValueError:
        k = 0
    if not 1 <= k <= MAX_CLASSES:
        raise UserError(
            f"--classes {value!r}: expected 'auto' or a whole number from 1 to {MAX_CLASSES}"
        )
    return k


def check_fragment(fragment: dict, where: Path) -> None:
    """The fragment must load as a workload's traffic block (shares sum to 1, p99 >= p50)."""
    from pydantic import ValidationError

    from disagg_decider.workload import Traffic

    try:
        Traffic.model_validate(fragment["traffic"])
    except ValidationError as exc:  # a bug here, not the user's: say what failed
        raise UserError(f"{where}: the classes do not form a valid traffic block ({exc})") from None


def fragment_yaml(summary, clustering, fragment: dict) -> str:
    import yaml

    from disagg_decider.render.text import terminal_text

    head = [
        f"# Request classes from {terminal_text(Path(summary.source).name)} ({summary.kind}): "
        f"{summary.requests} requests over {summary.duration_s:.0f} s.",
        f"# {clustering.criterion}.",
    ]
    if clustering.ashman_d:
        head.append(
            "# Ashman's D between adjacent classes: "
            + ", ".join(f"{d:.1f}" for d in clustering.ashman_d)
            + "."
        )
    if all(c.prefix_cache_hit_rate is None for c in clustering.classes):
        head.append("# The trace has no block hashes: prefix_cache_hit_rate is left at 0.")
    head.append("# Paste under a workload's top level (replaces its traffic block).")
    body = yaml.safe_dump(fragment, sort_keys=False, allow_unicode=False)
    return "\n".join(head) + "\n" + body


def print_classes(console, clustering) -> None:
    """The request classes under the summary's percentile table."""
    from rich.table import Table

    console.print(f"Request classes: {clustering.criterion}.", highlight=False)
    classes = Table(title_justify="left")
    for col in ("class", "share", "prompt p50", "prompt p99", "output p50", "output p99"):
        classes.add_column(col, justify="right")
    classes.add_column("prefix hits", justify="right")
    for i, c in enumerate(clustering.classes, start=1):
        hit = "-" if c.prefix_cache_hit_rate is None else f"{c.prefix_cache_hit_rate:.1%}"
        classes.add_row(
            str(i),
            f"{c.share:.1%}",
            *(f"{x:,.0f}" for x in (c.prompt_p50, c.prompt_p99, c.output_p50, c.output_p99)),
            hit,
        )
    console.print(classes)
