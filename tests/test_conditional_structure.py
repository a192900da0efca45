"""Issue 27, round 6: the conditional search's structural shortcuts give what the plain path gives.

- `thresholds.built` sets a candidate's fields in one update of its dict rather than through
  the frozen dataclass's `__init__` (a call a field): the same object, every field, for every
  candidate the search finds and every amended one;
- `conditional.tp_pairs_many` reads whether the model fits each degree once for the workloads
  of an engine and asks every workload's pair rule in one call: the same pairs, in the same
  order, as asking workload by workload on the workload's own engine (the code before, kept
  here as the reference);
- `conditional_sizing._smaller_splits` lays out the smaller splits as `np.meshgrid` did;
- `threshold_split.split_tables` splits a block's mixes in one pass: each mix's table has the
  bits `split_table` as it was (kept here) gives it alone;
- `conditional_rows.Rows` reads the KV ingress bound the search worked out on the same rows
  (`SearchRows.ingress_at`): the same results with it worked out again.
"""

from __future__ import annotations

import sys
from dataclasses import fields

import numpy as np
import pytest

from disagg_decider.calc import compare
from disagg_decider.calc.layouts import thresholds
from disagg_decider.calc.layouts.layout_choices import (
    engine_for,
    group_key,
)
from disagg_decider.calc.layouts.search import pairs_allowed
from disagg_decider.calc.modes import conditional
from disagg_decider.workload import load_workload, resolve
from tests.conftest import EXAMPLES, ROOT
from tests.random_mixes import random_mixes

sys.path.insert(0, str(ROOT / "benchmarks"))
from workload_mix import workload_mix


@pytest.fixture(scope="module")
def analysed() -> list:
    workloads = [load_workload(p) for p in EXAMPLES] + workload_mix(32, seed=5)
    resolved = [resolve(w, EXAMPLES[0].parent) for w in workloads]
    return list(zip(resolved, compare.analyze_many(resolved), strict=True))


def _by_init(c: thresholds.Candidate) -> thresholds.Candidate:
    return thresholds.Candidate(**{f.name: getattr(c, f.name) for f in fields(c)})


def _same_object(a: thresholds.Candidate, b: thresholds.Candidate) -> None:
    assert type(a) is type(b)
    assert list(vars(a)) == list(vars(b))  # every field, in the order declared
    for name, value in vars(a).items():
        assert value is vars(b)[name] or value == vars(b)[name], name
    assert a == b and repr(a) == repr(b)


def test_candidates_built_in_one_update_equal_those_init_builds(analysed):
    found = 0
    for r, a in analysed:
        pairs = conditional.tp_pairs(r, a.colocated, a.disaggregated)
        for c in thresholds.candidates(r, pairs):
            _same_object(c, _by_init(c))
            amended = thresholds.amended(c, goodput_rate_per_s=1.5, settled=True)
            _same_object(amended, _by_init(amended))
            assert amended.goodput_rate_per_s == 1.5 and amended.row is c.row
            found += 1
    assert found > 100


def test_amending_a_name_that_is_no_field_fails(analysed):
    r, a = next((r, a) for r, a in analysed if a.conditional.layout == "conditional")
    c = thresholds.candidates(r, conditional.tp_pairs(r, a.colocated, a.disaggregated))[0]
    with pytest.raises(TypeError):
        thresholds.amended(c, goodput=1.0)


def _plain_tp_pairs(r, colo, disagg) -> list[tuple[int, int]]:
    """`tp_pairs` as it was: one workload, on its own engine, pair by pair and degree by
    degree (the degrees each role tries are `_pair_options`', which both paths share)."""
    w = r.workload
    out, prefill_tps, decode_tps = conditional._pair_options(r, colo, disagg)
    for p in prefill_tps:
        for d in decode_tps:
            rule = pairs_allowed(w.engine, np.array([p]), np.array([d]), w.cluster.gpus)
            fits = engine_for(r, float(p)).fits() and engine_for(r, float(d)).fits()
            if (p, d) not in out and bool(np.ravel(rule)[0]) and fits:
                out.append((p, d))
    return out


def test_tp_pairs_of_an_engine_at_once_equal_workload_by_workload(analysed):
    groups: dict = {}
    for r, a in analysed:
        groups.setdefault(group_key(r), []).append((r, a.colocated, a.disaggregated))
    assert any(len(g) > 1 for g in groups.values())
    tried = 0
    for modes in groups.values():
        plain = [_plain_tp_pairs(*m) for m in modes]
        assert conditional.tp_pairs_many(modes) == plain
        assert [conditional.tp_pairs(*m) for m in modes] == plain
        tried += sum(len(p) for p in plain)
    assert tried > 50


def _plain_smaller_splits(c, most_gpus: float) -> np.ndarray:
    """`conditional_sizing._smaller_splits`'s grid as it was: `np.meshgrid`, `np.column_stack`."""
    p_tp, d_tp = c.prefill_tp, c.decode_tp
    x_most = int(min(c.prefill_replicas, (most_gpus - d_tp) // p_tp))
    y_most = int(min(c.decode_replicas, (most_gpus - p_tp) // d_tp))
    x, y = np.meshgrid(np.arange(1, max(x_most, 0) + 1), np.arange(1, max(y_most, 0) + 1))
    x, y = x.ravel(), y.ravel()
    gpus = x * p_tp + y * d_tp
    whole = c.prefill_replicas * p_tp + c.decode_replicas * d_tp
    keep = (gpus < whole) & (gpus <= most_gpus)
    return np.column_stack((x[keep], y[keep]))


@pytest.mark.parametrize("most_gpus", [0.0, 3.0, 17.0, 64.0, 1e9])
def test_smaller_splits_are_the_meshgrid_ones_in_order(analysed, most_gpus):
    from disagg_decider.calc.modes import conditional_sizing

    r, a = next((r, a) for r, a in analysed if a.conditional.layout == "conditional")
    c = thresholds.candidates(r, conditional.tp_pairs(r, a.colocated, a.disaggregated))[0]
    for x, y, p_tp, d_tp in [(1, 1, 1, 1), (7, 3, 1, 2), (12, 20, 2, 1), (30, 9, 4, 8)]:
        shaped = thresholds.amended(
            c, prefill_replicas=x, decode_replicas=y, prefill_tp=p_tp, decode_tp=d_tp
        )
        fast = conditional_sizing._smaller_splits(r, shaped, most_gpus)
        assert conditional_sizing._needs_less(r, shaped)
        plain = _plain_smaller_splits(shaped, most_gpus)
        assert fast.shape == plain.shape and fast.dtype == plain.dtype
        assert np.array_equal(fast, plain)


def _plain_split_table(comps, thresholds_: np.ndarray):
    """`threshold_split.split_table` as it was: one mix, its classes on Python floats."""
    import math

    from disagg_decider.calc.layouts.threshold_split import (
        SplitTable,
        _fit,
        _whole_mix,
        partial_moments,
    )
    from disagg_decider.calc.replicas.lengths import Lengths

    t = np.asarray(thresholds_, dtype=float)
    zero = np.zeros(t.shape)
    long_w, long_m1, long_m2, long_c1 = zero, zero, zero, zero
    out_long1 = out_long2 = short_w = short_m1 = short_m2 = short_biased = zero
    for c in comps:
        share = 1.0 - c.hit_rate
        u_p50 = c.prompt_p50 * share
        below0, below1, below2 = partial_moments(u_p50, c.prompt_sigma, t)
        total1 = u_p50 * math.exp(c.prompt_sigma**2 / 2)
        total2 = u_p50**2 * math.exp(2 * c.prompt_sigma**2)
        frac_long = 1.0 - below0
        long_w = long_w + c.weight * frac_long
        long_m1 = long_m1 + c.weight * (total1 - below1)
        long_m2 = long_m2 + c.weight * (total2 - below2)
        long_c1 = long_c1 + c.weight * (total1 - below1) / share * (1.0 - share)
        o1 = c.output_p50 * math.exp(c.output_sigma**2 / 2)
        o2 = c.output_p50**2 * math.exp(2 * c.output_sigma**2)
        out_long1 = out_long1 + c.weight * frac_long * o1
        out_long2 = out_long2 + c.weight * frac_long * o2
        short_w = short_w + c.weight * below0
        short_m1 = short_m1 + c.weight * below1
        short_m2 = short_m2 + c.weight * below2
        biased = c.weight * below1 * below1 / np.where(below0 > 0.0, below0, 1.0)
        short_biased = short_biased + np.where(below0 > 0.0, biased, 0.0)
    whole = _whole_mix(comps)
    ones = np.ones(t.shape)
    fitted = (long_w > 0) & (long_m1 > 0)
    w = np.where(fitted, long_w, 1.0)
    u_p50, u_sigma = _fit(long_m1 / w, long_m2 / w)
    cached_total = long_m1 + long_c1
    hit = np.where(cached_total > 0, long_c1 / np.where(cached_total > 0, cached_total, 1.0), 0.0)
    o_p50, o_sigma = _fit(out_long1 / w, out_long2 / w)
    long = Lengths.build(u_p50 / (1.0 - hit), u_sigma, hit, o_p50, o_sigma)
    if not fitted.all():
        long = Lengths(**{k: np.where(fitted, v, getattr(whole, k)) for k, v in vars(long).items()})
    local = {k: v * ones for k, v in vars(whole).items()}
    has_short = (short_w > 0) & (short_m1 > 0)
    if has_short.any():
        sw = np.where(has_short, short_w, 1.0)
        sm1 = np.where(has_short, short_m1, 1.0)
        s_p50, s_sigma = _fit(short_m1 / sw, short_m2 / sw)
        chunk = short_m1 * (short_biased * short_w / (sm1 * sm1)) if len(comps) > 1 else short_m1
        short = {
            "prompt_p50": s_p50,
            "prompt_sigma": s_sigma,
            "uncached_share": ones,
            "uncached_mean": short_m1,
            "uncached_second_moment": short_m2,
            "uncached_size_biased": short_m2 / np.maximum(short_m1, 1e-9),
            "chunk_prompt_tokens": chunk,
        }
        every = has_short.all()
        for k, v in short.items():
            local[k] = v if every else np.where(has_short, v, local[k])
    return SplitTable(t, long_w, long, Lengths(**local))


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=float)).view(np.int64)


def _same_table(mine, plain) -> None:
    assert np.array_equal(_bits(mine.thresholds), _bits(plain.thresholds))
    assert np.array_equal(_bits(mine.long_share), _bits(plain.long_share))
    for part in ("long", "local"):
        for name, value in vars(getattr(plain, part)).items():
            got = getattr(getattr(mine, part), name)
            assert np.shape(got) == np.shape(value), (part, name)
            assert np.array_equal(_bits(got), _bits(value)), (part, name)


def test_mixes_split_together_get_the_bits_each_gets_alone():
    """`split_tables` on many mixes (1-3 classes, point masses, empty parts at 0 and past
    every prompt) gives every mix the table `split_table` gave it alone, bit for bit."""
    from disagg_decider.calc.layouts.threshold_split import split_table, split_tables

    rng = np.random.default_rng(28)
    many = []
    for comps in random_mixes(rng, 90, point_mass_share=0.15):
        at = np.concatenate([thresholds.thresholds(list(comps)), [0.0, 1e8]])
        many.append((comps, at[: int(rng.integers(1, at.size + 1))]))
    assert any(len(c) == 1 for c, _ in many) and any(len(c) == 3 for c, _ in many)
    assert any(x.prompt_sigma == 0.0 for c, _ in many for x in c)
    together = split_tables(many)
    assert len(together) == len(many)
    for (comps, at), table in zip(many, together, strict=True):
        plain = _plain_split_table(comps, at)
        _same_table(table, plain)
        _same_table(split_table(comps, at), plain)


def test_the_search_s_ingress_bound_read_by_the_lift_equals_computing_it_again(
    analysed, monkeypatch
):
    """`conditional_rows.Rows` takes the KV ingress bound of the search's rows
    (`SearchRows.ingress_at`) rather than work it out again: the same conditional results,
    every float, with it worked out again."""
    from disagg_decider.calc.layouts.threshold_pools import SearchRows

    resolved = [r for r, _ in analysed]
    reused = [a.conditional for a in compare.analyze_many(resolved)]
    calls = {"n": 0}

    def again(self, rows):
        calls["n"] += 1
        return None

    monkeypatch.setattr(SearchRows, "ingress_at", again)
    assert [a.conditional for a in compare.analyze_many(resolved)] == reused
    assert calls["n"] > 0
    assert sum(c.layout == "conditional" for c in reused) >= 5


def test_the_curve_given_as_dicts_holds_the_points_built_one_by_one(analysed):
    """`conditional_choice.chosen_layout` hands the curve to the record as dicts: the record
    holds `ThresholdPoint`s equal to those built one by one, as before."""
    from disagg_decider.calc.result import ThresholdPoint

    points = 0
    for _, a in analysed:
        for p in a.conditional.curve:
            assert type(p) is ThresholdPoint
            assert p == ThresholdPoint(
                threshold_tokens=p.threshold_tokens,
                goodput_per_gpu=p.goodput_per_gpu,
                share_to_prefill=p.share_to_prefill,
            )
            points += 1
    assert points > 100
