"""Issue 27: the mix split at all of a workload's thresholds at once (`threshold_split.split_table`)
gives each threshold the parts the split at that threshold alone gives, which the reference
below computes as the calculator did before, one float at a time (the partial moments' formula
on floats, `classes.fit_moments`, `Lengths.build` on scalars)."""

import math
from dataclasses import replace

import numpy as np

from disagg_decider.calc.layouts import threshold_split
from disagg_decider.calc.layouts.threshold_split import split_at, split_table, thresholds
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.classes import Component, fit_moments
from tests.random_mixes import random_mixes


def _partial_moments(p50: float, sigma: float, threshold: float) -> tuple[float, float, float]:
    """P(X <= T), E[X 1{X <= T}], E[X^2 1{X <= T}] for X log-normal, on floats:
    exp(k mu + k^2 s^2 / 2) Phi((ln T - mu - k s^2) / s)."""
    if threshold <= 0:
        return 0.0, 0.0, 0.0
    if sigma <= 1e-12:
        below = 1.0 if p50 <= threshold else 0.0
        return below, below * p50, below * p50 * p50
    mu, lt = math.log(p50), math.log(threshold)
    phi = [0.5 * math.erfc(-((lt - mu - k * sigma**2) / sigma) / math.sqrt(2.0)) for k in (0, 1, 2)]
    return tuple(math.exp(k * mu + k * k * sigma * sigma / 2) * phi[k] for k in (0, 1, 2))


def _reference(comps: tuple[Component, ...], threshold: float):
    """(long share, long lengths, local lengths) at one threshold, float by float."""
    long_w = long_m1 = long_m2 = long_c1 = out_long1 = out_long2 = 0.0
    short_w = short_m1 = short_m2 = short_biased = 0.0
    for c in comps:
        share = 1.0 - c.hit_rate
        u_p50 = c.prompt_p50 * share
        below0, below1, below2 = _partial_moments(u_p50, c.prompt_sigma, threshold)
        total1 = u_p50 * math.exp(c.prompt_sigma**2 / 2)
        total2 = u_p50**2 * math.exp(2 * c.prompt_sigma**2)
        long_w += c.weight * (1.0 - below0)
        long_m1 += c.weight * (total1 - below1)
        long_m2 += c.weight * (total2 - below2)
        long_c1 += c.weight * (total1 - below1) / share * (1.0 - share)
        o1 = c.output_p50 * math.exp(c.output_sigma**2 / 2)
        o2 = c.output_p50**2 * math.exp(2 * c.output_sigma**2)
        out_long1 += c.weight * (1.0 - below0) * o1
        out_long2 += c.weight * (1.0 - below0) * o2
        short_w += c.weight * below0
        short_m1 += c.weight * below1
        short_m2 += c.weight * below2
        if below0 > 0.0:
            short_biased += c.weight * below1 * below1 / below0
    whole = threshold_split._whole_mix(comps)
    long = whole
    if long_w > 0 and long_m1 > 0:
        u_p50, u_sigma = fit_moments(long_m1 / long_w, long_m2 / long_w)
        hit = long_c1 / (long_m1 + long_c1) if long_m1 + long_c1 > 0 else 0.0
        o_p50, o_sigma = fit_moments(out_long1 / long_w, out_long2 / long_w)
        long = Lengths.build(u_p50 / (1.0 - hit), u_sigma, hit, o_p50, o_sigma)
    local = whole
    if short_w > 0 and short_m1 > 0:
        s_p50, s_sigma = fit_moments(short_m1 / short_w, short_m2 / short_w)
        spread = short_biased * short_w / (short_m1 * short_m1) if len(comps) > 1 else 1.0
        local = replace(
            whole,
            prompt_p50=s_p50,
            prompt_sigma=s_sigma,
            uncached_share=1.0,
            uncached_mean=short_m1,
            uncached_second_moment=short_m2,
            uncached_size_biased=short_m2 / max(short_m1, 1e-9),
            chunk_prompt_tokens=short_m1 * spread if len(comps) > 1 else short_m1,
        )
    return long_w, long, local


def _close(a, b) -> bool:
    a, b = float(a), float(b)
    return a == b or abs(a - b) <= 1e-13 * max(abs(a), abs(b))


def test_every_threshold_row_is_the_split_at_that_threshold():
    rng = np.random.default_rng(27)
    checked = 0
    for comps in random_mixes(rng, 120, point_mass_share=0.1):
        # The search's thresholds, and ones at 0 and past every prompt (a part left empty).
        at = np.concatenate([thresholds(list(comps)), [0.0, 1e8]])
        table = split_table(comps, at)
        for i, t in enumerate(at.tolist()):
            share, long, local = _reference(comps, t)
            row, alone = table.parts(i), split_at(list(comps), t)
            assert _close(row.long_share, share) and alone.long_share == row.long_share
            for mine, ref in ((row.long, long), (row.local, local)):
                for name, value in vars(ref).items():
                    assert _close(getattr(mine, name), value), (comps, t, name)
            for mine, ref in ((alone.long, row.long), (alone.local, row.local)):
                assert all(float(getattr(mine, k)) == float(v) for k, v in vars(ref).items())
            checked += 1
    assert checked > 1000


def test_geomspace_is_numpys_bit_for_bit():
    rng = np.random.default_rng(16)
    for _ in range(5000):
        lo = float(np.exp(rng.uniform(np.log(16.0), np.log(1e6))))
        hi = lo * float(np.exp(rng.uniform(0.001, 9.0)))
        for num in (2, 16, 33):
            ours, numpys = threshold_split.geomspace(lo, hi, num), np.geomspace(lo, hi, num)
            assert np.array_equal(ours.view(np.int64), numpys.view(np.int64)), (lo, hi, num)
