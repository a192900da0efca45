"""How sure a verdict is: the deciding gain against its threshold and the calculator's error.

A gain of 1.22x against a `min_gain` of 1.1 reads like a win, but the calculator's goodput is
itself off the simulator's by 5-20% per mode (`benchmarks/calc_vs_sim.py`), so that split may
not pay. `confidence` says how far the gain sits from the threshold of the rule that used it,
relative to that measured error (`calc/error_bands.json`, the one place those figures live),
calls it a close call when the error band reaches the threshold, and says whether the
conditional layout's routing threshold sits on a cliff of its own goodput curve.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from disagg_decider.calc.result import ConditionalResult
from disagg_decider.verdict import Cliff, Confidence, FiredRule, Neighbour, Verdict

ERROR_BANDS = Path(__file__).resolve().parent / "calc" / "error_bands.json"
# A neighbouring grid threshold that serves this share less per GPU than the chosen one makes
# the choice a cliff: a prompt mix slightly longer than stated lands there (the grid steps
# ~10% in tokens).
CLIFF_DROP = 0.1


@cache
def _bands() -> dict[str, Any]:
    return json.loads(ERROR_BANDS.read_text(encoding="utf-8"))


def gain_error_band() -> tuple[float, float]:
    """The factor range the true gain may sit in around the calculator's, from the measured
    calculator/simulator goodput spreads. The gain is the split's goodput over colocation's,
    each off by its own mode's error, so the two p10-p90 half-widths (in log) add in quadrature.
    Step-time error (physics vs silicon) is shared by both modes and is not in this band."""
    spread = _bands()["calc_vs_sim"]["goodput_calc_over_sim"]
    halves = [math.log(m["p90"] / m["p10"]) / 2 for m in spread.values()]
    half = math.hypot(*halves)
    return math.exp(-half), math.exp(half)


def basis() -> str:
    """Where the band comes from, for the reader of the JSON."""
    b = _bands()["calc_vs_sim"]
    return (
        f"calc/error_bands.json: {b['what']} (`{b['command']}`, {b['measured']}), p10-p90 per "
        "mode combined; step-time error against measured silicon is shared by both modes "
        "and not included"
    )


def confidence(
    fired: list[FiredRule],
    gain: float | None,
    conditional: ConditionalResult | None,
    deciding_veto: FiredRule | None,
) -> Confidence:
    """The verdict's confidence block; `fired` are the rules that fired, `gain` metrics.gain."""
    low, high = gain_error_band()
    nearest = _nearest_gain_comparison(fired)
    rests_on_gain = deciding_veto is None or _compares_gain(deciding_veto)
    rule, param, threshold = nearest if nearest else (None, None, None)
    margin, distance, summary = None, None, None
    close = False
    if gain is not None and threshold:
        margin = gain / threshold - 1
        distance = abs(math.log(gain / threshold)) / math.log(high)
        close = rests_on_gain and low <= threshold / gain <= high
        if close:
            summary = _close_sentence(gain, threshold, rule, param, high)
    return Confidence(
        gain=gain,
        rule=rule,
        param=param,
        threshold=threshold,
        margin=margin,
        distance_in_error_bands=distance,
        error_band_low=low,
        error_band_high=high,
        close_call=close,
        summary=summary,
        cliff=threshold_cliff(conditional),
        basis=basis(),
    )


def _compares_gain(rule: FiredRule) -> bool:
    return any(c.metric == "gain" for c in rule.compared)


def _nearest_gain_comparison(fired: list[FiredRule]) -> tuple[str, str | None, float] | None:
    """The fired rule comparing the gain whose threshold sits nearest it (in ratio)."""
    best: tuple[float, tuple[str, str | None, float]] | None = None
    for rule in fired:
        for c in rule.compared:
            if not (c.metric == "gain" and _positive(c.actual) and _positive(c.threshold)):
                continue
            distance = abs(math.log(float(c.actual) / float(c.threshold)))
            if best is None or distance < best[0]:
                best = (distance, (rule.id, c.param, float(c.threshold)))
    return best[1] if best else None


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and math.isfinite(x)


def _close_sentence(
    gain: float, threshold: float, rule: str | None, param: str | None, high: float
) -> str:
    name = f"{rule}'s {param or 'threshold'}" if rule else "the rule's threshold"
    return (
        f"Close call: the split's {gain:.2f}x gain is within the calculator's measured error "
        f"(about +-{high - 1:.0%}) of {name} {threshold:g}x; confirm with "
        "`decide simulate --layout all` and a benchmark before acting on it."
    )


def threshold_cliff(k: ConditionalResult | None) -> Cliff | None:
    """The goodput at the grid thresholds next to the chosen one, relative to the chosen."""
    if k is None or k.layout != "conditional" or k.threshold_tokens is None:
        return None
    grid = sorted((p for p in k.curve if p.threshold_tokens is not None), key=_tokens)
    at = next((i for i, p in enumerate(grid) if p.threshold_tokens == k.threshold_tokens), None)
    if at is None or grid[at].goodput_per_gpu <= 0:
        return None
    chosen = grid[at].goodput_per_gpu
    neighbours = [
        Neighbour(threshold_tokens=p.threshold_tokens, goodput_ratio=p.goodput_per_gpu / chosen)
        for p in (grid[at - 1] if at > 0 else None, grid[at + 1] if at + 1 < len(grid) else None)
        if p is not None
    ]
    steep = [n for n in neighbours if n.goodput_ratio <= 1 - CLIFF_DROP]
    return Cliff(
        threshold_tokens=k.threshold_tokens,
        neighbours=neighbours,
        drop_share=CLIFF_DROP,
        on_cliff=bool(steep),
        sentence=_cliff_sentence(k.threshold_tokens, neighbours, steep),
    )


def _tokens(p) -> int:
    return p.threshold_tokens


def _cliff_sentence(threshold: int, neighbours: list[Neighbour], steep: list[Neighbour]) -> str:
    def where(n: Neighbour) -> str:
        side = "next" if n.threshold_tokens > threshold else "previous"
        return f"at the {side} grid threshold ({n.threshold_tokens} tokens)"

    if steep:
        worst = min(steep, key=lambda n: n.goodput_ratio)
        return (
            f"The routing threshold {threshold} sits on a cliff: {where(worst)} goodput per GPU "
            f"drops {1 - worst.goodput_ratio:.0%}, so prompts a little longer than stated, or "
            "a router that splits them a little differently, lose that much; check the "
            "threshold against measured traffic."
        )
    moves = ", ".join(f"{where(n)} {n.goodput_ratio - 1:+.0%}" for n in neighbours)
    return f"The routing threshold {threshold} is not on a cliff ({moves or 'no neighbours'})."


def confidence_sentence(verdict: Verdict) -> str | None:
    """The sentence the first paragraph carries for a close call (None otherwise)."""
    c = verdict.confidence
    return c.summary if c is not None and c.close_call else None
