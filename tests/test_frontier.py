"""`decide frontier`: Pareto fronts against tokens/s per user, the band, the rate-matched basis,
the plot's data, and the verdict's `interactivity_band`."""

from __future__ import annotations

import functools
import itertools
import json
import math
import random

import pytest

from disagg_decider.decide import decide
from disagg_decider.frontier_map import winner_map
from disagg_decider.frontier_plot import plot_data, write_frontier_png
from disagg_decider.frontier_rate_matched import rate_matched_tokens_per_gpu
from disagg_decider.frontier_sweep import Sweep, frontier, with_targets
from disagg_decider.interactivity import band_intervals, front_at, pareto_mask
from disagg_decider.workload import load_workload, parse_workload
from tests.conftest import EXAMPLES, RAG_EXAMPLE, edited_example, run_cli

CHAT = next(p for p in EXAMPLES if p.stem == "chat-short-colocate")
TCP = next(p for p in EXAMPLES if p.stem == "tcp-25gbe-colocate")
HETERO = next(p for p in EXAMPLES if p.stem == "b200-prefill-h200-decode-dynamo")


@functools.cache
def _frontier(path, basis="p99-under-load", points=16):
    return frontier(load_workload(path), path.parent, Sweep(basis=basis, points=points))


# --- Pareto fronts ------------------------------------------------------------------------------


@pytest.mark.parametrize("basis", ["p99-under-load", "static", "rate-matched"])
@pytest.mark.parametrize("path", [RAG_EXAMPLE, CHAT, TCP], ids=lambda p: p.stem)
def test_each_front_falls_as_interactivity_rises_and_holds_only_pareto_points(path, basis):
    f = _frontier(path, basis)
    for front in f.fronts:
        xs = [p.tokens_per_s_per_user for p in front.points]
        ys = [p.tokens_per_s_per_gpu for p in front.points]
        assert xs == sorted(xs)
        assert all(y > 0 for y in ys)
        assert all(a > b for a, b in itertools.pairwise(ys)), (front.mode, ys)
        # no swept point of the same mode matches or beats a reported point on both axes
        swept = [
            (r.tokens_per_s_per_user, r.modes[front.mode].tokens_per_s_per_gpu) for r in f.rows
        ]
        for x, y in zip(xs, ys, strict=True):
            assert not any(sx > x and sy >= y for sx, sy in swept)
        # and every swept point left out is dominated by one reported
        for sx, sy in swept:
            if sy > 0 and sx not in xs:
                assert any(x >= sx and y >= sy for x, y in zip(xs, ys, strict=True))


def test_pareto_mask_drops_dominated_points() -> None:
    # (10, 5) is beaten by (20, 6); (30, 6) equals (20, 6) in throughput at more interactivity
    assert pareto_mask([10, 20, 30, 40], [5, 6, 6, 0]) == [False, False, True, False]


# --- the verdict at one target is the frontier's winner there ----------------------------------


def _check_winners(w, base_dir, points=4) -> None:
    f = frontier(w, base_dir, Sweep(low_tps_user=12, high_tps_user=150, points=points))
    for row in f.rows:
        v = decide(with_targets(w, row.tpot_target_ms), base_dir=base_dir)
        served = v.colocated.feasible or v.disaggregated.feasible
        assert row.winner == (v.layout if served else None), (w.name, row.tokens_per_s_per_user)
        if row.is_target:
            assert row.winner == (v.layout if served else None)


@pytest.mark.parametrize("path", [RAG_EXAMPLE, CHAT, HETERO], ids=lambda p: p.stem)
def test_single_point_verdict_matches_frontier_winner_on_examples(path) -> None:
    _check_winners(load_workload(path), path.parent)


def test_single_point_verdict_matches_frontier_winner_on_generated_workloads() -> None:
    rng = random.Random(25)
    for k in range(3):
        p50 = rng.choice([512, 2000, 6000])
        data = edited_example(
            RAG_EXAMPLE,
            **{
                "name": f"generated-{k}",
                "traffic.prompt_tokens": {"p50": p50, "p99": p50 * 3},
                "traffic.output_tokens": {"p50": rng.choice([100, 300, 900]), "p99": 2000},
                "traffic.requests_per_second": rng.choice([1, 4, 12]),
                "slo.ttft_ms": rng.choice([800, 2000, 4000]),
            },
        )
        _check_winners(parse_workload(data, "generated"), RAG_EXAMPLE.parent, points=3)


# --- the band -----------------------------------------------------------------------------------


def test_band_edges_are_where_the_two_fronts_cross() -> None:
    xs = [10.0, 20.0, 40.0, 80.0, 160.0]
    colo = [200.0, 150.0, 100.0, 60.0, 20.0]
    split = [150.0, 150.0, 140.0, 110.0, 0.0]
    (low, high, at_low, at_high), *rest = band_intervals(xs, colo, split, 1.1)
    assert not rest and not at_low and not at_high
    assert 20 < low < 40
    assert front_at(low, xs, split) / front_at(low, xs, colo) == pytest.approx(1.1, rel=1e-9)
    assert high == 80.0  # the split stops serving after 80: the last point it was seen to win


def test_frontier_band_edges_cross_on_an_example() -> None:
    f = _frontier(RAG_EXAMPLE, "static")
    b = f.band
    assert b is not None and b.target_inside
    xs = [r.tokens_per_s_per_user for r in f.rows]
    colo = [r.modes["colocated"].tokens_per_s_per_gpu for r in f.rows]
    split = [r.modes["disaggregated"].tokens_per_s_per_gpu for r in f.rows]
    low = b.low_tokens_per_s_per_user
    assert not b.reaches_grid_low and low not in xs
    ratio = front_at(low, xs, split) / front_at(low, xs, colo)
    assert ratio == pytest.approx(b.margin, rel=1e-6)


def test_verdict_carries_the_band_and_says_where_the_target_sits() -> None:
    v = decide(load_workload(RAG_EXAMPLE), base_dir=RAG_EXAMPLE.parent)
    b = v.interactivity_band
    assert b is not None and b.target_inside
    assert (
        b.low_tokens_per_s_per_user
        <= b.target_tokens_per_s_per_user
        <= b.high_tokens_per_s_per_user
    )
    assert "tokens/s per user" in v.summary and "is inside" in v.summary
    chat = decide(load_workload(CHAT), base_dir=CHAT.parent)
    b = chat.interactivity_band
    assert b is not None and not b.target_inside  # the split wins only above chat's 33
    assert b.low_tokens_per_s_per_user > 33.4 and "is below it" in chat.summary
    assert any(r.id == "DSG021" for r in chat.fired_rules)


# --- rate-matched basis -------------------------------------------------------------------------


def test_rate_matched_reproduces_nvidias_formula_on_a_worked_example() -> None:
    # A gen instance on 8 GPUs serves 5 req/s of 1,000 output tokens: 5,000 tok/s. A ctx
    # instance on 4 GPUs prefills 2 req/s, so 2.5 ctx instances (10 GPUs) feed it:
    # 5,000 / (4 x 5 / 2 + 8) = 5,000 / 18 = 277.8 tokens/s per GPU.
    assert rate_matched_tokens_per_gpu(5000.0, 4, 5.0, 2.0, 8) == pytest.approx(5000 / 18)


def test_rate_matched_rows_apply_the_formula_to_their_own_instances() -> None:
    f = _frontier(RAG_EXAMPLE, "rate-matched")
    w = load_workload(RAG_EXAMPLE)
    from disagg_decider.frontier_sweep import output_mean_tokens

    out = output_mean_tokens(w)
    seen = 0
    for r in f.rows:
        p = r.modes["disaggregated"]
        if p.tokens_per_s_per_gpu <= 0:
            continue
        d = p.details
        gpus = d["prefill_tp"] * d["ctx_per_gen"] + d["decode_tp"]
        assert p.tokens_per_s_per_gpu == pytest.approx(d["gen_rate_per_s"] * out / gpus)
        assert d["ctx_per_gen"] == pytest.approx(d["gen_rate_per_s"] / d["ctx_rate_per_s"])
        seen += 1
    assert seen >= 5


# --- the plot keeps single-layout regions -------------------------------------------------------


def test_plot_data_keeps_regions_where_one_layout_alone_meets_the_targets(tmp_path) -> None:
    f = _frontier(RAG_EXAMPLE)
    alone = [r for r in f.rows if r.modes["colocated"].tokens_per_s_per_gpu == 0 and r.winner]
    assert alone, "the RAG example has TPOT targets only a split meets"
    d = plot_data(f)
    assert any(mode == "disaggregated" for _, _, mode in d.only)
    drawn = {x for pts in d.series.values() for x, _ in pts}
    # the highest such target is on the drawn fronts, and inside a shaded 'only' interval
    top = max(r.tokens_per_s_per_user for r in alone)
    assert top in drawn
    assert any(lo <= top <= hi for lo, hi, _ in d.only)
    png = tmp_path / "f.png"
    write_frontier_png(f, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_winner_map_cells_are_the_verdicts_at_both_targets() -> None:
    w = load_workload(RAG_EXAMPLE)
    m = winner_map(
        w, RAG_EXAMPLE.parent, Sweep(low_tps_user=20, high_tps_user=100, points=2), 500, 4000
    )
    cell = m.cells[1][0]
    v = decide(with_targets(w, 1e3 / 20, ttft_ms=4000), base_dir=RAG_EXAMPLE.parent)
    assert cell.winner == v.layout


# --- the command line ---------------------------------------------------------------------------


def test_cli_json_and_user_errors(tmp_path) -> None:
    proc = run_cli("frontier", "-w", str(CHAT), "--points", "3", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["basis"] == "p99-under-load" and len(data["rows"]) == 4  # 3 + the target
    assert math.isclose(data["target_tokens_per_s_per_user"], 1e3 / 30)
    for args, words in [
        (("--basis", "nope"), "nope"),
        (("--low", "50", "--high", "20"), "--low"),
        (("--points", "1"), "--points"),
        (("--plot", str(tmp_path / "x.svg")), ".png"),
    ]:
        bad = run_cli("frontier", "-w", str(CHAT), *args)
        assert bad.returncode == 2 and words in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("path", [RAG_EXAMPLE, CHAT, TCP, HETERO], ids=lambda p: p.stem)
def test_verdict_band_equals_the_frontier_band_on_the_same_coarse_grid(path) -> None:
    """The verdict reads its grid through the search alone (two GPU types: their pools
    searched together); the frontier through whole verdicts. A whole verdict re-prices the
    chosen colocated layout with its replicas' pooled load (`mode_records.colocated_results`),
    which can move its goodput a little off the search's grid reading: on the fitted physics
    the TCP example's colocated TP4 at 43.7 tokens/s per user reads 0.6944 req/s per GPU in
    the search and 0.6914 in the verdict, and the band's low edge 54.15 against 54.07. The
    band's edges and flags agree within 1%, the rest exactly."""
    w = load_workload(path)
    v = decide(w, base_dir=path.parent)
    f = frontier(w, path.parent, Sweep(low_tps_user=10, high_tps_user=400, points=6))
    if v.interactivity_band is None:
        assert f.band is None
        return
    got, want = v.interactivity_band.model_dump(), f.band.model_dump()
    for key, value in want.items():
        assert got[key] == (pytest.approx(value, rel=1e-2) if isinstance(value, float) else value)


def test_map_refuses_a_grid_that_would_price_thousands_of_verdicts() -> None:
    bad = run_cli("frontier", "-w", str(CHAT), "--map", "--points", "64")
    assert bad.returncode == 2 and "at most 24" in bad.stderr and "Traceback" not in bad.stderr
