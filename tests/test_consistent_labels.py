"""One basis and one name for each figure (issue 26): the static basis's conditional column,
the layout `decide deploy --json` says it wrote, and the crossover beside the winning ranges
and the report's gain table."""

from __future__ import annotations

from disagg_decider.decide import decide
from disagg_decider.workload import load_workload_text
from tests.test_static_basis import WORKLOAD as STATIC_CASE

STATIC = STATIC_CASE.replace("BASIS", "static")  # tests/test_static_basis.py


def test_the_static_basis_prices_the_conditional_column_on_the_static_basis_too():
    """It used to keep the p99 basis's conditional pools (3.61 req/s per GPU, TTFT 449 ms)
    beside static columns (colocated 8.83 req/s per GPU, TTFT 316 ms)."""
    v = decide(load_workload_text(STATIC))
    k, c, d = v.conditional, v.colocated, v.disaggregated
    best = c if c.goodput_per_gpu >= d.goodput_per_gpu else d
    assert k.layout == best.mode
    assert k.goodput_per_gpu == best.goodput_per_gpu
    assert (k.ttft_p99_ms, k.tpot_p99_ms) == (best.ttft_p99_ms, best.tpot_p99_ms)
    assert "slo.basis static" in k.threshold_reason


def test_deploy_json_names_the_conditional_layout_it_wrote(tmp_path):
    """The RAG example deploys the conditional graph on Dynamo (a prefill pool for prompts
    above the routing threshold); `--json` said "disaggregated"."""
    import json

    from tests.conftest import RAG_EXAMPLE, decide_json, run_cli

    verdict = decide_json(RAG_EXAMPLE)
    assert verdict["layout"] == "conditional"
    proc = run_cli("deploy", "-w", str(RAG_EXAMPLE), "-t", "dynamo", "-o", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["layout"] == "conditional"
    assert payload["threshold_tokens"] == verdict["conditional"]["threshold_tokens"] > 0
    graph = (tmp_path / "dynamo-graph.yaml").read_text()
    assert str(payload["threshold_tokens"]) in graph


def test_find_crossover_reads_the_crossover_and_the_winning_ranges_on_one_grid():
    """The RAG example: it said crossover 298 with winning range [451, 23912] (the crossover
    on the calculator's 11-point grid, log-interpolated; the range's grid points on a 12-point
    one from 256)."""
    from disagg_decider.calc.crossover import crossover_grid
    from disagg_decider.mcp_tools import find_crossover
    from disagg_decider.workload import load_workload, resolve
    from tests.conftest import RAG_EXAMPLE

    w = load_workload(RAG_EXAMPLE)
    got = find_crossover(w)
    assert got.crossover_prompt_tokens == decide(w).metrics.crossover_prompt_tokens
    assert got.crossover_prompt_tokens in [lo for lo, _ in got.winning_ranges]
    assert got.crossover_grid == [round(p) for p in crossover_grid(resolve(w))]
    lengths = [p.prompt_tokens for p in got.curve]
    assert set(got.crossover_grid) <= set(lengths)
    assert not got.notes
    # Another grid keeps the verdict's number and says where it was read.
    other = find_crossover(w, min_prompt_tokens=256, max_prompt_tokens=32768, steps=12)
    assert other.crossover_prompt_tokens == got.crossover_prompt_tokens
    starts = [lo for lo, _ in other.winning_ranges]
    if other.crossover_prompt_tokens not in starts:
        assert any("read on the calculator's grid" in n for n in other.notes), other.notes


def test_the_reports_gain_table_shows_the_grid_the_crossover_is_read_on():
    """The report's table was on powers of two (128 to 128K) while the crossover is read on
    the calculator's 11-point grid, so the two could disagree (a crossover at 61,147 tokens
    beside a 1.38x gain at 32K). The table now holds the crossover's own points, and the
    crossover read off the table is the verdict's."""
    from disagg_decider.calc.crossover import crossover_from_curve, crossover_grid
    from disagg_decider.render.report import chart_prompt_grid, gain_chart
    from disagg_decider.workload import load_workload, resolve
    from tests.conftest import EXAMPLES

    for path in EXAMPLES:
        w = load_workload(path)
        r = resolve(w)
        chart = gain_chart(r)
        lengths = [p.prompt_tokens for p in chart.points]
        assert {round(p) for p in crossover_grid(r)} <= set(lengths), path.name
        gains = [p.gain for p in chart.points]
        crossover = decide(w).metrics.crossover_prompt_tokens
        own = w.traffic.prompt_tokens.p50
        grid = chart_prompt_grid(r)  # the table's lengths before rounding for print
        assert crossover_from_curve(grid, gains, own) == crossover, path.name


def test_a_narrow_terminal_never_crops_a_catalog_figure(monkeypatch):
    """At 60 columns `decide catalog links` printed the links' efficiency 0.8 as "0": the
    table was drawn in a width that cropped its last column."""
    import re

    from disagg_decider import catalog
    from disagg_decider.catalog_cli import CATALOG_COLUMNS, _catalog_value
    from tests.conftest import run_cli

    records = {r.id: r for r in catalog.links().values()}
    for columns in (56, 60, 63, 64, 80):
        monkeypatch.setenv("COLUMNS", str(columns))
        proc = run_cli("catalog", "links")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert max(len(x.rstrip()) for x in lines) <= columns
        for r in records.values():
            values = [_catalog_value(getattr(r, f)) for f in CATALOG_COLUMNS["links"]]
            row = [x for x in lines if re.match(rf"\s*{re.escape(r.id)}(\s|$)", x)]
            shown = (
                " ".join(row)
                + " "
                + " ".join(lines[lines.index(row[0]) + 1 : lines.index(row[0]) + 3])
            )
            for value in values:
                assert re.search(rf"(^|\s){re.escape(value)}(;|\s|$)", shown), (
                    columns,
                    r.id,
                    value,
                )
