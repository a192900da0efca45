"""Rules that read the conditional layout's metrics (advice: reported, weighing nothing), and
the text and markdown outputs that show the conditional layout beside the two modes."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from disagg_decider.decide import decide
from disagg_decider.rules import engine
from disagg_decider.rules.schema import Rule
from disagg_decider.verdict_text import print_verdict
from disagg_decider.workload import load_workload
from tests.conftest import RAG_EXAMPLE
from tests.test_conditional import bimodal


@pytest.fixture(scope="module")
def mix_verdict():
    return decide(bimodal())


def _advice(rule_id: str, layout: str = "conditional") -> Rule:
    return Rule.model_validate(
        {
            "id": rule_id,
            "name": "advice-rule",
            "title": "an advice",
            "category": "throughput",
            "when": {"metric": "gain", "op": ">", "value": 0},
            "advice": {"layout": layout},
            "rationale": "why",
            "references": [{"title": "t", "url": "https://example.org"}],
            "examples": {"fires": [{"gain": 1.0}], "silent": [{"gain": 0.0}]},
        }
    )


def test_advice_weighs_nothing_in_the_decision() -> None:
    from disagg_decider.rules.loader import shipped

    book = shipped().book
    metrics = {m: None for m in engine.metrics_read(book)} | {
        "gain": 1.05,
        "cluster_gpus": 16,
        "ops_maturity": "high",
        "layout": "conditional",
        "conditional_gain_over_always": 1.5,
        "conditional_share_to_prefill": 0.05,
    }
    params = {name: p.value for name, p in book.parameters.items()}
    with_advice = engine.decide(book, metrics, params)
    fired = {f.id: f for f in with_advice.fired}
    assert fired["DSG016"].kind == fired["DSG017"].kind == "advice"
    assert fired["DSG016"].pushes == "advice" and fired["DSG016"].weight == 0.0
    plain = book.model_copy(
        update={"rules": [r for r in book.rules if r.id not in ("DSG016", "DSG017")]}
    )
    without = engine.decide(plain, metrics, params)
    assert (with_advice.decision, with_advice.scores) == (without.decision, without.scores)


def test_a_rule_takes_exactly_one_of_effect_veto_or_advice() -> None:
    rule = _advice("USR100")
    assert rule.kind == "advice" and rule.pushes == "advice"
    data = rule.model_dump(mode="json", by_alias=True, exclude_none=True)
    with pytest.raises(ValueError, match="exactly one of 'effect', 'veto' or 'advice'"):
        Rule.model_validate(data | {"veto": {"pushes": "colocate"}})
    with pytest.raises(ValueError):
        Rule.model_validate(data | {"advice": {"layout": "sideways"}})


def test_bimodal_mix_gets_the_conditional_advice(mix_verdict) -> None:
    v = mix_verdict
    assert v.layout == "conditional"
    advice = [f for f in v.fired_rules if f.kind == "advice"]
    # 28% to prefill; both classes are cache-cold, so the ~72% kept local are prompts Dynamo's
    # router would not keep local (DSG018, issue 14b); two classes, so DSG019's caveat. The
    # gain over always-split is about 1.13x (always-split priced class by class, issue 14c;
    # the conditional layout on 99% of all requests within the TTFT target, issue 14e;
    # simulated on the same pools, about 1.1x), under conditional_margin (1.2), so DSG016 is
    # silent; at a margin under the gain it fires.
    assert [f.id for f in advice] == ["DSG018", "DSG019"]
    gain = v.conditional.gain_over_disaggregated
    assert 1.0 < gain < 1.2
    assert v.metrics.conditional_cold_local_share == pytest.approx(
        1 - v.conditional.share_to_prefill
    )
    lower = decide(bimodal(), overrides={"conditional_margin": 1.0})
    fired = {f.id: f for f in lower.fired_rules}
    compared = {c.metric: c.actual for c in fired["DSG016"].compared}
    assert compared["conditional_gain_over_always"] == pytest.approx(gain)
    # Always-split is about 1.5x colocated (1.22x on the roofline; the simulator, each mode on
    # the pools of its max rate, 1.34x), so the verdict splits.
    # At 28 req/s Dynamo's plan (the always-split pools: cold prompts, DSG018; at most about
    # 26 req/s on 16 GPUs) does not fit and llm-d's conditional pools (about 29) carry the
    # rate, so the split runs on llm-d (ORC010).
    busy = decide(bimodal(requests_per_second=28))
    assert busy.decision == "llm-d" and "ORC010" in [f.id for f in busy.fired_rules]
    # At 20 req/s both plans fit: Dynamo, and the summary says why not the conditional layout.
    fits = v
    assert fits.decision == "dynamo" and "ORC010" not in [f.id for f in fits.fired_rules]
    assert "Not the conditional layout below" in fits.summary


def _terminal(v) -> str:
    out = io.StringIO()
    print_verdict(v, Console(file=out, width=80, color_system=None))
    return out.getvalue()


def test_terminal_table_has_the_conditional_column_within_80_columns(mix_verdict) -> None:
    text = _terminal(mix_verdict)
    k = mix_verdict.conditional
    lines = text.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("The three layouts"))
    assert "conditional" in lines[title + 2]  # the header row
    row = next(line for line in text.splitlines() if line.startswith("│ threshold T"))
    assert f"{k.threshold_tokens} ({k.share_to_prefill:.0%})" in row and "0 (all)" in row
    table = [line for line in text.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80
    assert "DSG018" in text and " info " in text


def test_split_summary_says_which_layout_its_pools_belong_to() -> None:
    v = decide(load_workload(RAG_EXAMPLE), base_dir=RAG_EXAMPLE.parent)
    assert v.disaggregate and v.layout == "conditional"
    d = v.disaggregated
    plan, rest = v.summary.split(". Why:")
    assert f"routing prompts above {v.conditional.threshold_tokens:,} uncached tokens" in plan
    assert (
        f"always-disaggregated {d.prefill_replicas} prefill x {d.prefill_layout} + "
        f"{d.decode_replicas} decode x {d.decode_layout}" in rest.split("Alternatives: ")[1]
    )
