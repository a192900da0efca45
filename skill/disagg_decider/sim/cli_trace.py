"""`decide trace summarize`: percentiles, rate and burstiness of a trace, and with `--classes`
the traffic fragment of request classes (`sim.trace_classes` does the clustering).

Module-level imports stay light (typer only); the trace readers, rich and yaml load inside.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from disagg_decider.cli_common import choices
from disagg_decider.errors import UserError
from disagg_decider.outfiles import check_target
from disagg_decider.userfiles import TRACE_MAX_BYTES

TRACE_MAX_MB = TRACE_MAX_BYTES // 1_000_000


TraceFormat = choices("TraceFormat", "text", "json")


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


def trace_summarize(
    file: Annotated[
        Path,
        typer.Argument(
            help="Azure CSV (TIMESTAMP,ContextTokens,GeneratedTokens) or Mooncake JSONL."
        ),
    ],
    write_workload: Annotated[
        Path | None,
        typer.Option(
            "--write-workload", help="Write a workload YAML from the trace's percentiles and rate."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model id for --write-workload (decide catalog models)."),
    ] = None,
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="GPU id for --write-workload (decide catalog gpus).")
    ] = None,
    gpus: Annotated[
        int, typer.Option("--gpus", min=1, help="Cluster size for --write-workload.")
    ] = 8,
    ttft_ms: Annotated[
        float,
        typer.Option(
            "--ttft-ms", help="p99 TTFT target (default: MLPerf Llama-2-70B server, 2000)."
        ),
    ] = 2000.0,
    tpot_ms: Annotated[
        float,
        typer.Option(
            "--tpot-ms", help="p99 TPOT target (default: MLPerf Llama-2-70B server, 200)."
        ),
    ] = 200.0,
    classes: Annotated[
        str | None,
        typer.Option(
            "--classes",
            help="Cluster the prompts into request classes: 'auto' (natural breaks in log "
            "prompt length; k in 1..4, split only where adjacent classes are separated by "
            "Ashman's D >= 4 and hold >= 1% of requests) or a number 1..8. Prints the "
            "workload's `traffic` block with `classes` as YAML (or writes it to --out); "
            "--write-workload then writes the classes too.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the --classes traffic fragment (YAML) here."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite --write-workload or --out if it exists.")
    ] = False,
    fmt: Annotated[
        TraceFormat, typer.Option("--format", "-f", help="text or json.")
    ] = TraceFormat.text,
    max_trace_mb: Annotated[
        int,
        typer.Option(
            "--max-trace-mb",
            min=1,
            help=f"Refuse trace files larger than this (default {TRACE_MAX_MB} MB).",
        ),
    ] = TRACE_MAX_MB,
) -> None:
    """Percentiles, mean rate and burstiness of a trace; optionally request classes and a
    workload file from them.

    Example: decide trace summarize AzureLLMInferenceTrace_conv.csv --write-workload conv.yaml
    --model llama-3.3-70b --gpu h100

    Example: decide trace summarize mooncake.jsonl --classes auto --out traffic.yaml
    """
    from disagg_decider.sim import trace as traces

    k = classes_option(classes)
    if out is not None and classes is None:
        raise UserError("--out writes the request classes; add --classes auto (or a number)")
    if write_workload is not None:
        if model is None or gpu is None:
            raise UserError(
                "--write-workload needs --model and --gpu, e.g. --model llama-3.3-70b --gpu h100"
            )
        check_target(write_workload, force, "--write-workload")
    if out is not None:
        check_target(out, force, "--out")
    trace = traces.load(file, max_bytes=max_trace_mb * 1_000_000)
    summary = traces.summarize(trace)
    clustering = fragment = None
    if classes is not None:
        from disagg_decider.sim import trace_classes

        clustering = trace_classes.cluster(trace, k)
        fragment = {"traffic": trace_classes.traffic_fragment(clustering, summary.mean_rate_per_s)}
        check_fragment(fragment, out or Path("<stdout>"))
    if out is not None:
        from disagg_decider.outfiles import write_text

        write_text(out, fragment_yaml(summary, clustering, fragment), force, "--out")
        print(f"wrote {out}", file=sys.stderr)
    if write_workload is not None:
        import yaml

        from disagg_decider.workload import parse_workload, resolve

        data = traces.workload_from_summary(
            summary, write_workload.stem, model, gpu, gpus, ttft_ms, tpot_ms
        )
        if fragment is not None:
            data["traffic"] = fragment["traffic"]
        resolve(parse_workload(data, str(write_workload)))  # unknown model or GPU: exit 2 here
        from disagg_decider.outfiles import write_text

        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=False)
        write_text(write_workload, text, force, "--write-workload")
        print(f"wrote {write_workload}", file=sys.stderr)
    if fmt is TraceFormat.json:
        payload = summary.as_dict()
        if clustering is not None:
            payload["clustering"] = clustering.as_dict()
            payload["traffic"] = fragment["traffic"]
        sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False) + "\n")
        return
    if clustering is not None and out is None:  # stdout carries the fragment, pipeable
        sys.stdout.write(fragment_yaml(summary, clustering, fragment))
        return
    _print_summary(summary, clustering)


def _print_summary(s, clustering=None) -> None:
    from rich.console import Console
    from rich.table import Table

    from disagg_decider.render.text import terminal_text

    console = Console()
    console.print(
        f"[bold]{terminal_text(s.source)}[/] ({s.kind}): {s.requests:,} requests over "
        f"{s.duration_s:,.0f} s, "
        f"mean rate {s.mean_rate_per_s:.3g} req/s, inter-arrival CV {s.interarrival_cv:.2f} "
        f"(1 = Poisson), prefix-cache hits {s.prefix_hit_rate:.1%} of prompt tokens",
        highlight=False,
    )
    table = Table(title_justify="left")
    for col in ("tokens", "p50", "p90", "p99", "mean", "max"):
        table.add_column(col, justify="right" if col != "tokens" else "left")
    for name, d in (("prompt", s.prompt), ("output", s.output)):
        table.add_row(name, *(f"{d[k]:,.0f}" for k in ("p50", "p90", "p99", "mean", "max")))
    console.print(table)
    if clustering is not None:
        print_classes(console, clustering)
