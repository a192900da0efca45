"""Conditional disaggregation: a prefill pool for long uncached prompts, local prefill for the rest.

Dynamo's router (`eff_isl_threshold`, policy `isl_bounding`) and llm-d's `prefix-based-pd-decider`
(`nonCachedTokens`) send a request to the prefill pool only when its uncached prompt exceeds a
threshold T; shorter prompts are prefilled by the decode worker itself, chunked into its decode
batch (the interference `colocated` prices). So the layout is two pools:

- decode workers: colocated replicas that decode every request but prefill only those with
  u <= T uncached tokens. Their prefill work per arriving request is E[u 1{u <= T}] (a
  zero-inflated service: the long requests queue for no local prefill), the TTFT of a short
  request is priced on the short part of the length distribution, and their KV memory and
  decode context are the whole mix's;
- a prefill pool (`pools.prefill_pool`) serving the long part, u > T, at the long share s of the
  rate, its TTFT including the KV transfer and the join.

Lengths are log-normal (per class for mixed traffic, `disagg_decider.classes`); the part of a
log-normal below or above T has closed-form partial moments, and each part is carried as the
log-normal with its mean and second moment (the calculator's one length shape).

T = 0 is always-disaggregated and "no prefill pool" is colocated: the chooser takes both from
the modes already sized, so the layout's goodput is never below either. Among thresholds within
1% of the best goodput it picks the largest (fewest KV transfers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from disagg_decider.calc import colocated, decode, prefill
from disagg_decider.calc.arrays import sorted_unique
from disagg_decider.calc.kvpath import transfer_path
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.pools import ingress_rate_per_s, prefill_pool
from disagg_decider.calc.result import (
    ColocatedResult,
    ConditionalResult,
    DisaggregatedResult,
    ThresholdPoint,
)
from disagg_decider.calc.search import engine_for, pairs_allowed
from disagg_decider.classes import Component, components, fit_moments, partial_moments
from disagg_decider.workload import Resolved

THRESHOLD_POINTS = 16  # candidate thresholds between the shortest and longest prompts
_NOT_SEARCHED = "heterogeneous pools: routing thresholds are not searched (one GPU type per role); "
NEAR_BEST = 0.99  # thresholds within 1% of the best goodput count as equally good
MIN_SHARE = 1e-3  # a part holding fewer requests than this is not a pool of its own


@dataclass(frozen=True)
class Candidate:
    """One conditional layout on the cluster: threshold, TP pair, chunk and whole pools."""

    threshold_tokens: float
    long_share: float  # requests sent to the prefill pool
    goodput_rate_per_s: float  # within both p99 targets on the whole cluster
    prefill_tp: int
    decode_tp: int
    prefill_replicas: int
    decode_replicas: int
    chunk_tokens: int
    ttft_p99_ms: float | None  # the worse of the two request kinds, at the workload's rate
    tpot_p99_ms: float | None
    pool_rate_per_s: float = 0.0  # total requests the prefill pool admits (its share of them)
    per_replica_rate_per_s: float = 0.0  # a decode worker's capacity read off the grid
    settled: bool = False  # goodput checked against the reported p99s (`settle`)


@dataclass(frozen=True)
class Parts:
    """The length distribution split at T: the prefill pool's part and the decode workers'."""

    long_share: float
    long: Lengths  # requests above T, as one log-normal (scalars)
    local: Lengths  # every request's decode, with the short prompts' local prefill work


def split_at(comps: list[Component], threshold: float) -> Parts:
    """Split the mix of classes at T uncached tokens (moment-matched parts)."""
    long_w = long_m1 = long_m2 = long_c1 = out_long1 = out_long2 = 0.0
    short_w = short_m1 = short_m2 = 0.0
    for c in comps:
        share = 1.0 - c.hit_rate
        # The class's uncached tokens are log-normal with median p50 * share, same sigma.
        u_p50 = c.prompt_p50 * share
        below0, below1, below2 = partial_moments(u_p50, c.prompt_sigma, threshold)
        total1 = u_p50 * math.exp(c.prompt_sigma**2 / 2)
        total2 = u_p50**2 * math.exp(2 * c.prompt_sigma**2)
        frac_long = 1.0 - below0
        long_w += c.weight * frac_long
        long_m1 += c.weight * (total1 - below1)
        long_m2 += c.weight * (total2 - below2)
        long_c1 += c.weight * (total1 - below1) / share * (1.0 - share)  # cached tokens
        o1 = c.output_p50 * math.exp(c.output_sigma**2 / 2)
        o2 = c.output_p50**2 * math.exp(2 * c.output_sigma**2)
        out_long1 += c.weight * frac_long * o1
        out_long2 += c.weight * frac_long * o2
        short_w += c.weight * below0
        short_m1 += c.weight * below1
        short_m2 += c.weight * below2
    whole = batch_weighted(mixture_lengths(comps), comps)
    long = whole
    # A part whose mean cancels to zero (a tail far past T, or below it) has no moments to fit;
    # it keeps the whole mix's lengths at its vanishing share.
    if long_w > 0 and long_m1 > 0:
        u_p50, u_sigma = fit_moments(long_m1 / long_w, long_m2 / long_w)
        hit = long_c1 / (long_m1 + long_c1) if long_m1 + long_c1 > 0 else 0.0
        o_p50, o_sigma = fit_moments(out_long1 / long_w, out_long2 / long_w)
        long = Lengths.build(u_p50 / (1.0 - hit), u_sigma, hit, o_p50, o_sigma)
    local = whole
    if short_w > 0 and short_m1 > 0:
        # The tagged short request's own prompt: the short part's log-normal (uncached share 1
        # so the colocated model's prompt quantiles are uncached tokens). The work per arriving
        # request, short or not, is the zero-inflated E[u 1{u <= T}] and its second moment.
        s_p50, s_sigma = fit_moments(short_m1 / short_w, short_m2 / short_w)
        local = replace(
            whole,
            prompt_p50=np.asarray(s_p50),
            prompt_sigma=np.asarray(s_sigma),
            uncached_share=np.asarray(1.0),
            uncached_mean=np.asarray(short_m1),
            uncached_second_moment=np.asarray(short_m2),
        )
    return Parts(long_share=long_w, long=long, local=local)


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
    the calculator's convention, prompt + output / 2."""
    if len(comps) == 1:
        return lengths
    p = [c.prompt_p50 * math.exp(c.prompt_sigma**2 / 2) for c in comps]
    o = [c.output_p50 * math.exp(c.output_sigma**2 / 2) for c in comps]
    seats = [c.weight * oi for c, oi in zip(comps, o, strict=True)]
    total = sum(seats)
    ctx = sum(s * (pi + oi / 2) for s, pi, oi in zip(seats, p, o, strict=True)) / total
    held = sum(s * (pi + oi) for s, pi, oi in zip(seats, p, o, strict=True)) / total
    return replace(
        lengths,
        decode_context_mean=np.asarray(ctx),
        prompt_mean=np.asarray(held - float(lengths.output_mean)),
    )


def thresholds(comps: list[Component]) -> np.ndarray:
    """Candidate thresholds: log-spaced over the uncached prompts the classes span."""
    lo = min(c.prompt_p50 * (1 - c.hit_rate) * math.exp(-2.5 * c.prompt_sigma) for c in comps)
    hi = max(c.prompt_p50 * (1 - c.hit_rate) * math.exp(2.5 * c.prompt_sigma) for c in comps)
    lo, hi = max(lo, 16.0), max(hi, 32.0)
    grid = np.geomspace(lo, max(hi, lo * 1.01), THRESHOLD_POINTS)
    return sorted_unique(np.maximum(np.round(grid / 16) * 16, 16))


def candidates(r: Resolved, pairs: list[tuple[int, int]]) -> list[Candidate]:
    """Every (threshold, TP pair) with its best whole split of the cluster.

    Goodputs here are read off the colocated capacity grid (an upper bound); `settle` checks
    the ones the choice depends on against the reported p99s.
    """
    w = r.workload
    comps = components(w)
    parts = []
    for threshold in thresholds(comps):
        split = split_at(comps, float(threshold))
        if MIN_SHARE <= split.long_share <= 1.0 - MIN_SHARE:
            parts.append((float(threshold), split))  # else colocated or always-disaggregated
    if not parts:
        return []
    out = []
    for p_tp, d_tp in pairs:
        out.extend(_best_splits(r, parts, p_tp, d_tp))
    return out


def _stack(many: list[Lengths], shape) -> Lengths:
    """Scalar lengths, one per row, as rows of the calculator's axes."""
    return Lengths(
        **{
            k: np.reshape(np.array([float(np.ravel(getattr(x, k))[0]) for x in many]), shape)
            for k in vars(many[0])
        }
    )


def _best_splits(r: Resolved, parts, p_tp: int, d_tp: int) -> list[Candidate]:
    """The best split of the cluster for each threshold, one TP pair, all thresholds at once."""
    w = r.workload
    budget = float(w.cluster.gpus)
    ttft, tpot = float(w.slo.ttft_ms), float(w.slo.tpot_ms)
    chunks = np.asarray(w.efficiency.chunk_tokens, dtype=float)
    x = np.arange(1, max(int((budget - d_tp) // p_tp), 0) + 1, dtype=float)
    y = np.floor((budget - x * p_tp) / d_tp)
    x, y = x[y >= 1], y[y >= 1]
    if x.size == 0:
        return []
    n = len(parts)
    shares = np.array([split.long_share for _, split in parts])
    longs = _stack([split.long for _, split in parts], (-1, 1))
    locals_ = [split.local for _, split in parts]
    d_col = engine_for(r, np.full((n, 1), float(d_tp)))
    join = decode.join_step_ms(d_col, _stack(locals_, (-1, 1)))
    pool = prefill_pool(
        r,
        engine_for(r, np.full((n, 1), float(p_tp))),
        longs,
        transfer_path(r),
        np.full(n, ttft),
        np.full((n, 1), float(p_tp)),
        np.full((n, 1), float(d_tp)),
        join_ms=join,
    )
    wide = prefill.Pool(
        np.asarray(pool.mean_ms)[:, None],
        np.asarray(pool.scv)[:, None],
        np.asarray(pool.nodes_ms)[:, None, :],
        np.asarray(pool.target_ms)[:, None],
    )
    pool_rate = wide.max_rate_per_s(x[None, :]) / shares[:, None]  # (n, X) total requests
    # Decode workers with local prefill: per-replica capacity with y replicas behind the router.
    stacked = _stack(locals_, (-1,))
    rows = Lengths(**{k: np.repeat(v, y.size).reshape(-1, 1, 1) for k, v in vars(stacked).items()})
    colo = colocated.best_points(
        engine_for(r, float(d_tp)),
        rows,
        ttft,
        tpot,
        chunks,
        servers=np.tile(y, n).reshape(-1, 1, 1),
    )
    per_replica = np.reshape(colo.rate_per_s, (n, -1))
    chunk_i = np.reshape(colo.chunk_index, (n, -1))
    # Each decode worker receives its share of the long requests' KV over its NICs.
    ingress = np.ravel(
        ingress_rate_per_s(
            r, transfer_path(r), longs, np.full((n, 1), float(p_tp)), np.full((n, 1), float(d_tp))
        )
    )
    per_replica = np.minimum(per_replica, (ingress / shares)[:, None])
    total = np.minimum(pool_rate, y[None, :] * per_replica)
    out = []
    for t, (threshold, split) in enumerate(parts):
        k = int(total[t].argmax())
        if total[t, k] <= 0:
            continue
        out.append(
            Candidate(
                threshold_tokens=threshold,
                long_share=split.long_share,
                goodput_rate_per_s=float(total[t, k]),
                prefill_tp=p_tp,
                decode_tp=d_tp,
                prefill_replicas=int(x[k]),
                decode_replicas=int(y[k]),
                chunk_tokens=int(chunks[chunk_i[t, k]]),
                ttft_p99_ms=None,
                tpot_p99_ms=None,
                pool_rate_per_s=float(pool_rate[t, k]),
                per_replica_rate_per_s=float(per_replica[t, k]),
            )
        )
    return out


def settle(r: Resolved, c: Candidate) -> Candidate:
    """The candidate with its goodput checked against the reported p99s.

    The colocated search reads capacity off a grid; the decode workers' load is bisected down
    where the reported p99 would overshoot, so a layout that says it meets the SLO does.
    """
    w = r.workload
    split = split_at(components(w), c.threshold_tokens)
    ys = float(c.decode_replicas)
    within = colocated.rate_within_targets(
        *_worker_columns(r, c, split), _col(ys), np.array([c.per_replica_rate_per_s])
    )[0]
    goodput = max(min(c.pool_rate_per_s, ys * float(within)), 0.0)
    return replace(c, goodput_rate_per_s=goodput, settled=True)


def settle_many(r: Resolved, cands: list[Candidate]) -> list[Candidate]:
    """`settle` for many candidates in one vectorised bisection (one row each)."""
    if len(cands) <= 1:
        return [settle(r, c) for c in cands]
    w = r.workload
    comps = components(w)
    n = len(cands)
    local = _stack([split_at(comps, c.threshold_tokens).local for c in cands], (-1, 1))
    column = lambda values: np.array(values, dtype=float).reshape(-1, 1)  # noqa: E731
    ys = np.array([float(c.decode_replicas) for c in cands])
    within = colocated.rate_within_targets(
        engine_for(r, column([c.decode_tp for c in cands])),
        local,
        np.full((n, 1), float(w.slo.ttft_ms)),
        np.full((n, 1), float(w.slo.tpot_ms)),
        column([c.chunk_tokens for c in cands]),
        ys.reshape(-1, 1),
        np.array([c.per_replica_rate_per_s for c in cands]),
    )
    pool = np.array([c.pool_rate_per_s for c in cands])
    goodput = np.maximum(np.minimum(pool, ys * np.ravel(within)), 0.0)
    return [
        replace(c, goodput_rate_per_s=float(g), settled=True)
        for c, g in zip(cands, goodput.tolist(), strict=True)
    ]


def report(r: Resolved, c: Candidate) -> Candidate:
    """The chosen candidate with its p99 TTFT (the worse of local and pooled prefill) and
    TPOT at the workload's rate, capped at its goodput."""
    w = r.workload
    split = split_at(components(w), c.threshold_tokens)
    ys = float(c.decode_replicas)
    rate = min(float(w.traffic.requests_per_second), c.goodput_rate_per_s)
    pool = prefill_pool(
        r,
        engine_for(r, _col(c.prefill_tp)),
        _column(split.long),
        transfer_path(r),
        np.array([w.slo.ttft_ms]),
        _col(c.prefill_tp),
        _col(c.decode_tp),
        join_ms=decode.join_step_ms(engine_for(r, _col(c.decode_tp)), _column(split.local)),
    )
    long_ttft = float(np.ravel(pool.ttft_p99_ms(float(c.prefill_replicas), rate * c.long_share))[0])
    at = _worker_columns(r, c, split)
    short_ttft, tpot99 = colocated.latencies_at_rate(*at, np.array([rate / ys]), _col(ys))
    return replace(
        c, ttft_p99_ms=max(long_ttft, float(short_ttft[0])), tpot_p99_ms=float(tpot99[0])
    )


def _col(v) -> np.ndarray:
    return np.array([[v]], dtype=float)


def _worker_columns(r: Resolved, c: Candidate, split: Parts) -> tuple:
    w = r.workload
    return (
        engine_for(r, float(c.decode_tp)),
        _column(split.local),
        _col(w.slo.ttft_ms),
        _col(w.slo.tpot_ms),
        _col(c.chunk_tokens),
    )


def _column(lengths: Lengths, shape=(-1, 1), rows: int = 1) -> Lengths:
    """Scalar lengths as `rows` rows of the calculator's axes."""
    shape = (rows, *shape[1:])
    return Lengths(
        **{
            k: np.broadcast_to(np.reshape(np.asarray(v, dtype=float), (1,) * len(shape)), shape)
            for k, v in vars(lengths).items()
        }
    )


def choose(
    options: list[tuple[float | None, float]],
) -> int:
    """Index of the chosen (threshold, goodput): the largest threshold within 1% of the best.

    A threshold of None is "no prefill pool" (colocated), larger than any number; 0 is
    always-disaggregated. Fewer KV transfers for the same goodput is the better layout.
    """
    best = max(g for _, g in options)
    near = [i for i, (_, g) in enumerate(options) if g >= NEAR_BEST * best and g > 0]
    if not near:
        return 0
    return max(near, key=lambda i: math.inf if options[i][0] is None else options[i][0])


def tp_pairs(
    r: Resolved, colo: ColocatedResult, disagg: DisaggregatedResult
) -> list[tuple[int, int]]:
    """The TP pairs tried (the disaggregated mode's first): any prefill degree the engine allows
    with the decode workers at the colocated or the decode pool's degree. A prefill pool for a
    share of the requests may want a smaller degree than one for all of them. Plain TP only:
    DP-attention/EP layouts of MoE models are not combined with local prefill here."""
    from disagg_decider.calc.search import TP_CANDIDATES, pinned_layouts

    w = r.workload
    limit = min(w.cluster.gpus, w.cluster.gpus_per_node)
    pins = pinned_layouts(w)

    def options(role: str, default: list[int]) -> list[int]:
        pin = pins[role]
        if pin is None:
            return default
        return [pin.tp] if pin.tp_only else []

    tps = [int(t) for t in TP_CANDIDATES if t <= limit]
    plain = lambda m, side: getattr(m, f"{side}dp", 1) == 1 and getattr(m, f"{side}ep", 1) == 1  # noqa: E731
    decode_tps = {colo.tp} if plain(colo, "") else set()
    if plain(disagg, "decode_"):
        decode_tps.add(disagg.decode_tp)
    ps = options("prefill", tps)
    ds = options("decode", sorted(decode_tps))
    out = []
    if plain(disagg, "prefill_") and plain(disagg, "decode_"):
        out.append((disagg.prefill_tp, disagg.decode_tp))
    for p in ps:
        for d in ds:
            ok = pairs_allowed(w.engine, np.array([p]), np.array([d]), w.cluster.gpus)
            if (
                (p, d) not in out
                and bool(np.ravel(ok)[0])
                and engine_for(r, float(p)).fits()
                and engine_for(r, float(d)).fits()
            ):
                out.append((p, d))
    return out


def best_per_threshold(r: Resolved, found: list[Candidate]) -> dict[float, Candidate]:
    """Per threshold, the best TP pair, settled: candidates are checked in the order of their
    grid goodput (an upper bound) until the best checked one is at least the next bound."""
    groups: dict[float, list[Candidate]] = {}
    for c in found:
        groups.setdefault(c.threshold_tokens, []).append(c)
    for group in groups.values():
        group.sort(key=lambda c: -c.goodput_rate_per_s)
    # Each threshold's top candidate, all checked at once; the rest only where a lower bound
    # could still beat the checked one (rare).
    firsts = settle_many(r, [group[0] for group in groups.values()])
    out = {}
    for (t, group), best in zip(groups.items(), firsts, strict=True):
        for c in group[1:]:
            if best.goodput_rate_per_s >= c.goodput_rate_per_s:
                break
            settled = settle(r, c)
            if settled.goodput_rate_per_s > best.goodput_rate_per_s:
                best = settled
        if best.goodput_rate_per_s > 0:
            out[t] = best
    return out


def evaluate(
    r: Resolved, colo: ColocatedResult, disagg: DisaggregatedResult, search: bool = True
) -> ConditionalResult:
    """The conditional layout: the best threshold with its pools, T = 0 and no pool included.

    Without `search` (heterogeneous inventories, where a decode worker's GPU is not the prefill
    pool's) only the two modes are compared, and the reasons say so.
    """
    budget = float(r.workload.cluster.gpus)
    found: list[Candidate] = []
    if search and (colo.feasible or disagg.feasible):
        pairs = tp_pairs(r, colo, disagg)
        found = candidates(r, pairs)
    by_t = best_per_threshold(r, found)
    options: list[tuple[float | None, float]] = [
        (0.0, disagg.max_rate_per_s if disagg.feasible else 0.0),
        *((t, c.goodput_rate_per_s) for t, c in sorted(by_t.items())),
        (None, colo.max_rate_per_s if colo.feasible else 0.0),
    ]
    curve = [
        ThresholdPoint(
            threshold_tokens=None if t is None else int(t),
            goodput_per_gpu=g / budget,
            share_to_prefill=(1.0 if t == 0.0 else 0.0 if t is None else by_t[t].long_share),
        )
        for t, g in options
    ]
    k = choose(options)
    t, best = options[k]
    common = {
        "curve": curve,
        "gain_over_colocated": _ratio(best, colo.max_rate_per_s if colo.feasible else 0.0),
        "gain_over_disaggregated": _ratio(best, disagg.max_rate_per_s if disagg.feasible else 0.0),
    }
    if t is None:
        return ConditionalResult(
            layout="colocated",
            feasible=colo.feasible,
            threshold_tokens=None,
            threshold_reason=(
                "no layout meets the p99 targets"
                if not colo.feasible
                else "no prefill pool: colocated replicas serve within 1% of the best goodput any "
                "threshold gives, with no KV transfers"
                if search
                else _NOT_SEARCHED + "colocated serves within 1% of always-disaggregated"
            ),
            share_to_prefill=0.0,
            max_rate_per_s=best,
            goodput_per_gpu=best / budget,
            prefill_tp=None,
            decode_tp=colo.tp,
            prefill_replicas=0,
            decode_replicas=colo.replicas,
            chunk_tokens=colo.chunk_tokens,
            ttft_p99_ms=colo.ttft_p99_ms,
            tpot_p99_ms=colo.tpot_p99_ms,
            **common,
        )
    if t == 0.0:
        return ConditionalResult(
            layout="disaggregated",
            feasible=disagg.feasible,
            threshold_tokens=0,
            threshold_reason=(
                "every request goes to the prefill pool: no threshold above 0 comes within 1% "
                "of always-disaggregated goodput"
                if search
                else _NOT_SEARCHED + "always-disaggregated serves more"
            ),
            share_to_prefill=1.0,
            max_rate_per_s=best,
            goodput_per_gpu=best / budget,
            prefill_tp=disagg.prefill_tp,
            decode_tp=disagg.decode_tp,
            prefill_replicas=disagg.prefill_replicas,
            decode_replicas=disagg.decode_replicas,
            chunk_tokens=None,
            ttft_p99_ms=disagg.ttft_p99_ms,
            tpot_p99_ms=disagg.tpot_p99_ms,
            **common,
        )
    c = report(r, by_t[t])
    return ConditionalResult(
        layout="conditional",
        feasible=True,
        threshold_tokens=int(t),
        threshold_reason=(
            f"the largest threshold within 1% of the best goodput per GPU: prompts above {int(t)} "
            f"uncached tokens ({c.long_share:.0%} of requests) go to the prefill pool, the rest "
            "prefill on the decode workers"
        ),
        share_to_prefill=c.long_share,
        max_rate_per_s=best,
        goodput_per_gpu=best / budget,
        prefill_tp=c.prefill_tp,
        decode_tp=c.decode_tp,
        prefill_replicas=c.prefill_replicas,
        decode_replicas=c.decode_replicas,
        chunk_tokens=c.chunk_tokens,
        ttft_p99_ms=c.ttft_p99_ms,
        tpot_p99_ms=c.tpot_p99_ms,
        **common,
    )


def _ratio(a: float, b: float) -> float | None:
    return a / b if a > 0 and b > 0 else None
