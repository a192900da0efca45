"""The conditional layout's options and output for `decide simulate` and `decide sweep`.

Options: which layouts to simulate (`--layout`), the router threshold (`--pd-threshold`,
default the verdict's T), Dynamo's router policy (`--policy`) and its busy threshold. Output:
the simulated modes side by side, the calculator's p99s in brackets where it priced what was
simulated. Module-level imports stay light (typer only), as in `sim.cli`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from disagg_decider.cli_common import choices
from disagg_decider.errors import UserError

LayoutChoice = choices("LayoutChoice", "both", "conditional", "all")


SweepLayout = choices("SweepLayout", "both", "all")


RouterPolicy = choices("RouterPolicy", "isl_bounding", "prefill_load", "isl_or_load")


LayoutOpt = Annotated[
    LayoutChoice,
    typer.Option(
        "--layout",
        help="both (default): colocated and always-disaggregated, each on the verdict's pools. "
        "conditional: the verdict's conditional layout (prefill pool plus decode workers that "
        "prefill prompts up to --pd-threshold locally). all: the three.",
    ),
]
PdThresholdOpt = Annotated[
    int | None,
    typer.Option(
        "--pd-threshold",
        min=0,
        help="Conditional layout: uncached prompt tokens above which the router sends a prompt "
        "to the prefill pool (default: the verdict's chosen threshold; 0 sends all).",
    ),
]
RouterPolicyOpt = Annotated[
    RouterPolicy,
    typer.Option(
        "--policy",
        help="Conditional layout: Dynamo's router policy. isl_bounding (default): prefill "
        "locally iff the uncached prompt is at most --pd-threshold. prefill_load: locally iff "
        "the chosen prefill worker is busy. isl_or_load: locally iff either.",
    ),
]
BusyOpt = Annotated[
    float,
    typer.Option(
        "--prefill-busy-threshold",
        min=0.0,
        help="prefill_load / isl_or_load: a prefill worker is busy when its queued and running "
        "prompt tokens exceed this fraction of its max_num_batched_tokens (as decide deploy "
        "sets it; Dynamo's prefill_busy_threshold). Default 1.0.",
    ),
]


RatioOpt = Annotated[
    float | None,
    typer.Option(
        "--eff-isl-ratio-threshold",
        min=0.0,
        max=1.0,
        help="Also apply Dynamo's ratio check to isl_bounding / isl_or_load: prefill locally "
        "only if uncached / prompt tokens is below this (Dynamo's default 0.7, at most 1.0: a "
        "prompt with no cached prefix then never stays local on length). Default: not applied, "
        "as the calculator prices it.",
    ),
]


def conditional_config(
    r, verdict, policy: str, threshold: int | None, busy: float, ratio: float | None = None
):
    """The verdict's conditional pools as a simulated cluster, or a user error saying why
    there are none."""
    from disagg_decider.sim import conditional as sim_conditional

    if r.workload.cluster.heterogeneous:
        raise UserError(
            "--layout: the simulator runs one GPU type; heterogeneous pools are priced by the "
            "calculator only"
        )
    cfg = sim_conditional.config_of(r, verdict, policy, threshold, busy, ratio)
    if cfg is None:
        raise UserError(
            f"--layout conditional: {sim_conditional.no_pools_reason(verdict)}; simulate the "
            "chosen layout with --layout both"
        )
    return cfg


def calculator_p99s(verdict, results: dict, cond_cfg) -> dict:
    """The calculator's p99s for each simulated mode; the conditional layout's only at the
    verdict's own threshold and policy (another T or policy is not what it priced)."""
    out = {}
    for mode in results:
        if mode == "conditional":
            k = verdict.conditional
            priced = (
                cond_cfg.threshold_tokens == k.threshold_tokens
                and cond_cfg.policy == "isl_bounding"
                and cond_cfg.eff_isl_ratio_threshold is None
            )
            out[mode] = {
                "ttft_p99_ms": k.ttft_p99_ms if priced else None,
                "tpot_p99_ms": k.tpot_p99_ms if priced else None,
                "share_to_prefill": k.share_to_prefill if priced else None,
                "threshold_tokens": k.threshold_tokens,
            }
        else:
            m = getattr(verdict, mode)
            out[mode] = {"ttft_p99_ms": m.ttft_p99_ms, "tpot_p99_ms": m.tpot_p99_ms}
    return out


def print_simulation(w, results, calc, n: int, source: str, offered: float, share) -> None:
    from rich.console import Console
    from rich.table import Table

    from disagg_decider.render.text import terminal_text

    console = Console()
    console.print(
        f"[bold]{terminal_text(w.name)}[/]: {n:,} requests ({source}), "
        f"offered {offered:.3g} req/s; "
        f"SLO TTFT {w.slo.ttft_ms:g} ms, TPOT {w.slo.tpot_ms:g} ms",
        highlight=False,
    )
    table = Table(title="Simulated (calculator's p99 in brackets)", title_justify="left")
    modes = list(results)
    for col in ("", *modes):
        table.add_column(col, justify="right" if col else "left")

    def pct(p) -> str:
        return f"{p.p50:,.1f} / {p.p90:,.1f} / {p.p99:,.1f}"

    def bracket(x) -> str:
        return f" [{x:,.1f}]" if x is not None else " [-]"

    def row(label: str, cell) -> tuple[str, ...]:
        return (label, *(cell(mode, results[mode]) for mode in modes))

    rows = [
        row("layout", lambda _, m: m.layout),
        row("GPUs", lambda _, m: str(m.gpus)),
        row(
            "TTFT ms p50 / p90 / p99",
            lambda mode, m: pct(m.ttft_ms) + bracket(calc[mode]["ttft_p99_ms"]),
        ),
        row(
            "TPOT ms p50 / p90 / p99",
            lambda mode, m: pct(m.tpot_ms) + bracket(calc[mode]["tpot_p99_ms"]),
        ),
        row("SLO attainment", lambda _, m: f"{m.slo_attainment:.1%}"),
        row("throughput tokens/s", lambda _, m: f"{m.throughput_tokens_per_s:,.0f}"),
        row("goodput req/s per GPU", lambda _, m: f"{m.goodput_per_gpu:.3f}"),
        row("$ per request", lambda _, m: f"{m.cost_per_request_usd:.5f}"),
        row("$ per 1M tokens", lambda _, m: f"{m.cost_per_million_tokens_usd:.3f}"),
    ]
    if share is not None:
        priced = calc["conditional"]["share_to_prefill"]
        rows.append(
            row(
                "share sent to prefill",
                lambda mode, _: (
                    f"{share:.1%}" + (" [-]" if priced is None else f" [{priced:.1%}]")
                    if mode == "conditional"
                    else ""
                ),
            )
        )
    for cells in rows:
        table.add_row(*cells)
    console.print(table)
