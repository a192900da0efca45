"""A per-workload report: the markdown section a design doc embeds.

It reads the `Verdict` (the decision, fired rules, both modes' numbers, sizing) and the resolved
workload (the inputs as given, and `calc.compare.gain_curve` for the transfer-vs-gain chart),
so it says exactly what `decide --workload` says. Every user-supplied string is escaped before
it reaches the template (see `render.text`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from disagg_decider.layout_text import layout_sentence
from disagg_decider.render import text
from disagg_decider.render.env import render
from disagg_decider.rules.text import effect_text
from disagg_decider.verdict import Comparison, FiredRule, Reference, Verdict
from disagg_decider.verdict_text import (
    conditional_layout,
    confidence_notes,
    dtypes_sentence,
)
from disagg_decider.workload import Resolved

DECISION_HEADLINE = {
    "colocate": "Verdict: stay colocated",
    "dynamo": "Verdict: disaggregate, on NVIDIA Dynamo",
    "llm-d": "Verdict: disaggregate, on llm-d",
}


@dataclass(frozen=True)
class GainPoint:
    prompt_tokens: int
    gain: float  # inf: only disaggregation meets the SLO; nan: neither does

    @property
    def label(self) -> str:
        if math.isnan(self.gain):
            return "neither meets the targets"
        if math.isinf(self.gain):
            return "only the split meets the targets"
        if self.gain == 0:
            return "0 (only colocated meets the targets)"
        return text.num(self.gain, 2)

    @property
    def axis_label(self) -> str:
        """The chart's category: the length, marked where only one mode meets the targets."""
        label = text.tokens_label(self.prompt_tokens)
        if math.isinf(self.gain):
            return f"{label} split only"
        if self.gain == 0:
            return f"{label} colocated only"
        return label


@dataclass(frozen=True)
class GainChart:
    points: tuple[GainPoint, ...]
    y_max: float

    @property
    def drawn(self) -> tuple[GainPoint, ...]:
        """The points the chart draws: where neither mode meets the targets is a gap."""
        return tuple(p for p in self.points if not math.isnan(p.gain))

    @property
    def gaps(self) -> tuple[GainPoint, ...]:
        return tuple(p for p in self.points if math.isnan(p.gain))

    def plotted(self, point: GainPoint) -> float:
        """The value drawn: off-scale wins (only the split meets the targets) pin to the top."""
        return min(point.gain, self.y_max)

    @property
    def has_inf(self) -> bool:
        return any(math.isinf(p.gain) for p in self.points)

    @property
    def has_zero(self) -> bool:
        """Some length where only colocation meets the targets (the split serves nothing)."""
        return any(p.gain == 0 for p in self.points)


def chart_prompt_grid(resolved: Resolved) -> list[float]:
    """The prompt p50s the crossover is read on: the calculator's log-spaced grid
    (`crossover.crossover_grid`, 64 tokens to the context, at most 128K) with the workload's own
    p50, so the table's gains and the crossover the report states come from the same points."""
    from disagg_decider.calc.crossover import crossover_grid

    own = float(resolved.workload.traffic.prompt_tokens.p50)
    return sorted({*(float(p) for p in crossover_grid(resolved)), own})


def gain_chart(resolved: Resolved) -> GainChart:
    from disagg_decider.calc.compare import gain_curve

    grid = chart_prompt_grid(resolved)
    gains = [float(g) for g in gain_curve(resolved, grid)]
    finite = [g for g in gains if math.isfinite(g)]
    y_max = max([2.0, *(g * 1.15 for g in finite)])
    y_max = math.ceil(y_max * 2) / 2  # a round top on a half
    points = tuple(GainPoint(round(p), g) for p, g in zip(grid, gains, strict=True))
    return GainChart(points=points, y_max=y_max)


def value_text(value: object) -> str:
    """A compared value, stable across machines: 4 significant figures, or whole thousands."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return text.num(value)
        return text.num(value, 0) if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    return str(value)


def comparison_text(c: Comparison) -> str:
    """One leaf as a table-safe line: `metric` = actual op threshold (`param`)."""
    threshold = value_text(c.threshold)
    if c.param is not None:
        threshold = f"{threshold} ({text.code_cell(c.param)})"
    line = f"{text.code_cell(c.metric)} = {text.cell(value_text(c.actual))} {c.op} "
    line += threshold if c.param is not None else text.cell(threshold)
    return line if c.holds else f"{line} (not met)"


def references(fired: list[FiredRule]) -> list[Reference]:
    """The fired rules' references, once each, in the order the rules fired."""
    seen: dict[str, Reference] = {}
    for f in fired:
        for ref in f.references:
            seen.setdefault(ref.url, ref)
    return list(seen.values())


def render_report(verdict: Verdict, resolved: Resolved) -> str:
    """The design-doc section for one workload (`decide --workload w.yaml --format markdown`)."""
    w = resolved.workload
    chart = gain_chart(resolved)
    return render(
        "report.md.j2",
        v=verdict,
        w=w,
        r=resolved,
        headline=(
            DECISION_HEADLINE[verdict.decision]
            if verdict.colocated.feasible or verdict.disaggregated.feasible
            else "Verdict: no layout meets the targets"
        ),
        fired=[
            {
                "rule": f,
                "effect": effect_text(f.kind == "veto", f.weight, f.pushes),
                "compared": "; ".join(comparison_text(c) for c in f.compared),
            }
            for f in verdict.fired_rules
        ],
        chart=chart,
        own_gain=verdict.metrics.gain,
        references=references(verdict.fired_rules),
        layout_sentence=text.inline(
            layout_sentence(
                verdict.conditional,
                verdict.metrics.crossover_prompt_tokens,
                split=verdict.disaggregate,
            ).removeprefix("Layout: ")
        ),
        conditional_layout=(
            text.cell(_conditional_cell(verdict.conditional)) if verdict.conditional else ""
        ),
        conditional_gpus=_conditional_gpus(verdict.conditional),
        costs=_cost_columns(verdict),
        assumed=[(a.field, value_text(a.value), a.affects) for a in verdict.assumptions],
        dtypes=text.cell(dtypes_sentence(verdict)),
        confidence_notes=confidence_notes(verdict),
    )


def _cost_columns(v: Verdict) -> list:
    """The priced plan of each table column (colocated, disaggregated[, conditional]); None
    where that layout is not one (the template prints "-" unless it carries the rate)."""
    every = {p.layout: p for p in ([v.plan] if v.plan is not None else []) + v.alternatives}
    columns = ["colocated", "disaggregated"] + ([] if v.conditional is None else ["conditional"])
    return [every.get(layout) for layout in columns]


def _conditional_cell(k) -> str:
    """The conditional layout with its threshold, for the report's table."""
    if k.feasible and k.layout == "conditional":
        return (
            f"T={k.threshold_tokens} ({k.share_to_prefill:.0%} to prefill): {conditional_layout(k)}"
        )
    return conditional_layout(k)


def _conditional_gpus(k) -> int | str:
    """GPUs the conditional layout's pools use (plain TP replicas)."""
    if k is None or k.layout != "conditional":
        return "as " + ("colocated" if k is None or k.layout == "colocated" else "disaggregated")
    return k.gpus
