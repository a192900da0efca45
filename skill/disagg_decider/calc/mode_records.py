"""The modes at each workload's own rate: the verdict's colocated and disaggregated records.

`calc/compare.py` searches the layouts; this module turns each workload's own row of that search
into what the verdict reports at its rate: the replicas that carry it, the latencies there, the
per-request figures and the costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.layouts.layout_choices import engine_for
from disagg_decider.calc.layouts.pools import transfer_nodes_ms
from disagg_decider.calc.layouts.search import Found
from disagg_decider.calc.mode_entries import (
    Asked,
    FirstRound,
    Own,
    PricedMode,
    anchors,
    replicas_needed,
)
from disagg_decider.calc.physics import kv, parallel
from disagg_decider.calc.physics.kvpath import transfer_times
from disagg_decider.calc.replicas import colocated_load, decode, ingress_queue, prefill
from disagg_decider.calc.replicas.reported_ttft import DeferredP99
from disagg_decider.calc.result import ColocatedResult, DisaggregatedResult
from disagg_decider.workload import Resolved

HOURS_PER_YEAR = 8760.0
SIZING_REPLICAS = 64  # prefill pools are sized up to this many replicas beyond the cluster


# Vectorised over a block's entries (`mode_entries.Own`: each member's best layouts, then the
# proposals priced with them): arrays below have one value per entry (N,), and the lengths and
# engines they use are columns (N, 1) so they broadcast against batch grids.


def colocated_results(o: Own, f: Found, p99s: DeferredP99, t: np.ndarray) -> PricedMode:
    """Each entry's replicas of layout `t` (indices into `f.layouts`) at its rate, its p99
    TTFT's bisection added to `p99s`."""
    tp = f.layouts["gpus"][t].astype(float)  # GPUs per replica
    chunk_i = f.colo_chunk_index[o.row, t]
    chunks = o.first.workload.efficiency.chunk_tokens
    cap = np.maximum(o.budget // tp, 1.0)
    chunk = np.asarray(chunks, dtype=float)[chunk_i]

    def columns_at(rows: np.ndarray) -> tuple:
        """The entries' (engine, lengths, targets, chunk) at `rows`, as columns."""
        return (
            _engine_at(o.first, f.layouts, t[rows]),
            o.lengths if len(rows) == len(t) else o.lengths.at(rows),
            o.ttft_slo_ms[rows].reshape(-1, 1),
            o.tpot_slo_ms[rows].reshape(-1, 1),
            chunk[rows].reshape(-1, 1),
        )

    # What one replica carries within the targets with the whole cluster behind the router,
    # then with the replicas the rate needs (fewer replicas pool less and queue more).
    # Each pool size's lines and batch grid are built once: the loads within the targets and
    # the reported latencies are read off the same rows (`servers` is the size `on` holds).
    def within_at(at: tuple, servers: np.ndarray, rate_hi: np.ndarray):
        on = colocated_load.lines_and_grid(*at, servers.reshape(-1, 1))
        rate = colocated_load.rate_within_targets(*at, servers.reshape(-1, 1), rate_hi, on=on)
        return rate, on

    rate_hi = f.colo_rate[o.row, t]
    first = FirstRound.of(o.rate, o.budget, tp, cap, rate_hi)
    everyone = np.arange(len(t))
    at = columns_at(everyone)
    asked = Asked(
        lambda rows, *q: within_at(columns_at(rows), *q), first, lambda: anchors(f.layouts, t)
    )
    per_replica = asked.first_round()
    feasible = (per_replica > 0) & (o.budget // tp >= 1)
    within = np.where(feasible, cap * per_replica, 0.0)
    need = replicas_needed(o.rate, per_replica)
    servers, carried = cap, per_replica
    for _ in range(4):  # more replicas carry more each; a few rounds settle the count
        replicas = np.where(feasible, np.minimum(need, cap), cap)
        if not np.array_equal(replicas, servers):
            carried = asked(replicas, per_replica)
            servers = replicas
        more = np.where(carried > 0, np.maximum(need, replicas_needed(o.rate, carried)), need)
        if np.array_equal(more, need):
            break
        need = more
    replicas = np.where(feasible, np.minimum(need, cap), cap)
    if not np.array_equal(replicas, servers):
        carried = asked(replicas, per_replica)
    fits = feasible & (need <= cap)
    load = np.minimum(o.rate / replicas, carried)
    tpot, ttft_of = asked.latencies(at, load, p99s)
    served = np.minimum(o.rate, replicas * carried)
    columns = {
        "feasible": feasible,
        "fits_cluster": fits,
        "gpus": (replicas * tp).astype(int),
        "gpus_needed_for_rate": np.where(feasible, need * tp, np.nan),
        "max_rate_per_s": within,
        "goodput_per_gpu": within / o.budget,
        "ttft_p99_ms": np.full(len(o.row), np.nan),  # filled in once solved (`presented_records`)
        "tpot_p99_ms": np.where(feasible, tpot, np.nan),
        **_layout_columns("", f.layouts, t),
        "replicas": replicas.astype(int),
        "chunk_tokens": np.asarray(chunks)[chunk_i],
        "max_batch": _whole(f.colo_batch[o.row, t]),
    }
    costs = _costs(o, replicas * tp, served)
    ttft = lambda: np.where(feasible, ttft_of(), np.nan)  # noqa: E731
    return PricedMode(ColocatedResult, columns, costs, ttft)


def disaggregated_results(o: Own, f: Found, pair: np.ndarray) -> PricedMode:
    """Each entry's split of the (prefill, decode) layouts `pair` (N, 2) at its rate. The p99
    TTFT column is priced here (the prefill pool's wait and the KV link's, `ingress_queue`),
    not in `DeferredP99`'s batch; a function all the same, read as the colocated column is."""
    i, j = pair[:, 0], pair[:, 1]
    p_tp, d_tp = f.layouts["gpus"][i].astype(float), f.layouts["gpus"][j].astype(float)
    p_atp, d_atp = f.layouts["tp"][i].astype(float), f.layouts["tp"][j].astype(float)
    d_rate = f.decode_rate[o.row, i, j]
    feasible = f.pair_served[o.row, i, j] > 0
    p_engine = _engine_at(o.first, f.layouts, i)
    d_engine = _engine_at(o.first, f.layouts, j)
    everyone = o.who
    path = o.members.path.take(everyone, (-1, 1))
    # Mixed traffic: each mixed member's own row (`calc/replicas/mixed_members.py`).
    mix = o.members.mix
    own = None if mix is None else mix.own(o.members.prompt_p50[everyone], everyone)
    most = np.maximum(np.floor((o.budget - d_tp) / p_tp), 1.0)
    # The search priced this pair's prefill pool at the workload's own prompt (`prefill_pool`,
    # element by element: the bits it would get built again here), and some of its rates.
    rates = f.prefill_rates.at((o.row, i, j))
    pool = rates.pool
    all_rows = np.ones(len(o.row), dtype=bool)
    # Replicas the rate needs even beyond the cluster (reported when it does not fit); 1 where
    # one replica serves nothing, as for decode.
    one = rates(np.ones(len(o.row)), all_rows)
    needed, rates = rates.sizing(o.rate, np.maximum(most, SIZING_REPLICAS), one)
    x = np.where(one > 0, needed, 1.0)
    y = replicas_needed(o.rate, d_rate)
    # Transfers into one decode receiver queue for its NICs: the pools grow where that wait
    # pushes the p99 TTFT past the target (`ingress_queue`).
    d_dp = f.layouts["dp"][j].astype(float)
    t_nodes = _transfer_nodes_ms(o, p_engine, path, p_atp, d_atp)
    sized = feasible & (one > 0) & (d_rate > 0)
    x, y, ttft_sized = ingress_queue.grow_for_transfer_wait(
        pool, x, y, p_tp, d_tp, d_dp, o.rate, t_nodes, o.ttft_slo_ms, sized
    )
    needed = np.where(feasible, x * p_tp + y * d_tp, np.nan)
    fits = feasible & (x * p_tp + y * d_tp <= o.budget)
    # Short of GPUs, the plan is the best split of the cluster; with no feasible split, the
    # smallest pair (one replica each), which the verdict never presents as a plan.
    x = np.where(fits, x, np.where(feasible, f.best_x[o.row, i, j], 1.0))
    y = np.where(fits, y, np.where(feasible, f.best_y[o.row, i, j], 1.0))
    # The chosen size's rate: read off the search's table or the sizing, bisected elsewhere.
    p_rate = rates(x, all_rows)
    # The p99 prompt's KV transfer (the record's) and the p50 one's (the per-request figures)
    # in one call: columns (p50, p99) of each entry.
    request = _Prompts.of(o, own)
    prefill_at = prefill.prefill_ms(p_engine, request.uncached, request.cached)
    transfers = transfer_times(
        o.first, path, request.uncached, prefill_at, p_atp.reshape(-1, 1), d_atp.reshape(-1, 1)
    )
    transfer_p99 = transfers[2][:, 1]
    receivers = np.maximum(y, 1.0) * d_dp
    # Short of GPUs, the cluster's split carries what fits the target with both waits.
    short = feasible & ~fits & ~o.alternative
    short_load, short_ttft = ingress_queue.short_split_load(
        pool, x, receivers, t_nodes, np.minimum(o.rate, p_rate), short
    )
    p_load = np.where(short, short_load, np.minimum(o.rate, p_rate))
    d_load = np.minimum(o.rate / np.maximum(y, 1.0), d_rate)
    step = decode.step_at_rate_ms(d_engine, o.lengths, d_load)
    # The join is priced at batch 1, as the pool's TTFT budget prices it, so a split loaded to
    # its prefill capacity reports the TTFT it was sized for; its transfers wait for the
    # decode receivers' NICs at the load the prefill pool passes on.
    ttft_p99 = np.where(short, short_ttft, ttft_sized)
    served = np.minimum(p_load, y * d_rate)
    gpus = x * p_tp + y * d_tp
    within = f.disagg_within[o.row]
    columns = {
        "feasible": feasible,
        "fits_cluster": fits,
        "gpus": gpus.astype(int),
        "gpus_needed_for_rate": needed,
        "max_rate_per_s": within,
        "goodput_per_gpu": within / o.budget,
        "ttft_p99_ms": np.full(len(o.row), np.nan),  # filled in once solved (`presented_records`)
        "tpot_p99_ms": np.where(
            feasible,
            decode.tpot_p99_at_rate_ms(
                d_engine,
                o.lengths,
                d_load,
                None if mix is None else mix.batch_at(own, everyone, (-1, 1)),
                step,
            ),
            np.nan,
        ),
        **_layout_columns("prefill_", f.layouts, i),
        **_layout_columns("decode_", f.layouts, j),
        "prefill_replicas": x.astype(int),
        "decode_replicas": y.astype(int),
        "prefill_gpus": (x * p_tp).astype(int),
        "decode_gpus": (y * d_tp).astype(int),
        "max_batch": _whole(f.decode_batch[o.row, j]),
        "transfer_ms_p99": transfer_p99,
    }
    ttft = lambda: np.where(feasible, ttft_p99, np.nan)  # noqa: E731
    # The per-request figures: the step at the sized operating point, or at batch 1 where no
    # size meets the SLO.
    ctx = o.lengths.decode_context_mean
    idle = np.ravel(decode.decode_step_ms(d_engine, 1.0, ctx))
    figures = {
        "kv_transfer_ms": transfers[2][:, 0],
        "kv_transfer_serialized_ms": transfers[0][:, 0],
        "kv_transfer_layerwise_ms": transfers[1][:, 0],
        "kv_transfer_gb_per_s": np.ravel(path.gb_per_s(p_atp[:, None], d_atp[:, None])),
        "prefill_ms": prefill_at[:, 0],
        "decode_step_ms": np.where(feasible, step, idle),
    }
    return PricedMode(DisaggregatedResult, columns, _costs(o, gpus, served), ttft, figures)


def _transfer_nodes_ms(o: Own, p_engine, path, p_atp, d_atp) -> np.ndarray:
    """Each workload's KV transfer time alone at the prompt quantiles (W, K), as its prefill
    pool prices it (`pools.transfer_nodes_ms`; a mixed member reads its own row's lengths)."""
    return np.asarray(
        transfer_nodes_ms(
            o.first, p_engine, o.lengths, path, p_atp.reshape(-1, 1), d_atp.reshape(-1, 1)
        ),
        dtype=float,
    )


def _engine_at(first: Resolved, layouts: dict[str, np.ndarray], index: np.ndarray):
    """The engine of each workload's chosen layout, as columns (W, 1)."""
    tp, dp, ep = (layouts[k][index].astype(float).reshape(-1, 1) for k in ("tp", "dp", "ep"))
    return engine_for(first, tp, dp, ep)


def _layout_columns(prefix: str, layouts: dict[str, np.ndarray], index: np.ndarray) -> dict:
    """tp (attention TP), dp, ep and the layout's label for the chosen candidates."""
    tp, dp, ep = (layouts[k][index].astype(int) for k in ("tp", "dp", "ep"))
    labels = [parallel.label(*v) for v in zip(tp.tolist(), dp.tolist(), ep.tolist(), strict=True)]
    return {
        f"{prefix}tp": tp,
        f"{prefix}dp": dp,
        f"{prefix}ep": ep,
        f"{prefix}layout": np.array(labels, dtype=object),
    }


def _whole(batch: np.ndarray) -> np.ndarray:
    """Whole sequences in an interpolated batch; rounding noise (364.99999...) is not a loss."""
    return np.floor(batch + 1e-6).astype(int)


@dataclass(frozen=True)
class _Prompts:
    """Each entry's p50 and p99 prompt, uncached and cached tokens as columns (N, 2): the
    per-request figures' and the split's p99 transfer's (a mixed member's own row takes its
    mix's p99 prompt, `mixed_members`)."""

    uncached: np.ndarray
    cached: np.ndarray

    @classmethod
    def of(cls, o: Own, own: np.ndarray | None) -> _Prompts:
        lengths = o.lengths
        p50, p99 = lengths.prompt_p50, lengths.prompt_p99
        u50 = p50 * lengths.uncached_share
        if own is None:  # as `prefill.p99_prefill_ms`
            u99, cached99 = p99 * lengths.uncached_share, p99 * lengths.hit_rate
        else:
            u99, cached99 = o.members.mix.p99_at(lengths, own, o.who)
        column = (-1, 1)
        return cls(
            uncached=np.hstack([u50, np.reshape(u99, column)]),
            cached=np.hstack([p50 - u50, np.reshape(cached99, column)]),
        )


def per_request(o: Own, figures: dict[str, np.ndarray]) -> dict[str, list]:
    """The per-request figures at the p50 prompt after prefix-cache hits, per member: the
    presented split's (`figures`, one entry per member, as `disaggregated_results` prices
    them) and the KV sizes, which no layout changes."""
    first = o.first
    model, kv_dtype = first.model, first.workload.kv_dtype
    u50 = o.lengths.prompt_p50 * o.lengths.uncached_share
    size = kv.kv_bytes(model, kv_dtype, u50)
    per_token = kv.kv_bytes_per_token(model, kv_dtype, np.maximum(u50, 1.0))
    flat = lambda a: np.asarray(a).ravel().tolist()  # noqa: E731
    return {
        **{name: flat(values) for name, values in figures.items()},
        "kv_bytes_per_token": flat(per_token),
        "kv_bytes_per_request": flat(size),
        "kv_transfer_path": [p.kind for p in o.members.paths],
        "kv_transfer_rdma": [p.rdma for p in o.members.paths],
        "effective_prompt_tokens": flat(u50),
    }


# --- costs and warnings -----------------------------------------------------------------------


def _costs(o: Own, gpus: np.ndarray, served_rate: np.ndarray) -> list[dict]:
    usd_per_hour = gpus * o.usd_per_gpu_hour
    mean_tokens = np.ravel(o.lengths.prompt_mean + o.lengths.output_mean)
    tokens_per_hour = served_rate * mean_tokens * 3600.0
    # Divided only where tokens are served (no np.errstate: a context costs more than this).
    served = tokens_per_hour > 0
    per_million = np.where(
        served, usd_per_hour / np.where(served, tokens_per_hour, 1.0) * 1e6, np.nan
    )
    return [
        {
            "cost_per_million_tokens_usd": None if math.isnan(m) else m,
            "cost_per_year_usd": y,
        }
        for m, y in zip(per_million.tolist(), (usd_per_hour * HOURS_PER_YEAR).tolist(), strict=True)
    ]
