"""Disaggregated pools on a GPU budget: pooled prefill queues, decode ingress, the best split.

A prefill pool of c replicas behind a load-aware router is one M/G/c queue (`queueing`), so
its rate grows faster than its size; the split of a budget between prefill and decode
replicas is searched with that in mind (`pooled_split`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from disagg_decider.calc import decode, kv, prefill
from disagg_decider.calc.classes import PromptMix
from disagg_decider.calc.kvpath import TransferPath, transfer_times
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.step import Engine
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
) -> prefill.Pool:
    """The prefill pools of every (prefill TP, decode TP): axes (S, Tp, Td), quantiles last.

    A request's service-side TTFT is its prefill, its KV transfer (both grow with its prompt)
    and the decode step it joins; the first token reaches the user once the KV has landed and
    the request joins the decode batch at its next step. By default that step is taken at
    batch 1, which keeps the prefill budget independent of the TPOT target.
    `engine.tp` is (1, T, 1, 1) and the lengths (S, 1, 1, 1) (the search's axes), or
    both (W, 1) with `tps`/`d_tps` (W, 1) for one pair per workload. `prompts`: the rows'
    prompts where some row is a mixed-traffic workload's own (`calc/classes.py`).
    """
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
        if join_ms is None:
            join_ms = decode.join_step_ms(engine, lengths)[:, :, 0, 0]
            join_ms = join_ms[:, None, :, None]  # (S, 1, Td, 1)
        target = np.asarray(ttft_ms, dtype=float)
    else:  # one pair per row: (W, K)
        u = u_nodes
        _, _, t_nodes = transfer_times(r, path, u, p_nodes, tps, d_tps)
        target = np.ravel(ttft_ms)
    mean, scv = prefill.moments(p_nodes[..., 0, :] if p_nodes.ndim == 4 else p_nodes)
    if p_nodes.ndim == 4:
        mean, scv = mean[:, :, None], scv[:, :, None]
    if prompts is not None:
        mean, scv = prompts.moments(engine, mean, scv)
    nodes = p_nodes + t_nodes + join_ms
    return prefill.Pool(mean_ms=mean, scv=scv, nodes_ms=nodes, target_ms=target)


def ingress_rate_per_s(r: Resolved, path: TransferPath, lengths: Lengths, p_tp, d_tp):
    """Requests per second a decode replica can receive: every transfer into it runs on
    min(prefill TP, decode TP) NICs (one shard per rank, as the simulator moves it) and
    transfers into one replica share them; 90% of that is usable."""
    per_request = kv.kv_bytes(r.model, r.workload.kv_dtype, lengths.uncached_mean)
    per_request = np.reshape(per_request, (-1,) + (1,) * (np.ndim(p_tp) - 1))
    bw = path.gb_per_s(p_tp, d_tp)
    return 0.9 * np.asarray(bw) * 1e9 / per_request


def pooled_split(budget, p_tp, d_tp, pool: prefill.Pool, d_rate, allowed, rates=None):
    """Best whole split (x prefill, y decode replicas) of every pair, with pooled prefill.

    A pool's rate grows faster than its size (pooling), so the ideal x of the relaxed problem
    (x P = y D) is found with the per-replica rate of a pool near that size, then the whole
    sizes next to it are tried exactly. Returns (prefill pool rate, served, x, y). `rates`,
    answering as `rate_where(pool, ...)` does, may be passed in by a caller that has some of
    the pool's rates already (`pool_rates.PoolRates`).
    """
    rate_where_ = (lambda x, m: rate_where(pool, x, m)) if rates is None else rates
    most = np.maximum(np.floor((budget - d_tp) / p_tp), 0.0)
    top = np.maximum(most, 1.0)
    feasible = allowed & (most >= 1) & (d_rate > 0)
    one = rate_where_(np.ones(np.shape(feasible)), feasible)
    feasible &= one > 0

    def ideal(per_replica):
        with np.errstate(divide="ignore", invalid="ignore"):
            x = budget * d_rate / (p_tp * d_rate + d_tp * per_replica)
        return np.clip(np.floor(np.where(np.isfinite(x), x, 1.0)), 1.0, top)

    first = ideal(one)  # with one replica's rate: a lower bound on the per-replica rate
    x0 = ideal(rate_where_(first, feasible) / first)
    # The whole sizes next to the ideal, all four in one pass (a new leading axis).
    x = np.clip(x0 + np.array([-1.0, 0.0, 1.0, 2.0]).reshape(-1, *[1] * np.ndim(x0)), 1.0, top)
    p = rate_where_(x, np.broadcast_to(feasible, x.shape))
    y = np.floor((budget - x * p_tp) / d_tp)
    value = np.where(feasible & (y >= 1), np.minimum(p, y * d_rate), 0.0)
    k = value.argmax(axis=0)[None]
    best, best_x, best_y, best_p = (
        np.take_along_axis(np.broadcast_to(v, value.shape), k, axis=0)[0] for v in (value, x, y, p)
    )
    return best_p, best, best_x, best_y


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
