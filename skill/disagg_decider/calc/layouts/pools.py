"""Disaggregated pools on a GPU budget: pooled prefill queues, decode ingress, the best split.

A prefill pool of c replicas behind a load-aware router is one M/G/c queue (`queueing`), so
its rate grows faster than its size; the split of a budget between prefill and decode
replicas is searched with that in mind (`pooled_split`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from disagg_decider.calc.physics import kv
from disagg_decider.calc.physics.kvpath import TransferPath, transfer_times
from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues.array_helpers import clip
from disagg_decider.calc.replicas import decode, prefill
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.mixed_members import PromptMix
from disagg_decider.workload import Resolved


def prefill_pool(
    r: Resolved,
    engine: Engine,
    lengths: Lengths,
    path: TransferPath,
    ttft_ms,
    tps,
    d_tps=None,
    join_ms=None,
    prompts: PromptMix | None = None,
    nodes: tuple[np.ndarray, np.ndarray] | None = None,
) -> prefill.Pool:
    """The prefill pools of every (prefill TP, decode TP): axes (S, Tp, Td), quantiles last.

    A request's service-side TTFT is its prefill, its KV transfer (both grow with its prompt)
    and the decode step it joins; the first token reaches the user once the KV has landed and
    the request joins the decode batch at its next step. By default that step is taken at
    batch 1, which keeps the prefill budget independent of the TPOT target.
    `engine.tp` is (1, T, 1, 1) and the lengths (S, 1, 1, 1) (the search's axes), or
    both (W, 1) with `tps`/`d_tps` (W, 1) for one pair per workload. `prompts`: the rows'
    prompts where some row is a mixed-traffic workload's own (`calc/replicas/mixed_members.py`).
    `nodes`, `prefill_and_transfer_nodes` of the same arguments, may be passed in by a caller
    that reads the transfer times too (the search's receivers).
    """
    if nodes is None:
        nodes = prefill_and_transfer_nodes(r, engine, lengths, path, tps, d_tps, prompts)
    p_nodes, t_nodes = nodes
    if p_nodes.ndim == 4:
        if join_ms is None:
            join_ms = decode.join_step_ms(engine, lengths)[:, :, 0, 0]
            join_ms = join_ms[:, None, :, None]  # (S, 1, Td, 1)
        target = np.asarray(ttft_ms, dtype=float)
    else:
        target = np.ravel(ttft_ms)
    mean, scv = prefill.moments(p_nodes[..., 0, :] if p_nodes.ndim == 4 else p_nodes)
    if p_nodes.ndim == 4:
        mean, scv = mean[:, :, None], scv[:, :, None]
    if prompts is not None:
        mean, scv = prompts.moments(engine, mean, scv)
    nodes = p_nodes + t_nodes + join_ms
    return prefill.Pool(mean_ms=mean, scv=scv, nodes_ms=nodes, target_ms=target)


def transfer_nodes_ms(
    r: Resolved, engine: Engine, lengths: Lengths, path: TransferPath, tps, d_tps=None, prompts=None
) -> np.ndarray:
    """The KV transfer time alone (the part that shows in TTFT) at each prompt quantile, on
    `prefill_pool`'s axes: what a decode receiver's link is busy for per request
    (`ingress_queue`)."""
    return prefill_and_transfer_nodes(r, engine, lengths, path, tps, d_tps, prompts)[1]


def prefill_and_transfer_nodes(r, engine, lengths, path, tps, d_tps=None, prompts=None):
    """(prefill time, transfer time) at each prompt quantile, as `prefill_pool` lays them out:
    (S, Tp, 1, K) and (S, Tp, Td, K) on the search's axes, (W, K) for one pair per row."""
    d_tps = tps if d_tps is None else d_tps
    if prompts is None:
        p_nodes = prefill.service_nodes_ms(engine, lengths)
        u_nodes = prefill.prompt_nodes(lengths) * lengths.uncached_share
    else:
        p_nodes, u_nodes = prompts.service_nodes_ms(engine), prompts.uncached_nodes
    if p_nodes.ndim == 4:  # the search's axes: (S, T, 1, K) -> (S, Tp, 1, K)
        p_nodes = p_nodes[:, :, 0, :][:, :, None, :]
        u = u_nodes[:, :, 0, :]  # (S, 1, K)
        path4 = replace(
            path,
            **{
                f: np.asarray(getattr(path, f)).reshape(-1, 1, 1, 1)
                for f in ("gbps_per_gpu", "efficiency", "latency_ms")
            },
        )
        p4, d4 = np.reshape(tps, (1, -1, 1, 1)), np.reshape(d_tps, (1, 1, -1, 1))
        _, _, t_nodes = transfer_times(r, path4, u[:, :, None, :], p_nodes, p4, d4)
    else:  # one pair per row: (W, K)
        u = u_nodes
        _, _, t_nodes = transfer_times(r, path, u, p_nodes, tps, d_tps)
    return p_nodes, t_nodes


def ingress_rate_per_s(r: Resolved, path: TransferPath, lengths: Lengths, p_tp, d_tp):
    """Requests per second a decode replica can receive: every transfer into it runs on
    min(prefill TP, decode TP) NICs (one shard per rank, as the simulator moves it) and
    transfers into one replica share them; 90% of that is usable."""
    per_request = kv.kv_bytes(r.model, r.workload.kv_dtype, lengths.uncached_mean)
    per_request = np.reshape(per_request, (-1,) + (1,) * (np.ndim(p_tp) - 1))
    bw = path.gb_per_s(p_tp, d_tp)
    return 0.9 * np.asarray(bw) * 1e9 / per_request


SPLIT_PROBES = 4  # sizes a pass of the split's bracketing prices per entry


def pooled_split(budget, p_tp, d_tp, pool: prefill.Pool, d_rate, allowed, rates=None):
    """Best whole split (x prefill, y decode replicas) of every pair, with pooled prefill.

    The best split is exact: the largest min(P(x), D(x)) over every x in 1 .. most, where
    P(x) is the prefill pool's rate at x replicas and D(x) = y(x) d_rate the decode pool's,
    y(x) = floor((budget - x p_tp) / d_tp) (>= 1 up to most, by most's definition); ties go
    to the fewest prefill replicas. It is found by bracketing, not by trying every x:

    - P is non-decreasing in x (a bigger pool carries at least what a smaller one does) and
      D non-increasing (y's floor only steps down as x grows), so g(x) = P(x) - D(x) is
      non-decreasing. Let x* be the last x with g(x) <= 0 (0 where there is none; g(0) <= 0
      with P(0) = 0) and x* + 1 the first with g > 0 (most + 1 where there is none: y <= 0
      there, so g > 0).
    - Up to x*, min(P, D) = P (P(x) <= P(x*) <= D(x*) <= D(x)), non-decreasing: the best of
      them is at x*. Past it, min(P, D) = D, non-increasing: the best is at x* + 1. So the
      maximum is the larger of the two, x* where they tie. A split left of x* ties x* only
      where P is flat up to x* (the pool gains nothing from a replica), and one right of
      x* + 1 can tie it but not beat it, being further right; with ties to the fewest
      prefill replicas this is the split trying every x picks wherever P is increasing.
    - x* is bracketed by lo < hi with g(lo) <= 0 < g(hi): the sizes the estimate prices
      anyway (one replica; the relaxed ideal x of x P = y D, ignoring y's floor, with one
      replica's per-replica rate, then with that size's; the four whole sizes next to it)
      narrow it, most often to one step; where y's floor moved the crossing away from the
      relaxed ideal (a few large decode replicas), passes of `SPLIT_PROBES` sizes spread
      over the bracket close the rest (two or three passes on 32 GPUs).

    The rates are the load bisection's (`rate_where`), non-decreasing in the pool's size on
    every split the tests price one by one (tests/test_split_search.py: the 800-workload
    mix's #420 and generated pools, bit for bit); the bracket stays ordered even if they
    were not.

    Returns (prefill pool rate, served, x, y) of the best split (0, 0, 1, y(1) where no split
    serves anything). `rates`, answering as `rate_where(pool, ...)` does, may be passed in by
    a caller that has some of the pool's rates already (`pool_rates.PoolRates`, which holds
    every size of small splits: their bracket is read off it).
    """
    rate_where_ = (lambda x, m: rate_where(pool, x, m)) if rates is None else rates
    most = np.maximum(np.floor((budget - d_tp) / p_tp), 0.0)
    feasible = allowed & (most >= 1) & (d_rate > 0)
    shape = np.shape(feasible)
    most = np.broadcast_to(most, shape)
    top = np.maximum(most, 1.0)
    shape_1 = (1,) * len(shape)  # a leading axis of sizes broadcasts over the entries

    def decode_served(x):
        return np.floor((budget - x * p_tp) / d_tp) * d_rate

    lo, hi = np.zeros(shape), most + 1.0  # g(lo) <= 0 < g(hi), the sentinels by definition
    p_lo, p_hi = np.zeros(shape), np.zeros(shape)

    def narrow(x, p, mask):
        """Tighten the bracket with P at sizes `x` (a leading axis of sizes or not)."""
        nonlocal lo, hi, p_lo, p_hi
        for xs, ps, ms in zip(*(a.reshape(-1, *shape) for a in (x, p, mask)), strict=True):
            below = ps <= decode_served(xs)
            inside = ms & (xs > lo) & (xs < hi)  # lo < hi holds whatever the rates do
            up, down = inside & below, inside & ~below
            lo, p_lo = np.where(up, xs, lo), np.where(up, ps, p_lo)
            hi, p_hi = np.where(down, xs, hi), np.where(down, ps, p_hi)

    one = rate_where_(np.ones(shape), feasible)
    feasible &= one > 0
    narrow(np.ones(shape), one, feasible)

    def ideal(per_replica):
        with np.errstate(divide="ignore", invalid="ignore"):
            x = budget * d_rate / (p_tp * d_rate + d_tp * per_replica)
        return clip(np.floor(np.where(np.isfinite(x), x, 1.0)), 1.0, top)

    first = ideal(one)  # with one replica's rate: a lower bound on the per-replica rate
    at_first = rate_where_(first, feasible)
    narrow(first, at_first, feasible)
    x0 = ideal(at_first / np.where(feasible, first, 1.0))
    # The four whole sizes next to the estimate, in one pass (a new leading axis).
    x = clip(x0 + np.array([-1.0, 0.0, 1.0, 2.0]).reshape(-1, *shape_1), 1.0, top)
    ask = feasible & (x > lo) & (x < hi)
    narrow(x, rate_where_(x, ask), ask)
    # What is left: SPLIT_PROBES sizes spread over each open bracket per pass, one call each
    # (a call's fixed cost outweighs a few more entries in it); each pass leaves about a
    # fifth of the bracket open, and closes one with at most five sizes inside.
    spread = (np.arange(1.0, SPLIT_PROBES + 1.0) / (SPLIT_PROBES + 1.0)).reshape(-1, *shape_1)
    while (open_ := feasible & (hi - lo > 1.0)).any():
        probes = lo + np.floor((hi - lo) * spread)
        ask = open_ & (probes > lo)
        ask[1:] &= probes[1:] != probes[:-1]  # a size once per entry
        narrow(probes, rate_where_(probes, ask), ask)
    # lo is x* (0: every split is decode-bound), hi = x* + 1 (most + 1: prefill-bound).
    at_lo = np.where(lo >= 1.0, p_lo, -1.0)  # min(P, D) = P at x*
    at_hi = np.where(hi <= most, decode_served(hi), -1.0)  # = D at x* + 1
    take_lo = at_lo >= at_hi
    best_x = np.where(take_lo, lo, hi)
    served = np.where(feasible, np.maximum(at_lo, at_hi), 0.0)
    best_x = np.where(feasible, best_x, 1.0)
    best_p = np.where(feasible, np.where(take_lo, p_lo, p_hi), 0.0)
    best_y = np.floor((budget - best_x * p_tp) / d_tp) * np.ones(shape)
    return best_p, served, best_x, best_y


def every_split_best(budget, p_tp, d_tp, pool: prefill.Pool, d_rate, allowed):
    """(served, x) of the best whole split of every entry, every x priced: the reference that
    `pooled_split` must equal (the fewest prefill replicas on ties; (0, 0) where none serves).

    Kept beside the search so its test and `benchmarks/split_search.py` check it against one
    definition; it prices every size, so it is never on a decision's path.
    """
    most = np.maximum(np.floor((budget - d_tp) / p_tp), 0.0)
    feasible = allowed & (most >= 1) & (d_rate > 0)
    most = np.broadcast_to(most, feasible.shape)
    top = int(np.max(np.where(feasible, most, 1.0)))
    xs = np.arange(1.0, top + 1.0).reshape(-1, *(1,) * feasible.ndim)
    mask = feasible & (xs <= most)
    p = rate_where(pool, np.broadcast_to(xs, mask.shape), mask)
    y = np.floor((budget - xs * p_tp) / d_tp)
    value = np.where(mask & (y >= 1), np.minimum(p, y * d_rate), 0.0)
    k = value.argmax(axis=0)
    best = np.take_along_axis(value, k[None], axis=0)[0]
    return best, np.where(best > 0, k + 1.0, 0.0)


def rate_where(pool: prefill.Pool, servers: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`pool.max_rate_per_s(servers)` where `mask` holds, 0 elsewhere, computing only there.

    Pairs an engine cannot run (and splits that do not fit) are most of some searches; the
    load bisection is the search's costliest step, so it runs on the candidates that count.
    """
    shape = mask.shape
    out = np.zeros(shape)
    if not mask.any():
        return out
    k = np.shape(pool.nodes_ms)[-1]

    def take(a) -> np.ndarray:
        return np.broadcast_to(a, shape)[mask]

    nodes = np.broadcast_to(pool.nodes_ms, (*shape, k))[mask]
    some = prefill.Pool(take(pool.mean_ms), take(pool.scv), nodes, take(pool.target_ms))
    out[mask] = some.max_rate_per_s(np.broadcast_to(servers, shape)[mask])
    return out
