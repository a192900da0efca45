"""Per-workload reports: every example renders, the numbers are the verdict's, input is inert."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from disagg_decider.calc.compare import gain_curve
from disagg_decider.decide import decide
from disagg_decider.deploy.routing import dynamo_needs_always_split
from disagg_decider.plan_text import for_workload_file
from disagg_decider.render.report import chart_prompt_grid, render_report
from disagg_decider.render.text import tokens_label
from disagg_decider.workload import load_workload, parse_workload, resolve
from tests.conftest import EXAMPLES, ROOT, edited_example, run_cli
from tests.render_helpers import assert_tables_rectangular, headings, section, tables

SECTIONS = (
    "Inputs",
    "Why",
    "Numbers",
    "Sizing",
    "Transfer versus gain",
    "Caveats",
    "References",
)


def _report(path: Path) -> tuple[str, object, object]:
    workload = load_workload(path)
    # the next steps name the file as a user in the repository root would (no absolute path)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    verdict = for_workload_file(decide(workload, base_dir=path.parent), str(shown))
    resolved = resolve(workload, path.parent)
    return render_report(verdict, resolved), verdict, resolved


@pytest.fixture(scope="module", params=EXAMPLES, ids=[p.stem for p in EXAMPLES])
def example(request) -> tuple[str, object, object]:
    return _report(request.param)


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 8


def test_sections_and_heading(example) -> None:
    text, verdict, _ = example
    assert headings(text, 2) == [f"Disaggregation decision: {verdict.workload}"]
    assert headings(text, 3) == list(SECTIONS)
    assert_tables_rectangular(text)
    assert "\n\n\n" not in text


def test_fired_rules_and_their_values(example) -> None:
    text, verdict, _ = example
    why = section(text, "Why")
    if not verdict.fired_rules:
        assert "No rule fired" in why
        return
    rows = tables(why)[0][1:]
    assert [r[0].split()[0] for r in rows] == [f.id for f in verdict.fired_rules]
    for row, fired in zip(rows, verdict.fired_rules, strict=True):
        for c in fired.compared:
            assert f"`{c.metric}` = " in row[2]
            if c.param:
                assert f"(`{c.param}`)" in row[2]


def _num(cell: str) -> float:
    return float(cell.replace("$", "").replace(",", ""))


def test_numbers_table_is_the_verdict(example) -> None:
    text, verdict, _ = example
    rows = {r[0]: r[1:] for r in tables(section(text, "Numbers"))[0][1:]}
    c, d, k = verdict.colocated, verdict.disaggregated, verdict.conditional
    assert rows["GPUs used"][:2] == [str(c.gpus), str(d.gpus)]
    if k is not None:  # the conditional column: its goodput and p99s, or the mode it chose
        assert all(len(row) == 3 for row in rows.values())
        if k.feasible:
            assert _num(rows["goodput (req/s per GPU)"][2]) == pytest.approx(
                k.goodput_per_gpu, abs=6e-4
            )
        if k.layout == "conditional":
            assert rows["layout"][2].startswith(f"T={k.threshold_tokens} (")
            assert rows["GPUs used"][2] == str(
                k.prefill_replicas * k.prefill_tp + k.decode_replicas * k.decode_tp
            )
        else:
            assert rows["GPUs used"][2] == f"as {k.layout}"
    assert _num(rows["goodput (req/s per GPU)"][0]) == pytest.approx(c.goodput_per_gpu, abs=6e-4)
    assert _num(rows["goodput (req/s per GPU)"][1]) == pytest.approx(d.goodput_per_gpu, abs=6e-4)
    # a cost only where the layout carries the rate (a capped one would read cheaper)
    for idx, mode in enumerate((c, d)):
        if mode.feasible and mode.fits_cluster:
            assert _num(rows["cost per year"][idx]) == pytest.approx(mode.cost_per_year_usd, abs=1)
        else:
            assert rows["cost per year"][idx] == rows["cost per million tokens"][idx] == "-"
    priced = {p.layout: p for p in [verdict.plan, *verdict.alternatives] if p is not None}
    if k is not None and "conditional" in priced and priced["conditional"].carries_rate:
        cost = priced["conditional"].cost_per_year_usd
        assert _num(rows["cost per year"][2]) == pytest.approx(cost, abs=1)
    for key, mode in (("TTFT p99 (ms)", c), ("TTFT p99 (ms)", d)):
        idx = 0 if mode is c else 1
        if mode.ttft_p99_ms is None:
            assert rows[key][idx] == "-"
        else:
            assert _num(rows[key][idx]) == pytest.approx(mode.ttft_p99_ms, abs=0.06)
    assert "cost per million tokens" in rows and "TPOT p99 (ms)" in rows


def test_sizing_names_the_pools(example) -> None:
    text, verdict, _ = example
    s, d = verdict.sizing, verdict.disaggregated
    sizing = section(text, "Sizing")
    # Layouts name the parallelism (TP4, DP16/EP16, "TP4 on b200" for heterogeneous pools).
    # A split deployed in the conditional layout labels the always-split pools as such.
    k = verdict.conditional
    labelled = verdict.disaggregate and k is not None and k.layout == "conditional"
    always = " (always-disaggregated" if labelled else ""
    head = f"**Prefill pool{always}"
    assert head in sizing
    gpus = "1 GPU" if s.prefill_gpus == 1 else f"{s.prefill_gpus} GPUs"
    prefill = f":** {s.prefill_replicas} x {d.prefill_layout} ({gpus})"
    assert prefill in sizing.split(head, 1)[1].split("\n", 1)[0]
    decode = f"**Decode pool{' (always-disaggregated)' if labelled else ''}:** {s.decode_replicas}"
    assert f"{decode} x {d.decode_layout}" in sizing
    if d.prefill_dp == 1 and d.prefill_ep == 1 and " on " not in d.prefill_layout:
        assert d.prefill_layout == f"TP{s.prefill_tp}"
    threshold = str(verdict.conditional_disagg_threshold_tokens)
    conditional = verdict.layout == "conditional"
    assert ("**Conditional disaggregation:**" in sizing) == conditional
    if conditional and verdict.decision == "dynamo" and dynamo_needs_always_split(verdict):
        # cache-cold local prompts: Dynamo runs the always-split pools (the mixed example)
        assert "no conditional-disagg config" in sizing and "eff_isl_threshold" not in sizing
    elif conditional and verdict.decision == "dynamo":
        assert f'"eff_isl_threshold":{threshold}' in sizing
    elif conditional and verdict.decision == "llm-d":
        assert f"nonCachedTokens: {threshold}" in sizing
    else:  # no router config for a colocate decision or a layout without a threshold
        assert "eff_isl_threshold" not in sizing and "nonCachedTokens" not in sizing


def test_chart_is_the_gain_curve(example) -> None:
    text, verdict, resolved = example
    body = section(text, "Transfer versus gain")
    chart = re.search(r"```mermaid\nxychart-beta\n(.*?)```", body, re.S)
    assert chart is not None
    x_axis = re.search(r'x-axis "[^"]*" \[(.*)\]', chart.group(1)).group(1)
    labels = re.findall(r'"([^"]*)"', x_axis)  # quoted: a label may hold a comma (1,351)
    grid = chart_prompt_grid(resolved)
    gains = [float(g) for g in gain_curve(resolved, grid)]
    # Where neither mode meets the targets the chart has a gap: the length is left out.
    kept = [(p, g) for p, g in zip(grid, gains, strict=True) if not math.isnan(g)]
    assert len(labels) == len(kept)
    top = float(re.search(r"--> ([0-9.]+)", chart.group(1)).group(1))
    lines = re.findall(r"line \[(.*)\]", chart.group(1))
    drawn = [float(v) for v in lines[0].split(",")]
    assert [float(v) for v in lines[1].split(",")] == [1.0] * len(kept)
    for label, value, (tokens, gain) in zip(labels, drawn, kept, strict=True):
        assert label.split()[0] == tokens_label(round(tokens))
        assert label.endswith("split only") == math.isinf(gain)
        assert label.endswith("colocated only") == (gain == 0)
        assert value == pytest.approx(min(gain, top), abs=6e-4)
    for tokens, gain in zip(grid, gains, strict=True):
        if math.isnan(gain):
            assert tokens_label(round(tokens)) in body.split("Neither mode meets the targets at")[1]
    assert f"p50 prompt is {resolved.workload.traffic.prompt_tokens.p50:,.0f} tokens" in body
    crossover = verdict.metrics.crossover_prompt_tokens
    if crossover is None:
        assert "does not win" in body
    else:
        assert f"from about {crossover:,} prompt tokens" in body


def test_references_are_the_fired_rules(example) -> None:
    text, verdict, _ = example
    refs = section(text, "References")
    for fired in verdict.fired_rules:
        for ref in fired.references:
            assert f"(<{ref.url}>)" in refs
    urls = re.findall(r"\(<([^>]+)>\)", refs)
    assert len(urls) == len(set(urls))


def test_caveats_carry_warnings_and_assumptions(example) -> None:
    text, verdict, resolved = example
    caveats = section(text, "Caveats")
    assert caveats.count("**Warning:**") == len(verdict.warnings)
    assert f"prefill MFU {resolved.workload.efficiency.prefill_mfu:.2f}" in caveats


def test_deterministic(example) -> None:
    text, verdict, resolved = example
    assert render_report(verdict, resolved) == text
    assert str(ROOT) not in text


# --- hostile input ----------------------------------------------------------------------------

EVIL_NAME = "x | y\n---\nname: evil"


def _evil_report() -> str:
    data = edited_example(
        name=EVIL_NAME,
        description="line one\n---\n# heading\n<!-- open comment `tick` | pipe *x* [l](u)",
    )
    workload = parse_workload(data, "evil")
    verdict = decide(workload)
    return render_report(verdict, resolve(workload))


def test_injected_name_cannot_break_tables_or_add_front_matter() -> None:
    text = _evil_report()
    assert not text.startswith("---")
    lines = text.splitlines()
    assert "---" not in lines
    assert not any(line.startswith("name:") for line in lines)
    assert not any(line.startswith("# ") for line in lines)
    assert not re.search(r"(?<!\\)<!--", text), "an unescaped HTML comment would hide the rest"
    assert headings(text, 2) == ["Disaggregation decision: x \\| y --- name: evil"]
    assert_tables_rectangular(text)
    inputs = tables(section(text, "Inputs"))[0]
    assert all(len(row) == 2 for row in inputs)
    assert headings(text, 3) == list(SECTIONS)
    description = (
        "line one --- # heading \\<!-- open comment \\`tick\\` \\| pipe \\*x\\* \\[l\\](u)"
    )
    assert description in lines


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_markdown_is_the_report() -> None:
    path = ROOT / "examples/k8s-native-shop-llm-d.yaml"
    done = run_cli("--workload", "examples/k8s-native-shop-llm-d.yaml", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout == _report(path)[0]


def test_cli_markdown_bad_workload_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: llama-3.3-70b\n")
    done = run_cli("--workload", str(bad), "--format", "markdown")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "traffic" in done.stderr
