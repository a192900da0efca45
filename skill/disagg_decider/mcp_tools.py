"""What the MCP server offers coding agents, as plain typed functions with no MCP imports.

Each tool is a thin layer over the calculator, the rulebook or the catalogs, so an agent gets
the numbers `decide` prints on the command line. The docstrings are the descriptions agents read
(what the tool answers, when to call it, what to pass); the `Annotated` fields become the
advertised input schema and the return types the output schema. Bad input raises `UserError`,
as in the CLI; `mcp_server` turns it into a tool error the agent can act on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from disagg_decider.calc import compare
from disagg_decider.calc.crossover import (
    CROSSOVER_MIN_PROMPT_TOKENS,
    CROSSOVER_POINTS,
    crossover_from_curve,
    crossover_grid,
    winning_stretches,
)
from disagg_decider.calc.result import ThresholdPoint
from disagg_decider.decide import decide
from disagg_decider.errors import UserError
from disagg_decider.frontier_rows import Frontier
from disagg_decider.userfiles import base_dir_for_tools, current_policy
from disagg_decider.verdict import Verdict
from disagg_decider.workload import (
    MAX_TOKENS,
    Workload,
    resolve,
)

Scalar = float | int | bool | str


class ToolOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- decide_disaggregation --------------------------------------------------------------------

WORKLOAD_HELP = (
    "The workload, exactly as in a workload YAML file but as JSON. Required: name, model "
    "(catalog id), traffic {prompt_tokens {p50, p99}, output_tokens {p50, p99}, "
    "requests_per_second}, slo {ttft_ms, tpot_ms} (p99 targets), cluster {gpu (catalog id), gpus}. "
    "Optional: weights_dtype, kv_cache_dtype, engine, traffic.prefix_cache_hit_rate (0..1), "
    "cluster.gpus_per_node / network (link id or {rdma, gbps_per_gpu}) / kubernetes, "
    "ops {maturity, orchestrator_preference, ...}, cost, parallelism, efficiency, overrides. "
    "A model given as {hf_config: path} is read only if the server was started with "
    "--allow-dir DIR: then from regular files under DIR (a relative path: under the first DIR)."
)


def decide_disaggregation(
    workload: Annotated[Workload, Field(description=WORKLOAD_HELP)],
    overrides: Annotated[
        dict[str, Scalar] | None,
        Field(
            max_length=100,
            description=(
                "Rule parameter overrides by name, applied after workload.overrides, e.g. "
                '{"min_gain": 1.2}. explain_rule shows the parameters a rule uses.'
            ),
        ),
    ] = None,
) -> Verdict:
    """Decide whether an LLM service should split prefill and decode onto separate GPU pools
    (disaggregated serving on NVIDIA Dynamo or llm-d) or stay colocated, and size the pools.

    Call it when someone asks whether to disaggregate, which of Dynamo or llm-d to use, or how
    many prefill and decode GPUs a service needs. Pass the workload (model, prompt and output
    lengths at p50 and p99, request rate, p99 TTFT/TPOT targets, GPU type and count, network,
    team); the prompt `collect_workload` lists what to ask for.

    Returns the verdict: `decision` (colocate, dynamo or llm-d), `layout` (colocated,
    disaggregated or conditional: only prompts above `conditional_disagg_threshold_tokens`
    uncached tokens go to a prefill pool; `conditional` holds its pools, share sent to prefill,
    p99s and goodput per GPU against the threshold; `dynamo_layout` is what Dynamo's router
    can run: `disaggregated` where the conditional layout keeps cache-cold prompts local,
    which Dynamo sends to the prefill pool), a one-paragraph `summary` whose first sentence is
    the plan and its cost (`plan`: orchestrator, pools, threshold, GPUs, $/year, $ per 1M
    tokens; `alternatives` priced the same way, a cost to quote only where `carries_rate`;
    `next_steps`: commands to deploy, simulate, benchmark and calibrate, on WORKLOAD.yaml),
    `fired_rules` with the metric comparisons and rationale behind each, `metrics` (KV bytes,
    transfer time, goodput per GPU of both modes, gain, crossover prompt length), `sizing`
    (replicas and TP per pool), the rule `thresholds` used and `warnings`. `feasible` is false
    when the chosen layout meets no target; `limits` then says why (memory, context, slo, rate,
    with what would fit), and each mode's `gpus_needed_for_rate` how many GPUs the rate needs.
    `confidence.close_call` is true when the gain sits within the calculator's measured error
    of its rule's threshold (say so: `confidence.summary`), and `confidence.cliff` whether the
    routing threshold sits on a cliff; `provenance` gives each number's source.
    Quote the summary and the fired rules' reasons rather than re-deriving numbers.
    """
    return decide(
        workload, base_dir=_tool_dir(), overrides=overrides or {}, overrides_source="overrides"
    )


def _tool_dir() -> Path | None:
    """Where a relative {hf_config: path} is read from: the server's first --allow-dir."""
    return base_dir_for_tools(current_policy())


# --- find_crossover ---------------------------------------------------------------------------

Outcome = Literal["both-meet-slo", "disaggregated-only", "colocated-only", "neither-meets-slo"]


class GainPoint(ToolOutput):
    prompt_tokens: int = Field(description="prompt p50; p99 scales with it as in the workload")
    gain: float | None = Field(
        description="disaggregated / colocated goodput per GPU; null unless both meet the SLO"
    )
    outcome: Outcome
    disaggregation_wins: bool


class CrossoverResult(ToolOutput):
    workload: str
    crossover_prompt_tokens: int | None = Field(
        description=(
            "where disaggregation starts to win (gain > 1), read from the workload's own "
            "prompt p50: the start of the winning range that contains it, else of the first "
            "one above it; log-interpolated; null if it never wins. The number "
            "decide_disaggregation reports, read on the calculator's grid (`crossover_grid`); "
            "the default range is that grid, so it is the start of one of `winning_ranges`"
        )
    )
    crossover_grid: list[int] = Field(
        description="the prompt p50s the crossover is read on (plus the workload's own)"
    )
    winning_ranges: list[tuple[int, int]] = Field(
        description=(
            "[from, to] of each stretch of the curve where disaggregation wins: `from` where "
            "the gain crosses 1, log-interpolated between the last losing and first winning "
            "point exactly as the crossover is read (the curve's first point when it wins from "
            "there), `to` the stretch's last winning point"
        )
    )
    workload_prompt_tokens_p50: float
    curve: list[GainPoint]
    layout: str = Field(
        description=(
            "the best of the three layouts for the workload as it is: colocated, "
            "disaggregated (every request to a prefill pool) or conditional"
        )
    )
    conditional_disagg_threshold_tokens: int | None = Field(
        description=(
            "the routing threshold chosen for goodput per GPU (largest within 1% of the best): "
            "prompts above it in uncached tokens go to the prefill pool; 0 always, null never"
        )
    )
    share_to_prefill: float = Field(description="share of requests the threshold sends to prefill")
    threshold_curve: list[ThresholdPoint] = Field(
        description="goodput per GPU against the threshold (0: always-disaggregated; null: none)"
    )
    notes: list[str]


def find_crossover(
    workload: Annotated[Workload, Field(description=WORKLOAD_HELP)],
    min_prompt_tokens: Annotated[
        int,
        Field(
            ge=16,
            le=MAX_TOKENS,
            description="Shortest prompt p50 to try; default 64, the crossover grid's start.",
        ),
    ] = CROSSOVER_MIN_PROMPT_TOKENS,
    max_prompt_tokens: Annotated[
        int | None,
        Field(
            gt=16,
            le=MAX_TOKENS,
            description="Longest prompt p50 to try; default: min(context, 131072).",
        ),
    ] = None,
    steps: Annotated[
        int,
        Field(
            ge=2,
            le=64,
            description=(
                "Log-spaced prompt lengths in the range; default 11: with the default range, "
                "the grid the crossover is read on."
            ),
        ),
    ] = CROSSOVER_POINTS,
) -> CrossoverResult:
    """Find the prompt length from which disaggregated serving beats colocated serving for a
    workload, with the gain curve over a range of prompt lengths.

    Call it to answer "at what prompt length does disaggregation start to pay?" or "would it win
    if our prompts grew to 32K?". Pass the same workload as decide_disaggregation and a range of
    prompt lengths (min, max, steps, log-spaced). At each length both modes are re-sized and
    re-tuned on the same GPUs; the p99/p50 spread, outputs, rate, SLOs and cluster stay as in
    the workload, whose own prompt p50 is added to the curve when it lies in the range.

    Returns the crossover prompt length (null when it never wins), the ranges where it wins, the
    layout and routing threshold for the workload as it is (with goodput per GPU against the
    threshold, `threshold_curve`) and the curve: gain = disaggregated / colocated goodput per
    GPU within the p99 SLOs, with an outcome per point when one mode or neither meets the SLO.
    """
    r = resolve(workload, _tool_dir())
    top = max_prompt_tokens or min(r.model.max_context_tokens, 131072)
    if top <= min_prompt_tokens:
        raise UserError(
            f"max_prompt_tokens ({top}) must be greater than min_prompt_tokens "
            f"({min_prompt_tokens})"
        )
    own = workload.traffic.prompt_tokens.p50
    grid = np.round(np.geomspace(min_prompt_tokens, top, steps))
    inside = [own] if min_prompt_tokens <= own <= top else []
    prompts = np.unique(np.concatenate([grid, inside]))
    gains = np.asarray(compare.gain_curve(r, prompts), dtype=float)
    curve = [_gain_point(round(p), float(g)) for p, g in zip(prompts, gains, strict=True)]
    notes = []
    if not inside:
        notes.append(f"the workload's prompt p50 ({own:g}) is outside the range")
    if top > r.model.max_context_tokens:
        notes.append(f"lengths above {r.model.max_context_tokens} exceed {r.model.id}'s context")
    analysis = compare.analyze(r)
    cond = analysis.conditional
    crossover = analysis.crossover_prompt_tokens
    on_curve = crossover_from_curve(prompts, gains, own)
    if on_curve != crossover:
        notes.append(
            f"crossover_prompt_tokens ({crossover}) is read on the calculator's grid "
            f"(crossover_grid); on this curve's grid it would be {on_curve}: pass "
            "min_prompt_tokens, max_prompt_tokens and steps at their defaults to see that grid"
        )
    return CrossoverResult(
        workload=workload.name,
        crossover_prompt_tokens=crossover,
        crossover_grid=[round(p) for p in crossover_grid(r)],
        winning_ranges=winning_stretches(prompts, gains),
        workload_prompt_tokens_p50=workload.traffic.prompt_tokens.p50,
        curve=curve,
        layout=cond.layout if cond else "colocated",
        conditional_disagg_threshold_tokens=analysis.conditional_disagg_threshold_tokens,
        share_to_prefill=cond.share_to_prefill if cond else 0.0,
        threshold_curve=cond.curve if cond else [],
        notes=notes,
    )


def frontier(
    workload: Annotated[Workload, Field(description=WORKLOAD_HELP)],
    basis: Annotated[
        Literal["p99-under-load", "static", "rate-matched"],
        Field(
            description=(
                "p99-under-load (Poisson arrivals at the workload's rate, queueing included), "
                "static (a batch with no queue, AIConfigurator's sizing) or rate-matched "
                "(NVIDIA's: output tokens/s / (ctx GPUs x gen rate / ctx rate + gen GPUs))"
            )
        ),
    ] = "p99-under-load",
    low_tokens_per_s_per_user: Annotated[
        float, Field(ge=0.1, le=10_000, description="Lowest interactivity (1000 / TPOT ms).")
    ] = 10.0,
    high_tokens_per_s_per_user: Annotated[
        float, Field(ge=0.1, le=10_000, description="Highest interactivity.")
    ] = 400.0,
    points: Annotated[int, Field(ge=2, le=64, description="Log-spaced TPOT targets.")] = 16,
) -> Frontier:
    """Throughput per GPU against interactivity (tokens/s per user = 1000 / TPOT ms) for the
    colocated, always-disaggregated and conditional layouts: the Pareto fronts the field
    publishes, and where the split wins.

    Call it when someone asks "at what tokens/s per user does disaggregation win?", wants to
    set the tool's answer beside a published Pareto curve, or asks whether a tighter or looser
    TPOT target would change the verdict. The TPOT target is swept over a log grid (the
    workload's own target added) and the verdict is computed at each point.

    Returns `rows` (every mode's output tokens/s per GPU and layout at each target, the
    winner and its lead), `fronts` (Pareto points only), `winner_changes` (the tokens/s per
    user where the winner changes), `only_one_meets` (intervals where one layout alone meets
    the targets) and `band` (where the split beats colocation by the rulebook's min_gain).
    """
    from disagg_decider.frontier_sweep import Sweep
    from disagg_decider.frontier_sweep import frontier as sweep_frontier

    sweep = Sweep(low_tokens_per_s_per_user, high_tokens_per_s_per_user, points, basis)
    return sweep_frontier(workload, _tool_dir(), sweep)


def _gain_point(prompt_tokens: int, gain: float) -> GainPoint:
    """`gain_curve` encodes 'only disaggregation meets the SLO' as inf and 'neither' as nan."""
    if math.isnan(gain):
        outcome: Outcome = "neither-meets-slo"
    elif math.isinf(gain):
        outcome = "disaggregated-only"
    elif gain == 0:
        outcome = "colocated-only"
    else:
        outcome = "both-meet-slo"
    finite = gain if outcome == "both-meet-slo" else None
    return GainPoint(
        prompt_tokens=prompt_tokens,
        gain=finite,
        outcome=outcome,
        disaggregation_wins=outcome == "disaggregated-only" or (finite is not None and finite > 1),
    )
