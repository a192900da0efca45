"""The verdict for a terminal: the call, the summary, both modes side by side, the rules.

`decide --workload` prints it; the batch table shares its layout and gain texts. A mode that
meets no target prints "-" wherever a number would stand, and a cluster short of the rate
reads "needs N, has M".
"""

from __future__ import annotations

from disagg_decider.layout_text import layout_sentence
from disagg_decider.verdict import Verdict

HEADLINES = {
    "colocate": "COLOCATE",
    "disaggregate": "DISAGGREGATE",
    "dynamo": "DISAGGREGATE on NVIDIA Dynamo",
    "llm-d": "DISAGGREGATE on llm-d",
}


def print_verdict(v: Verdict, console) -> None:
    """The verdict for a terminal: the call, the summary, both modes, the rules that fired."""
    from rich.table import Table

    from disagg_decider.render.text import strip_invisible
    from disagg_decider.render.text import terminal_text as safe

    color = "green" if v.disaggregate else "cyan"
    headline = HEADLINES.get(v.decision, v.decision.upper())
    if not v.colocated.feasible and not v.disaggregated.feasible:
        color, headline = "red", "NO LAYOUT MEETS THE TARGETS"
    console.print(
        f"[bold {color}]{headline}[/]  {safe(v.workload)}  ({safe(v.model)} on {safe(v.gpu)})",
        highlight=False,
    )
    console.print(safe(v.summary), highlight=False)
    if v.next_steps:
        console.print("[bold]Next:[/]", highlight=False)
        for step in v.next_steps:
            console.print(f"  [dim]# {safe(step.why)}[/]", highlight=False)
            for line in shell_lines(step.argv, console.width - 2):
                # markup off rather than escaped: rich's escape doubles a trailing backslash
                console.print(
                    "  " + strip_invisible(line), markup=False, highlight=False, soft_wrap=True
                )
    console.print()
    k = v.conditional
    what = "Both modes" if k is None else "The three layouts"
    title = f"{what} on the same GPUs, same p99 targets"
    if v.slo_basis == "static":
        title = f"{what} on the same GPUs, static basis (no queueing; TTFT/TPOT rows are static)"
    table = Table(title=title, title_justify="left")
    columns = ("", "colocated", "disaggregated") + (() if k is None else ("conditional",))
    for col in columns:
        table.add_column(col, justify="right" if col else "left")
    c, d = v.colocated, v.disaggregated
    cluster = v.sizing.cluster_gpus
    rows = [
        ("layout (replicas x parallelism)", colocated_layout(c), split_layout(d)),
        ("GPUs for the rate", _gpus(c, cluster), _gpus(d, cluster)),
        ("meets both p99 SLOs", _yn(c.feasible), _yn(d.feasible)),
        ("fits the cluster", _yn(c.fits_cluster), _yn(d.fits_cluster)),
        ("max req/s on the cluster", _if(c, c.max_rate_per_s, 2), _if(d, d.max_rate_per_s, 2)),
        ("TTFT p99 ms", _num(c.ttft_p99_ms), _num(d.ttft_p99_ms)),
        ("TPOT p99 ms", _num(c.tpot_p99_ms), _num(d.tpot_p99_ms)),
        ("goodput req/s per GPU", _if(c, c.goodput_per_gpu, 3), _if(d, d.goodput_per_gpu, 3)),
        ("$ per 1M tokens", _cost_cell(c, c.cost_per_million_tokens_usd, 3),
         _cost_cell(d, d.cost_per_million_tokens_usd, 3)),
        ("$ per year", _cost_cell(c, c.cost_per_year_usd, 0),
         _cost_cell(d, d.cost_per_year_usd, 0)),
    ]  # fmt: skip
    if k is not None:  # three columns: short labels so the table fits 80 columns
        rows = [
            (label, *row[1:], cell)
            for label, row, cell in zip(_SHORT_LABELS, rows, conditional_cells(v), strict=True)
        ]
        rows.insert(1, ("threshold T", "none", "0 (all)", _threshold_cell(k)))
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
            weight = {"veto": "VETO", "advice": "info"}.get(f.kind, f"+{f.weight:g}")
            rules.add_row(safe(f.id), weight, f.pushes, safe(f.title))
        console.print(rules, highlight=False)
        scores = ", ".join(f"{k} {s:g}" for k, s in v.scores.items() if s)
        how = f"`decide rules show {v.fired_rules[0].id}` explains one"
        console.print(f"[dim]scores: {scores or 'none'}; {how}[/]")
    for note in v.overrides_applied:
        console.print(f"[dim]override {safe(note)}[/]", highlight=False)
    for note in v.calibration:
        console.print(f"[dim]{safe(note)}[/]", highlight=False)
    if v.slo_basis != "p99-under-load":
        console.print(f"[dim]SLO basis: {v.slo_basis} (see warnings)[/]", highlight=False)
    if v.step_source is not None:
        console.print(f"[dim]step source: {v.step_source} (measured kernels)[/]", highlight=False)
    for sentence in confidence_notes(v):
        console.print(f"[dim]confidence: {safe(sentence)}[/]", highlight=False)
    if v.limits or v.warnings:
        console.print()
    for limit in v.limits:
        where = "" if limit.mode == "both" else f"{limit.mode} "
        console.print(f"[red]limit ({where}{limit.kind}):[/] {safe(limit.detail)}", highlight=False)
    for w in v.warnings:
        console.print(f"[yellow]warning:[/] {safe(w)}", highlight=False)
    if v.assumptions:
        console.print()
        console.print(f"[dim]{safe(assumptions_sentence(v))}[/]", highlight=False)


def shell_lines(argv: list[str], width: int) -> list[str]:
    """A command folded at whole arguments with shell line continuations, so that it fits the
    terminal and still runs when pasted (rich would wrap it mid-flag). An argument longer than
    the line keeps a line of its own."""
    import shlex

    lines: list[str] = []
    line = ""
    for word in (shlex.quote(a) for a in argv):
        if line and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def confidence_notes(v: Verdict) -> list[str]:
    """The gain's distance from its threshold and the routing threshold's cliff, if any."""
    c = v.confidence
    if c is None:
        return []
    out = []
    if c.gain is not None and c.threshold is not None and c.margin is not None:
        side = "above" if c.margin >= 0 else "below"
        out.append(
            f"gain {c.gain:.2f}x sits {abs(c.margin):.0%} {side} {c.rule}'s "
            f"{c.param or 'threshold'} {c.threshold:g}x; measured against the simulator, the "
            f"calculator's gains sit within {c.error_band_low:.2f}-{c.error_band_high:.2f}x, "
            f"so this is {'a' if c.close_call else 'not a'} close call"
        )
    if c.cliff is not None and c.cliff.on_cliff:
        out.append(c.cliff.sentence)
    return out


def dtypes_sentence(v: Verdict) -> str:
    """`weights fp8, KV bf16 (the model's own: ...)`: the formats the verdict priced."""
    from disagg_decider.dtypes import describe

    d = v.dtypes
    if d is None:
        return ""
    own = d.source.removeprefix("model: ")
    where = "as the workload states" if d.source == "workload" else f"the model's own: {own}"
    return f"weights {describe(d.weights)}; KV cache {d.kv_cache} ({where})"


def _print_key_figures(v: Verdict, console) -> None:
    """The per-request figures behind the call, one labelled line each."""
    from rich.table import Table

    m = v.metrics
    link = f"{m.kv_transfer_gb_per_s:.1f} GB/s"
    if m.kv_transfer_path == "network":
        link += ", RDMA" if m.kv_transfer_rdma else ", TCP, no RDMA"
    figures = [
        *([("priced in", dtypes_sentence(v))] if v.dtypes is not None else []),
        (
            "KV cache",
            f"{m.kv_bytes_per_token:,.0f} B/token, {m.kv_bytes_per_request / 1e6:,.1f} MB "
            f"per request at {m.effective_prompt_tokens:,.0f} uncached prompt tokens",
        ),
        (
            "KV transfer",
            f"{m.kv_transfer_ms:.2f} ms per request over {m.kv_transfer_path} ({link})",
        ),
        (
            "prefill",
            "- (the model fits no replica here)"
            if m.prefill_ms is None or m.decode_step_ms is None
            else f"{m.prefill_ms:.1f} ms; decode step {m.decode_step_ms:.1f} ms",
        ),
        ("gain", f"{gain_text(m.gain)} goodput per GPU (always-disaggregated over colocated)"),
    ]
    sentence = layout_sentence(v.conditional, m.crossover_prompt_tokens, split=v.disaggregate)
    if sentence:
        figures.append(("layout", sentence.removeprefix("Layout: ")))
    if v.decision == "dynamo" and v.layout == "conditional" and v.dynamo_layout != v.layout:
        figures.append(
            (
                "on Dynamo",
                "the always-disaggregated pools: its router sends prompts with nothing cached "
                f"({(m.conditional_cold_local_share or 0):.0%} of requests, kept local by the "
                "conditional layout) to the prefill pool; llm-d runs the conditional layout",
            )
        )
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, text in figures:
        grid.add_row(label, text)
    console.print(grid, highlight=False)


_SHORT_LABELS = (
    "layout",
    "GPUs for rate",
    "p99 SLOs met",
    "fits cluster",
    "max req/s",
    "TTFT p99 ms",
    "TPOT p99 ms",
    "goodput/GPU",
    "$ per 1M tok",
    "$ per year",
)


def conditional_layout(k) -> str:
    """The conditional layout's pools; where the search chose a mode, which one."""
    if not k.feasible:
        return "-"
    if k.layout == "colocated":
        return "= colocated"
    if k.layout == "disaggregated":
        return "= disaggregated"
    return f"{k.prefill_replicas}P x TP{k.prefill_tp} + {k.decode_replicas}D x TP{k.decode_tp}"


def _threshold_cell(k) -> str:
    """The routing threshold and the share of requests it sends to the prefill pool."""
    if not k.feasible or k.threshold_tokens is None:
        return "none"
    if k.threshold_tokens == 0:
        return "0 (all)"
    return f"{k.threshold_tokens} ({k.share_to_prefill:.0%})"


def conditional_cells(v: Verdict) -> list[str]:
    """The conditional column of the modes table, row for row. Its pools are sized for the
    workload's rate (at most the cluster's split), so its GPUs are those pools'; its costs are
    the plan's (plan.py) where those pools carry the rate, "-" otherwise."""
    k = v.conditional
    ok = k.feasible
    if k.layout == "conditional":
        gpus = str(k.gpus)
    else:  # the search chose a mode: its column has the figures
        gpus = "as " + ("colocated" if k.layout == "colocated" else "disaggregated")
    priced = conditional_plan_of(v)
    carries = priced is not None and priced.carries_rate
    return [
        conditional_layout(k),
        gpus if ok else "-",
        _yn(ok),
        "-",
        _num(k.max_rate_per_s, 2) if ok else "-",
        _num(k.ttft_p99_ms),
        _num(k.tpot_p99_ms),
        _num(k.goodput_per_gpu, 3) if ok else "-",
        _num(priced.cost_per_million_tokens_usd, 3) if carries else "-",
        _num(priced.cost_per_year_usd, 0) if carries else "-",
    ]


def conditional_plan_of(v: Verdict):
    """The conditional layout as priced in the verdict's plan or alternatives, if it is one."""
    every = ([v.plan] if v.plan is not None else []) + list(v.alternatives)
    return next((p for p in every if p.layout == "conditional"), None)


def colocated_layout(c) -> str:
    """The colocated plan, or "-" where no colocated layout meets the targets."""
    return f"{c.replicas} x {c.layout}" if c.feasible else "-"


def split_layout(d) -> str:
    """The split as a plan, or "-" where no split meets the targets."""
    if not d.feasible:
        return "-"
    return f"{d.prefill_replicas}P x {d.prefill_layout} + {d.decode_replicas}D x {d.decode_layout}"


def gain_text(gain: float | None) -> str:
    """A gain as "1.92x"; "-" where one mode meets no target (never 0.00x or "-x")."""
    return "-" if gain is None else f"{gain:.2f}x"


def _gpus(mode, cluster: int) -> str:
    """GPUs the rate needs: the count when it fits, "needs N, has M" when the cluster is short."""
    if not mode.feasible:
        return "-"
    if mode.fits_cluster:
        return str(mode.gpus)
    return f"needs {mode.gpus_needed_for_rate}, has {cluster}"


def _cost_cell(mode, x: float | None, digits: int) -> str:
    """A cost only where the mode carries the rate on the cluster: a mode capped at the
    cluster's GPUs serves less than the rate, and its cost would read cheaper than the plan's."""
    return _num(x, digits) if mode.feasible and mode.fits_cluster else "-"


def _if(mode, x: float, digits: int) -> str:
    """A figure of a feasible mode; "-" for one that serves nothing within the targets."""
    return f"{x:,.{digits}f}" if mode.feasible else "-"


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def _num(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def assumptions_sentence(v: Verdict) -> str:
    """The defaults filled in, in one sentence (the JSON's `assumptions` says what each moves)."""
    given = ", ".join(f"{a.field} = {_value_text(a.value)}" for a in v.assumptions)
    return f"Assumed (not in the workload; set them to change the answer): {given}."


def _value_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
