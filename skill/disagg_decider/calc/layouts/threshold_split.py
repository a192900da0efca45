"""The length mix split at routing thresholds T: the prefill pool's part and the decode workers'.

A request goes to the prefill pool when its uncached prompt exceeds T (`calc/modes/conditional.py`
says why). Every class of the mix is log-normal, so the part of it below or above T has
closed-form partial moments (`partial_moments`); each part is carried as the log-normal
with its mean and second moment, the calculator's one length shape.

A workload's search splits it at all its candidate thresholds at once (`split_table`): every
step is the same arithmetic on the thresholds as one array, per class, as the split at one
threshold (`split_at`) does on a float. The transcendental functions run through the very
`math` functions the scalar formulas use (`np.frompyfunc`), and the rest is IEEE arithmetic,
which numpy rounds as Python does: a threshold's row holds the bits `split_at` gives, for a
few numpy calls per class instead of some eighty Python calls per threshold. A block of
workloads splits all its mixes in one such pass (`split_tables`), each row its own bits.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from disagg_decider.calc.queues.array_helpers import sorted_unique
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.classes import (
    Component,
    class_seats,
    class_size_biased,
    fit_moments,
    seat_context_scv,
)

THRESHOLD_POINTS = 16  # candidate thresholds between the shortest and longest prompts

_log = np.frompyfunc(math.log, 1, 1)
_exp = np.frompyfunc(math.exp, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)
_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class Parts:
    """The length distribution split at T: the prefill pool's part and the decode workers'."""

    long_share: float
    long: Lengths  # requests above T, as one log-normal (scalars)
    local: Lengths  # every request's decode, with the short prompts' local prefill work


@dataclass(frozen=True)
class SplitTable:
    """The mix split at each of n thresholds: (n,) shares and the parts' lengths as rows."""

    thresholds: np.ndarray  # (n,)
    long_share: np.ndarray  # (n,)
    long: Lengths  # (n,) per field
    local: Lengths  # (n,) per field

    def parts(self, i: int) -> Parts:
        """Row i as `Parts` of scalars (the row's own bits, nothing computed)."""
        return Parts(
            long_share=float(self.long_share[i]),
            long=Lengths(**{k: v[i] for k, v in vars(self.long).items()}),
            local=Lengths(**{k: v[i] for k, v in vars(self.local).items()}),
        )

    def rows(self, keep: np.ndarray) -> SplitTable:
        """The table at some rows (a mask or indices)."""
        return SplitTable(
            self.thresholds[keep],
            self.long_share[keep],
            self.long.at(keep),
            self.local.at(keep),
        )


def split_at(comps: list[Component], threshold: float) -> Parts:
    """Split the mix of classes at T uncached tokens (moment-matched parts): `split_table`
    at one threshold.

    Cached: the settling of candidates and the report of the chosen one may split the same
    workload at the same threshold. The parts are shared, so callers never modify them.
    """
    return _split_at(tuple(comps), float(threshold))


@lru_cache(maxsize=1024)
def _split_at(comps: tuple[Component, ...], threshold: float) -> Parts:
    row = split_table(comps, np.array([threshold])).parts(0)
    as_0d = lambda v: np.asarray(v, dtype=float)  # noqa: E731  (the scalar fields' type)
    return Parts(row.long_share, row.long.map(as_0d), row.local.map(as_0d))


def partial_moments(p50: float, sigma: float, thresholds: np.ndarray) -> tuple:
    """P(X <= T), E[X 1{X <= T}], E[X^2 1{X <= T}] at every threshold T (0 where T <= 0), for X
    log-normal with median p50 and shape sigma:

        E[X^k 1{X <= T}] = exp(k mu + k^2 s^2 / 2) Phi((ln T - mu - k s^2) / s).

    Element by element through `math`'s own log and erfc, so a threshold's values are the
    formula's bits on floats whether it is asked alone (`local_prefill_share`) or with a
    workload's whole grid of thresholds (`split_table`).
    """
    t = np.asarray(thresholds, dtype=float)
    positive = t > 0
    if sigma <= 1e-12:
        below = np.where(positive & (p50 <= t), 1.0, 0.0)
        return below, below * p50, below * p50 * p50
    mu = math.log(p50)
    lt = _log(np.where(positive, t, 1.0)).astype(float)
    out = []
    for k in (0, 1, 2):
        scale = math.exp(k * mu + k * k * sigma * sigma / 2)
        z = (lt - mu - k * sigma**2) / sigma
        phi = 0.5 * _erfc(-z / _SQRT2).astype(float)
        out.append(np.where(positive, scale * phi, 0.0))
    return out[0], out[1], out[2]


def _fit(mean: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`classes.fit_moments` element by element, where mean > 0 (1 and 0 elsewhere)."""
    mean = np.where(mean > 0, mean, 1.0)
    ratio = np.maximum(second / (mean * mean), 1.0)
    var_log = np.maximum(_log(ratio).astype(float), 0.0)
    return mean / _exp(var_log / 2.0).astype(float), np.sqrt(var_log)


def split_table(comps: tuple[Component, ...], thresholds: np.ndarray) -> SplitTable:
    """The mix split at every threshold (n,), as `split_at` splits it at one."""
    return split_tables([(comps, thresholds)])[0]


# Per class of a mix, its numbers as the partial moments and the split read them (one column
# of `_class_columns` per workload): worked out on floats, as the formulas on one threshold do.
_COLUMNS = (
    "weight", "share", "p50", "sigma", "flat", "mu", "scale0", "scale1", "scale2",
    "shift0", "shift1", "shift2", "total1", "total2", "o1", "o2",
)  # fmt: skip
# A workload with fewer classes than the block's most reads a class of weight 0 in their place
# (every term it adds is a signed zero: each sum keeps its bits), with finite moments.
_ABSENT = Component(0.0, 1.0, 1.0, 0.0, 1.0, 1.0)


def _class_numbers(c: Component) -> tuple[float, ...]:
    """`_COLUMNS` of one class, each the float `split_table` on that class alone computes."""
    share = 1.0 - c.hit_rate
    u_p50 = c.prompt_p50 * share
    sigma = c.prompt_sigma
    flat = sigma <= 1e-12  # a point mass: `partial_moments`' first case
    point = 1.0 if flat else 0.0
    mu = 0.0 if flat else math.log(u_p50)
    scales = [1.0 if flat else math.exp(k * mu + k * k * sigma * sigma / 2) for k in (0, 1, 2)]
    return (
        c.weight,
        share,
        u_p50,
        sigma,
        point,
        mu,
        *scales,
        *[k * sigma**2 for k in (0, 1, 2)],
        u_p50 * math.exp(sigma**2 / 2),
        u_p50**2 * math.exp(2 * sigma**2),
        c.output_p50 * math.exp(c.output_sigma**2 / 2),
        c.output_p50**2 * math.exp(2 * c.output_sigma**2),
    )


def split_tables(many: list[tuple[tuple[Component, ...], np.ndarray]]) -> list[SplitTable]:
    """`split_table` of several mixes, each at its own thresholds, in one pass: every row (a
    mix at one threshold) goes through the arithmetic `split_table` does on its own, element
    by element, with each class's numbers worked out on floats as there (`_class_numbers`);
    a mix with fewer classes adds zeros in place of the missing ones. So each row gets the
    bits it gets alone, for one pass of numpy calls per block instead of per workload."""
    each = [np.asarray(t, dtype=float).reshape(-1) for _, t in many]
    counts = [x.size for x in each]
    t = each[0] if len(each) == 1 else np.concatenate(each)
    classes = max(len(comps) for comps, _ in many)
    zero = np.zeros(t.shape)
    long_w, long_m1, long_m2, long_c1 = zero, zero, zero, zero
    out_long1 = out_long2 = short_w = short_m1 = short_m2 = short_biased = zero
    positive = t > 0
    lt = _log(np.where(positive, t, 1.0)).astype(float)
    for k in range(classes):
        numbers = [_class_numbers(comps[k] if k < len(comps) else _ABSENT) for comps, _ in many]
        columns = np.array(numbers, dtype=float).T.repeat(counts, axis=1)
        col = dict(zip(_COLUMNS, columns, strict=True))
        below0, below1, below2 = _partial_rows(col, t, positive, lt)
        w, total1 = col["weight"], col["total1"]
        frac_long = 1.0 - below0
        long_w = long_w + w * frac_long
        long_m1 = long_m1 + w * (total1 - below1)
        long_m2 = long_m2 + w * (col["total2"] - below2)
        long_c1 = long_c1 + w * (total1 - below1) / col["share"] * (1.0 - col["share"])  # cached
        out_long1 = out_long1 + w * frac_long * col["o1"]
        out_long2 = out_long2 + w * frac_long * col["o2"]
        short_w = short_w + w * below0
        short_m1 = short_m1 + w * below1
        short_m2 = short_m2 + w * below2
        biased = w * below1 * below1 / np.where(below0 > 0.0, below0, 1.0)
        short_biased = short_biased + np.where(below0 > 0.0, biased, 0.0)
    # The whole mix's fields, each workload's value on its rows (copies: the same bits).
    wholes = [vars(_whole_mix(comps)) for comps, _ in many]
    values = np.array([list(x.values()) for x in wholes], dtype=float).T.repeat(counts, axis=1)
    whole = dict(zip(wholes[0], values, strict=True))
    # A part whose mean cancels to zero (a tail far past T, or below it) has no moments to fit;
    # it keeps the whole mix's lengths at its vanishing share.
    fitted = (long_w > 0) & (long_m1 > 0)
    w = np.where(fitted, long_w, 1.0)
    u_p50, u_sigma = _fit(long_m1 / w, long_m2 / w)
    cached_total = long_m1 + long_c1
    hit = np.where(cached_total > 0, long_c1 / np.where(cached_total > 0, cached_total, 1.0), 0.0)
    o_p50, o_sigma = _fit(out_long1 / w, out_long2 / w)
    long = Lengths.build(u_p50 / (1.0 - hit), u_sigma, hit, o_p50, o_sigma)
    if not fitted.all():
        long = Lengths(**{k: np.where(fitted, v, whole[k]) for k, v in vars(long).items()})
    local = dict(whole)
    has_short = (short_w > 0) & (short_m1 > 0)
    if has_short.any():
        # The tagged short request's own prompt: the short part's log-normal (uncached share 1
        # so the colocated model's prompt quantiles are uncached tokens). The work per arriving
        # request, short or not, is the zero-inflated E[u 1{u <= T}] and its second moment.
        sw = np.where(has_short, short_w, 1.0)
        sm1 = np.where(has_short, short_m1, 1.0)
        s_p50, s_sigma = _fit(short_m1 / sw, short_m2 / sw)
        # The prompt a locally chunked token belongs to: the convention (the work per arriving
        # request) times 1 + the spread between the classes' local prompts
        # (`classes.chunk_prompt_tokens`): sum(w m1^2 / m0) x sum(w m0) / sum(w m1)^2 with m0,
        # m1 a class's share and tokens below T; exactly 1 for a mix of one class.
        several = [len(comps) > 1 for comps, _ in many]
        chunk = short_m1 * (short_biased * short_w / (sm1 * sm1))
        if not all(several):
            chunk = np.where(np.array(several).repeat(counts), chunk, short_m1)
        short = {
            "prompt_p50": s_p50,
            "prompt_sigma": s_sigma,
            "uncached_share": zero + 1.0,
            "uncached_mean": short_m1,
            "uncached_second_moment": short_m2,
            "uncached_size_biased": short_m2 / np.maximum(short_m1, 1e-9),
            "chunk_prompt_tokens": chunk,
        }
        every = has_short.all()
        for k, v in short.items():
            local[k] = v if every else np.where(has_short, v, local[k])
    table = SplitTable(t, long_w, long, Lengths(**local))
    if len(many) == 1:
        return [table]
    starts = itertools.accumulate(counts, initial=0)
    return [table.rows(slice(a, b)) for a, b in itertools.pairwise(starts)]


def _partial_rows(col: dict, t: np.ndarray, positive: np.ndarray, lt: np.ndarray) -> tuple:
    """`partial_moments` of one class per row (its numbers in `col`, (N,) each) at each row's
    threshold: the formula's operations on the same floats, a point mass where `flat`."""
    flat = col["flat"] > 0
    some_flat = flat.any()
    sigma = col["sigma"]
    if some_flat:
        p50 = col["p50"]
        below = np.where(positive & (p50 <= t), 1.0, 0.0)
        point = (below, below * p50, below * p50 * p50)
        sigma = np.where(flat, 1.0, sigma)  # (a point mass's rows read `point`)
    out = []
    for k in (0, 1, 2):
        z = (lt - col["mu"] - col[f"shift{k}"]) / sigma
        phi = 0.5 * _erfc(-z / _SQRT2).astype(float)
        moment = np.where(positive, col[f"scale{k}"] * phi, 0.0)
        out.append(np.where(flat, point[k], moment) if some_flat else moment)
    return out[0], out[1], out[2]


@lru_cache(maxsize=256)
def _whole_mix(comps: tuple[Component, ...]) -> Lengths:
    """The whole mix as the decode batch sees it: the same at every threshold."""
    return batch_weighted(mixture_lengths(list(comps)), list(comps))


def mixture_lengths(comps: list[Component]) -> Lengths:
    """The whole mix as one log-normal prompt and output (mean and second moment kept)."""
    p1 = sum(c.weight * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps)
    p2 = sum(c.weight * c.prompt_p50**2 * math.exp(2 * c.prompt_sigma**2) for c in comps)
    u1 = sum(
        c.weight * (1 - c.hit_rate) * c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps
    )
    o1 = sum(c.weight * c.output_p50 * math.exp(c.output_sigma**2 / 2) for c in comps)
    o2 = sum(c.weight * c.output_p50**2 * math.exp(2 * c.output_sigma**2) for c in comps)
    p50, sigma = fit_moments(p1, p2)
    o50, osigma = fit_moments(o1, o2)
    return Lengths.build(p50, sigma, 1.0 - u1 / p1, o50, osigma)


def batch_weighted(lengths: Lengths, comps: list[Component]) -> Lengths:
    """The mix as a decode batch sees it: a request stays in the batch for its output, so
    classes with long outputs fill more of it (Little's law per class). The batch's mean
    context and KV held per sequence are weighted by output length; with one class this is
    the calculator's convention (`Lengths.decode_context_mean`, `decode.held_tokens`)."""
    if len(comps) == 1:
        return lengths
    seats, p, o = class_seats(comps)  # o: the output a seat of each class holds
    total = sum(seats)
    ctx = sum(s * (pi + oi / 2) for s, pi, oi in zip(seats, p, o, strict=True)) / total
    held = sum(s * (pi + oi) for s, pi, oi in zip(seats, p, o, strict=True)) / total
    # `decode.held_tokens` reads prompt_mean + output_mean exp(sigma^2): set so it gives `held`.
    seat_output = float(lengths.output_mean * np.exp(np.square(lengths.output_sigma)))
    return replace(
        lengths,
        decode_context_mean=np.asarray(ctx),
        prompt_mean=np.asarray(held - seat_output),
        chunk_prompt_tokens=np.asarray(class_size_biased(comps)),
        context_scv=np.asarray(seat_context_scv(comps)),
    )


def thresholds(comps: list[Component]) -> np.ndarray:
    """Candidate thresholds: log-spaced over the uncached prompts the classes span."""
    lo = min(c.prompt_p50 * (1 - c.hit_rate) * math.exp(-2.5 * c.prompt_sigma) for c in comps)
    hi = max(c.prompt_p50 * (1 - c.hit_rate) * math.exp(2.5 * c.prompt_sigma) for c in comps)
    lo, hi = max(lo, 16.0), max(hi, 32.0)
    grid = geomspace(lo, max(hi, lo * 1.01), THRESHOLD_POINTS)
    return sorted_unique(np.maximum(np.round(grid / 16) * 16, 16))


def geomspace(lo: float, hi: float, num: int) -> np.ndarray:
    """`np.geomspace(lo, hi, num)` for 0 < lo < hi and num >= 2, the same bits: numpy's own
    steps (powers of 10 of an even grid in log10, built as `np.linspace` builds it, the ends
    set to lo and hi) without its layers of argument handling (some 40 calls a workload)."""
    log_lo, log_hi = np.log10(lo), np.log10(hi)
    y = np.arange(num, dtype=float) * ((log_hi - log_lo) / (num - 1)) + log_lo
    y[-1] = log_hi
    out = np.power(10.0, y)
    out[0], out[-1] = lo, hi
    return out
