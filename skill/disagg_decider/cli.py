"""The `decide` command line.

`decide --workload w.yaml` prints the verdict; subcommands list catalogs, manage the rulebook,
simulate, render reports and emit deployments. Every user error exits with code 2 and a
message naming the file, field or id; `--json`-style output goes to stdout only.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from disagg_decider import __version__, catalog
from disagg_decider.deploy.cli import deploy_command
from disagg_decider.errors import UserError
from disagg_decider.mcp_cli import mcp_app
from disagg_decider.render.cli import render_command
from disagg_decider.rules.cli import rules_app, schema_command
from disagg_decider.sim.cli import register as register_simulator
from disagg_decider.verdict import Verdict

app = typer.Typer(
    name="decide",
    help=(
        "Should prefill and decode run on separate GPU pools (NVIDIA Dynamo, llm-d) or stay "
        "colocated? Give a workload file (model, prompt/output lengths, rate, p99 TTFT/TPOT "
        "targets, GPUs, network, team) and get the verdict, the reasons (rules that fired), "
        "the numbers for both modes and the pool sizes."
    ),
    # \b keeps click from re-wrapping the examples into one paragraph
    epilog=(
        "\b\nExamples:\n"
        "  decide --workload examples/rag-8k-h200-rdma-dynamo.yaml\n"
        "  decide -w w.yaml --format json --set min_gain=1.2\n"
        "  decide batch examples/ --format jsonl\n"
        "  decide catalog models\n"
        "  decide schema workload > workload.schema.json"
    ),
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def out():
    """The stdout console; rich is imported only when something is printed with it."""
    from rich.console import Console

    return Console()


def err():
    from rich.console import Console

    return Console(stderr=True)


class Format(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """`--set name=value` pairs; values are typed later against the parameter."""
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--set {pair!r}: expected PARAMETER=VALUE, e.g. --set min_gain=1.2")
        result[name.strip()] = value.strip()
    return result


def write_output(text: str, out_path: Path | None, force: bool) -> None:
    """Print, or write a file; an existing file is only replaced with --force."""
    if out_path is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    if out_path.is_dir():
        raise UserError(f"--out {out_path}: is a directory; give a file name inside it")
    if out_path.exists() and not force:
        raise UserError(f"{out_path}: already exists; pass --force to overwrite it")
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--out {out_path}: cannot write ({exc.strerror})") from None
    err().print(f"wrote {out_path}")


def plain_text(print_into: Callable[[Any], None], width: int) -> str:
    """What `print_into(console)` prints, as plain text for a file (no colours, fixed width)."""
    from rich.console import Console

    console = Console(record=True, width=width, file=io.StringIO())
    print_into(console)
    return console.export_text()


def verdict_json(verdict: Verdict) -> str:
    return json.dumps(verdict.model_dump(mode="json"), indent=2, allow_nan=False)


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    workload: Annotated[
        Path | None,
        typer.Option("--workload", "-w", metavar="FILE", help="Workload YAML (see examples/)."),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="text (default), json or markdown.")
    ] = Format.text,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="PARAM=VALUE",
            help="Override a rule parameter, e.g. --set min_gain=1.2 (repeatable).",
        ),
    ] = None,
    rules: Annotated[
        list[Path] | None,
        typer.Option(
            "--rules",
            metavar="FILE",
            help="Extra rule file: adds rules, or replaces shipped ones with the same id.",
        ),
    ] = None,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        out().print(f"disagg-decider {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is not None:
        return
    if workload is None:
        out().print(ctx.get_help())
        raise typer.Exit(code=2)
    from disagg_decider.decide import decide
    from disagg_decider.workload import load_workload

    w = load_workload(workload)
    verdict = decide(
        w, base_dir=workload.parent, rule_files=rules or [], overrides=parse_sets(sets or [])
    )
    if fmt is Format.json:
        write_output(verdict_json(verdict), out_file, force)
    elif fmt is Format.markdown:
        from disagg_decider.render.report import render_report
        from disagg_decider.workload import resolve

        write_output(render_report(verdict, resolve(w, workload.parent)), out_file, force)
    elif out_file is not None:
        text = plain_text(lambda console: print_verdict(verdict, console), 110)
        write_output(text, out_file, force)
    else:
        print_verdict(verdict, out())


HEADLINES = {
    "colocate": "COLOCATE",
    "disaggregate": "DISAGGREGATE",
    "dynamo": "DISAGGREGATE on NVIDIA Dynamo",
    "llm-d": "DISAGGREGATE on llm-d",
}


def print_verdict(v: Verdict, console) -> None:
    """The verdict for a terminal: the call, the summary, both modes, the rules that fired."""
    from rich.table import Table

    color = "green" if v.disaggregate else "cyan"
    headline = HEADLINES.get(v.decision, v.decision.upper())
    console.print(f"[bold {color}]{headline}[/]  {v.workload}  ({v.model} on {v.gpu})")
    console.print(v.summary, highlight=False)
    console.print()
    table = Table(title="Both modes on the same GPUs, same p99 targets", title_justify="left")
    for col in ("", "colocated", "disaggregated"):
        table.add_column(col, justify="right" if col else "left")
    c, d = v.colocated, v.disaggregated
    d_layout = (
        f"{d.prefill_replicas}P x {d.prefill_layout} + {d.decode_replicas}D x {d.decode_layout}"
    )
    rows = [
        ("layout (replicas x TP)", f"{c.replicas} x {c.layout}", d_layout),
        ("GPUs sized for the rate", _gpus(c.gpus, c.fits_cluster), _gpus(d.gpus, d.fits_cluster)),
        ("meets both p99 SLOs", _yn(c.feasible), _yn(d.feasible)),
        ("fits the cluster", _yn(c.fits_cluster), _yn(d.fits_cluster)),
        ("max req/s on the cluster", _num(c.max_rate_per_s, 2), _num(d.max_rate_per_s, 2)),
        ("TTFT p99 ms", _num(c.ttft_p99_ms), _num(d.ttft_p99_ms)),
        ("TPOT p99 ms", _num(c.tpot_p99_ms), _num(d.tpot_p99_ms)),
        ("goodput req/s per GPU", f"{c.goodput_per_gpu:.3f}", f"{d.goodput_per_gpu:.3f}"),
        (
            "$ per 1M tokens",
            _num(c.cost_per_million_tokens_usd, 3),
            _num(d.cost_per_million_tokens_usd, 3),
        ),
        ("$ per year", f"{c.cost_per_year_usd:,.0f}", f"{d.cost_per_year_usd:,.0f}"),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    _print_key_figures(v, console)
    if v.fired_rules:
        console.print()
        console.print("[bold]Rules that fired[/] (weight, the way each pushes)")
        rules = Table.grid(padding=(0, 2))
        for col in ("id", "weight", "pushes", "title"):
            rules.add_column(col, justify="right" if col == "weight" else "left")
        for f in v.fired_rules:
            rules.add_row(f.id, "VETO" if f.kind == "veto" else f"+{f.weight:g}", f.pushes, f.title)
        console.print(rules, highlight=False)
        scores = ", ".join(f"{k} {s:g}" for k, s in v.scores.items() if s)
        how = f"`decide rules show {v.fired_rules[0].id}` explains one"
        console.print(f"[dim]scores: {scores or 'none'}; {how}[/]")
    for note in v.overrides_applied:
        console.print(f"[dim]override {note}[/]", highlight=False)
    if v.warnings:
        console.print()
    for w in v.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)


def _print_key_figures(v: Verdict, console) -> None:
    """The per-request figures behind the call, one labelled line each."""
    from rich.table import Table

    m = v.metrics
    link = f"{m.kv_transfer_gb_per_s:.1f} GB/s"
    if m.kv_transfer_path == "network":
        link += ", RDMA" if m.kv_transfer_rdma else ", TCP, no RDMA"
    crossover = (
        f"disaggregation wins above {m.crossover_prompt_tokens:,} prompt tokens"
        if m.crossover_prompt_tokens
        else "no crossover prompt length found"
    )
    figures = [
        (
            "KV cache",
            f"{m.kv_bytes_per_token:,.0f} B/token, {m.kv_bytes_per_request / 1e6:,.1f} MB "
            f"per request at {m.effective_prompt_tokens:,.0f} uncached prompt tokens",
        ),
        (
            "KV transfer",
            f"{m.kv_transfer_ms:.2f} ms per request over {m.kv_transfer_path} ({link})",
        ),
        ("prefill", f"{m.prefill_ms:.1f} ms; decode step {m.decode_step_ms:.1f} ms"),
        ("gain", f"{_num(m.gain, 2)}x goodput per GPU; {crossover}"),
        (
            "routing" if v.disaggregate else "if split",
            f"prompts with at least {v.conditional_disagg_threshold_tokens:,} uncached tokens "
            "go to the prefill pool (conditional disaggregation)",
        ),
    ]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, text in figures:
        grid.add_row(label, text)
    console.print(grid, highlight=False)


def _gpus(count: int, fits_cluster: bool) -> str:
    """A mode that does not fit is capped at the cluster: say so rather than print a bare count."""
    return str(count) if fits_cluster else f"{count} (all, short)"


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


# --- batch ------------------------------------------------------------------------------------


class BatchFormat(StrEnum):
    table = "table"
    jsonl = "jsonl"
    json = "json"


@app.command("batch")
def batch_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="FILE_OR_DIR", help="Workload files, or folders of *.yaml."),
    ],
    fmt: Annotated[
        BatchFormat,
        typer.Option(
            "--format", "-f", help="table (default), jsonl (one verdict per line) or json."
        ),
    ] = BatchFormat.table,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="PARAM=VALUE", help="Override a rule parameter for every workload."
        ),
    ] = None,
    rules: Annotated[
        list[Path] | None,
        typer.Option("--rules", metavar="FILE", help="Extra rule file, as for `decide`."),
    ] = None,
) -> None:
    """Decide many workloads at once: the fast path for sweeps and scripts.

    Workloads that share a model, GPU and engine are searched together, so hundreds of
    verdicts take about a second. Each verdict equals `decide --workload FILE --format json`.
    Every file is read and checked before anything is computed.

    \b
    Examples:
      decide batch examples/
      decide batch sweep/*.yaml --format jsonl > verdicts.jsonl
    """
    from disagg_decider.decide import decide_many
    from disagg_decider.workload import load_workload

    files = _workload_files(paths)
    workloads = [load_workload(f) for f in files]
    verdicts = decide_many(
        workloads,
        base_dir=[f.parent for f in files],
        rule_files=rules or [],
        overrides=parse_sets(sets or []),
    )
    if fmt is BatchFormat.json:
        items = [
            {"file": str(f), **v.model_dump(mode="json")}
            for f, v in zip(files, verdicts, strict=True)
        ]
        write_output(json.dumps(items, indent=2, allow_nan=False), out_file, force)
    elif fmt is BatchFormat.jsonl:
        lines = [
            json.dumps({"file": str(f), **v.model_dump(mode="json")}, allow_nan=False)
            for f, v in zip(files, verdicts, strict=True)
        ]
        write_output("\n".join(lines), out_file, force)
    elif out_file is None:
        out().print(_batch_table(files, verdicts))
    else:
        table = _batch_table(files, verdicts)
        write_output(plain_text(lambda console: console.print(table), 140), out_file, force)


def _workload_files(paths: list[Path]) -> list[Path]:
    """The files named, with folders expanded to their *.yaml and *.yml files, sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                raise UserError(f"{path}: folder has no *.yaml or *.yml workload files")
            files.extend(found)
        else:
            files.append(path)
    return files


def _batch_table(files: list[Path], verdicts: list[Verdict]):
    from rich.table import Table

    table = Table(title=f"{len(verdicts)} workloads", title_justify="left")
    table.add_column("workload", overflow="fold")
    table.add_column("decision")
    for col in ("gain", "colocated", "prefill + decode", "crossover"):
        table.add_column(col, justify="right", no_wrap=True)
    for f, v in zip(files, verdicts, strict=True):
        c, d = v.colocated, v.disaggregated
        crossover = v.metrics.crossover_prompt_tokens
        table.add_row(
            f.stem,
            v.decision,
            _num(v.metrics.gain, 2),
            f"{c.replicas}x{c.layout}",
            f"{d.prefill_replicas}x{d.prefill_layout} + {d.decode_replicas}x{d.decode_layout}",
            f"{crossover:,}" if crossover else "-",
        )
    return table


# --- catalog ----------------------------------------------------------------------------------


CATALOG_COLUMNS = {
    "gpus": [
        "bf16_dense_tflops",
        "fp8_dense_tflops",
        "hbm_gb",
        "hbm_tb_per_s",
        "scaleup_gb_per_s",
        "scaleup_domain_gpus",
        "scaleout_gbps",
    ],
    "models": [
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "head_dim",
        "params_total_b",
        "params_active_b",
        "max_context_tokens",
    ],
    "links": ["kind", "gbps", "rdma", "latency_us", "efficiency"],
}


class CatalogKind(StrEnum):
    gpus = "gpus"
    models = "models"
    links = "links"


@app.command("catalog")
def catalog_command(
    kind: Annotated[CatalogKind, typer.Argument(help="gpus, models or links")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON with sources.")] = False,
) -> None:
    """List the GPUs, models and network links the calculator knows, with their figures."""
    table_of = {"gpus": catalog.gpus, "models": catalog.models, "links": catalog.links}
    records = {r.id: r for r in table_of[kind.value]().values()}
    if as_json:
        payload = [r.model_dump(mode="json") for r in records.values()]
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    fields = CATALOG_COLUMNS[kind.value]
    from rich.table import Table

    table = Table(title=f"catalog: {kind.value} (sources: --json)", title_justify="left")
    table.add_column("id")
    for f in fields:
        table.add_column(f, justify="right")
    if kind is CatalogKind.models:
        table.add_column("attention / MoE")
    for r in records.values():
        row = [r.id, *("-" if getattr(r, f) is None else str(getattr(r, f)) for f in fields)]
        if kind is CatalogKind.models:
            row.append(_model_shape(r))
        table.add_row(*row)
    out().print(table)


def _model_shape(m: catalog.ModelSpec) -> str:
    parts = ["MLA" if m.mla else "GQA"]
    if m.sliding_window_layers:
        parts.append(f"{m.sliding_window_layers} SWA-{m.sliding_window} layers")
    if m.moe:
        parts.append(f"MoE {m.moe.experts_active}/{m.moe.experts}")
    return ", ".join(parts)


# --- the other subcommands live beside what they drive ------------------------------------

app.add_typer(rules_app, name="rules")
app.command("schema")(schema_command)
app.command("deploy")(deploy_command)
app.command("render")(render_command)
app.add_typer(mcp_app, name="mcp")
register_simulator(app)  # decide simulate, decide sweep, decide trace summarize


def readable_metavars(command) -> None:
    """Name values FILE, DIR, N, NUMBER, TEXT in --help, where typer 0.29 prints Python types
    (`<list[Path]>`, `<int range>`); a metavar a module set itself is kept."""
    from typing import get_args

    for param in command.params:
        descriptor = getattr(param, "type_descriptor", None)
        if param.param_type_name == "argument" and descriptor is not None:
            param.metavar = param.metavar or (param.name or "value").upper()
            if not descriptor.is_choice:  # the name says it all; choices keep <a|b|c>
                param.display_type_rich = lambda ctx: None
            continue
        if param.metavar is not None or descriptor is None or getattr(param, "is_flag", False):
            continue
        if descriptor.is_choice:
            continue  # typer's <text|json> already lists the values
        element = get_args(descriptor.annotation)[0] if descriptor.is_list else None
        if descriptor.is_path or element is Path:
            param.metavar = "DIR" if "dir" in (param.name or "") else "FILE"
        else:
            kind = element or descriptor.annotation
            param.metavar = {int: "N", float: "NUMBER"}.get(kind, "TEXT")
    for sub in getattr(command, "commands", {}).values():
        readable_metavars(sub)


def main() -> None:
    """Entry point: user errors become a message and exit code 2, never a traceback."""
    try:
        # without standalone mode click returns the code of a typer.Exit instead of exiting
        command = typer.main.get_command(app)
        readable_metavars(command)
        code = command(prog_name="decide", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except UserError as exc:
        from rich.markup import escape

        # The message is the user's text (paths, ids, "[plot]"), never markup.
        err().print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:  # a path the user gave that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        from rich.markup import escape

        message = escape(f"{where}{exc.strerror or exc}")
        err().print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code
        import click

        # typer >= 0.23 vendors click: its usage errors are not the installed click's
        if isinstance(exc, click.ClickException | typer.TyperException) and hasattr(exc, "show"):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
