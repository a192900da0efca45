"""The cross split of a heterogeneous inventory: prefill on the prefill pool's GPU type (and on
decode-pool GPUs decode leaves free), decode on the decode pool's, each request's KV over the
cluster network between them.

`hetero.py` compares it with each pool's homogeneous use of its GPUs and reports the modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.layouts import split_grid
from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.pools import ingress_rate_per_s, prefill_pool
from disagg_decider.calc.layouts.search import members_of, pairs_allowed
from disagg_decider.calc.physics.kvpath import TransferPath, transfer_times
from disagg_decider.calc.replicas import decode, prefill
from disagg_decider.workload import Resolved


def network_path(r: Resolved) -> TransferPath:
    """KV between the pools always crosses the cluster network."""
    link = r.link
    return TransferPath("network", r.link_gbps, link.efficiency, link.latency_us / 1e3, link.rdma)


@dataclass(frozen=True)
class CrossSplit:
    """Prefill on the prefill pool (and on decode-pool GPUs decode leaves free), decode on the
    decode pool: the best layouts, replica counts and the pooled prefill queues behind them."""

    served_per_s: float  # within both pools
    p_layout: tuple[int, int, int]  # (tp, dp, ep) on the prefill pool
    d_layout: tuple[int, int, int]
    spill_layout: tuple[int, int, int]  # prefill layout on spare decode-pool GPUs
    p_pool: prefill.Pool  # the prefill pool's M/G/c queue for this pair (scalars)
    spill_pool: prefill.Pool
    d_rate: float  # per decode replica, KV ingress included
    p_replicas: int  # within the cluster
    d_replicas: int
    spill_replicas: int
    d_batch: float
    transfer_p99_ms: float


def _pools(r: Resolved, m, lengths, ttft_ms: float, path, ld, join) -> prefill.Pool:
    """Prefill pools of every (prefill layout on r's GPU, decode layout): axes (1, Tp, Td)."""
    lp = m.layouts
    e_p = engine_for(r, *(lp[k].reshape(1, -1, 1, 1) for k in ("tp", "dp", "ep")))
    target = np.full((1, 1, 1), ttft_ms)
    return prefill_pool(r, e_p, lengths, path, target, lp["tp"], ld["tp"], join_ms=join)


def _pick(pool: prefill.Pool, i: int, j: int) -> prefill.Pool:
    """One pair's queue out of the pools of every pair, as scalars (nodes keep their axis)."""
    at = lambda a: np.broadcast_to(a, np.shape(pool.nodes_ms)[:-1])[0, i, j]  # noqa: E731
    nodes = np.broadcast_to(pool.nodes_ms, np.shape(pool.nodes_ms))[0, i, j]
    return prefill.Pool(at(pool.mean_ms), at(pool.scv), nodes, at(pool.target_ms))


def _rates(pool: prefill.Pool, servers: np.ndarray) -> np.ndarray:
    """Max rate of the pools (1, T, Td) at `servers` (T, Td, *extra) replicas; 0 for none."""
    extra = servers.ndim - 2
    grow = (slice(None),) * 3 + (None,) * extra
    nodes = np.asarray(pool.nodes_ms)
    stretched = prefill.Pool(
        np.asarray(pool.mean_ms)[grow],
        np.asarray(pool.scv)[grow],
        nodes[(slice(None),) * 3 + (None,) * extra + (slice(None),)],
        np.asarray(pool.target_ms)[grow],
    )
    rate = stretched.max_rate_per_s(np.maximum(servers, 1.0)[None])[0]
    return np.where(servers >= 1, rate, 0.0)


def cross_split(rp: Resolved, rd: Resolved) -> CrossSplit | None:
    """Every allowed (prefill layout on rp's GPU, decode layout on rd's GPU, prefill layout for
    spare rd GPUs) and decode replica count, as `search` prices the disaggregated side (pooled
    prefill queues, decode ingress per pair), each pool within its own GPU count."""
    mp, md = members_of([rp]), members_of([rd])
    rows = mp.rows([mp.prompt_p50[:1]])
    lengths = rows.lengths
    lp, ld = mp.layouts, md.layouts
    axis = (1, -1, 1, 1)
    e_d = engine_for(rd, *(ld[k].reshape(axis) for k in ("tp", "dp", "ep")))
    path = network_path(rp)
    d_point = decode.replica_capacity(e_d, lengths, rows.tpot_ms)
    d_alone = np.where(md.allowed["decode"][0], d_point.rate_per_s[0, :, 0, 0], 0.0)  # (Td,)

    def ingress(src_tp: np.ndarray) -> np.ndarray:  # (Tsrc, Td)
        rate = ingress_rate_per_s(rp, path, lengths, src_tp[None, :, None], ld["tp"][None, None])
        return (np.asarray(rate) * ld["dp"][None, None, :])[0]

    join = decode.join_step_ms(e_d, lengths)[:, :, 0, 0][:, None, :, None]  # (1, 1, Td, 1)
    ttft = float(np.ravel(rows.ttft_ms)[0])
    pool_p = _pools(rp, mp, lengths, ttft, path, ld, join)  # (1, Tp, Td)
    pool_s = _pools(rd, md, lengths, ttft, path, ld, join)  # (1, Ts, Td)
    rule = lambda lay: pairs_allowed(rp.workload.engine, lay["tp"], ld["tp"], np.inf)  # noqa: E731
    ok_p = mp.allowed["prefill"][0][:, None] & rule(lp)  # (Tp, Td)
    ok_s = md.allowed["prefill"][0][:, None] & rule(ld)  # (Ts, Td)
    n_p, n_d = rp.workload.cluster.gpus, rd.workload.cluster.gpus
    x = n_p // lp["gpus"]  # (Tp,) prefill replicas filling the prefill pool
    p_cap = np.where(ok_p, _rates(pool_p, np.broadcast_to(x[:, None], ok_p.shape)), 0.0)
    d_p, d_s = ingress(lp["tp"]), ingress(ld["tp"])  # (Tp, Td), (Ts, Td)
    n_tp, n_td, n_ts = len(lp["gpus"]), len(ld["gpus"]), len(md.layouts["gpus"])
    shape = (n_tp, n_td, n_ts)

    def spill_of(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(GPUs left, prefill replicas of layout s on them) at y decode replicas: y on axes
        (Tp, Td, Ts, G)."""
        free = n_d - y * ld["gpus"][None, :, None, None]
        spill = np.maximum(free, 0) // md.layouts["gpus"][None, None, :, None]
        return free, np.where(ok_s.T[None, :, :, None], spill, 0)

    def d_rate_of(spill: np.ndarray) -> np.ndarray:
        """Per decode replica, capped by the ingress of every prefill side it receives from."""
        d_rate = np.minimum(d_alone[None, :, None, None], d_p[:, :, None, None])
        return np.where(spill > 0, np.minimum(d_rate, d_s.T[None, :, :, None]), d_rate)

    def price(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Served rate and decode less prefill capacity at each entry's decode replica counts:
        spare decode-pool GPUs run prefill replicas of layout s."""
        y = sizes.reshape(*shape, -1)
        free, spill = spill_of(y)
        g = y.shape[-1]
        flat = spill.transpose(2, 1, 0, 3).reshape(n_ts, n_td, n_tp * g).astype(float)
        s_cap = _rates(pool_s, flat).reshape(n_ts, n_td, n_tp, g).transpose(2, 1, 0, 3)
        prefill_cap = p_cap[:, :, None, None] + s_cap
        decode_cap = y * d_rate_of(spill)
        served = np.where(free >= 0, np.minimum(prefill_cap, decode_cap), -1.0)
        return served.reshape(sizes.shape), (decode_cap - prefill_cap).reshape(sizes.shape)

    # Decode replicas from 1 to what the decode pool holds, per (prefill, decode, spill)
    # layout: every count on a small pool, narrowed brackets on a large one (`split_grid`).
    most = np.broadcast_to((n_d // ld["gpus"])[None, :, None], shape)
    value, count = split_grid.best_sizes(price, most)
    e = int(value.argmax())
    if value[e] <= 0:
        return None
    i, j, k = (int(v) for v in np.unravel_index(e, shape))
    y_best = np.full((1, 1, 1, 1), count[e])
    _, spill_best = spill_of(np.broadcast_to(y_best, (1, n_td, n_ts, 1)))
    served_best = float(value[e])

    def layout(lay, index) -> tuple[int, int, int]:
        return (int(lay["tp"][index]), int(lay["dp"][index]), int(lay["ep"][index]))

    uses_p = p_cap[i, j] > 0
    e_p = engine_for(rp, *(lp[key].reshape(axis) for key in ("tp", "dp", "ep")))
    u99 = float(np.ravel(lengths.prompt_p99 * lengths.uncached_share)[0])
    p99 = float(prefill.p99_prefill_ms(e_p, lengths)[0, i, 0, 0])
    _, _, t99 = transfer_times(rp, path, u99, p99, int(lp["tp"][i]), int(ld["tp"][j]))
    return CrossSplit(
        served_per_s=served_best,
        p_layout=layout(lp, i),
        d_layout=layout(ld, j),
        spill_layout=layout(ld, k),
        p_pool=_pick(pool_p, i, j),
        spill_pool=_pick(pool_s, k, j),
        d_rate=float(d_rate_of(spill_best)[i, j, k, 0]),
        p_replicas=int(x[i]) if uses_p else 0,
        d_replicas=int(count[e]),
        spill_replicas=int(spill_best[0, j, k, 0]),
        d_batch=float(d_point.batch[0, j, 0, 0]),
        transfer_p99_ms=float(t99),
    )
