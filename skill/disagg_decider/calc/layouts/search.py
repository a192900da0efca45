"""The search: every serving configuration of both modes, evaluated at once.

Arrays carry the axes (row, TP, chunk, batch). A row is one prompt length of one workload: its
own p50 prompt and the crossover grid, for every workload of a batch. Workloads that share a
model, GPU, dtypes, engine and efficiency constants (`group_key`) share one `Engine`, so one
search serves them all and numpy's fixed cost per call is paid once per batch rather than once
per decision; everything else a workload sets (lengths, SLOs, GPU budget, network, TP limits)
is an array with one entry per row (`Rows`).

The candidate axis holds layouts (TP degrees; for MoE models DP-attention + EP layouts,
`calc/physics/parallel.py`). The colocated comparator tries every layout, chunk budget and decode
batch (the replicas on the budget form one pooled queue); the disaggregated side tries every prefill
layout, decode layout and whole-replica split of the GPU budget that the engine allows, with
pooled prefill queues (`calc/layouts/pools.py`). Budgets count GPUs per replica (tp x dp); KV moves
between attention ranks (tp GPUs each side). `search` returns, per row, the best of each mode;
`compare` turns each workload's own row into the verdict's numbers and the rest into its
crossover.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from disagg_decider.calc.layouts.layout_choices import (
    candidate_layouts,
    engine_for,
    tp_masks,
)
from disagg_decider.calc.layouts.pool_rates import PoolRates
from disagg_decider.calc.layouts.pools import (
    ingress_rate_per_s,
    pooled_split,
    prefill_and_transfer_nodes,
    prefill_pool,
)
from disagg_decider.calc.physics import parallel
from disagg_decider.calc.physics.kvpath import TransferPath, transfer_path
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas import colocated_best, decode
from disagg_decider.calc.replicas.ingress_queue import receiver_rate_per_s
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.mixed_members import MemberMix, PromptMix, member_mix
from disagg_decider.classes import (
    batch_context_tokens,
    batch_mix,
    chunk_prompt_tokens,
    class_context_tokens,
)
from disagg_decider.workload import Resolved, lognormal_sigma

# --- the rows of a search ---------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """What varies along the leading axis: one row per (workload, prompt length)."""

    lengths: Lengths  # fields shaped (S, 1, 1, 1)
    ttft_ms: np.ndarray  # (S, 1, 1, 1) p99 targets
    tpot_ms: np.ndarray  # (S, 1, 1, 1)
    budget: np.ndarray  # (S,) GPUs each mode may use
    path: TransferPath  # numeric fields (S, 1, 1)
    allowed: dict[str, np.ndarray]  # role -> (S, T): which TP candidates the row may use
    # A mixed member's own rows (`calc/replicas/mixed_members.py`): the prompts its prefill pool
    # serves and its decode batch's mix; None where no row is one.
    prompts: PromptMix | None = None
    batch_mix: decode.BatchMix | None = None
    # A mixed member's own rows: its longest class's p99 request (tokens); nan elsewhere.
    class_context: np.ndarray | None = None
    rate_per_s: np.ndarray | None = None  # (S, 1, 1, 1) the workload's own rate
    # (S,) rows at their member's own prompt (its verdict reads their layouts, chunk and
    # batch); None where not known (every row is then priced as one).
    own: np.ndarray | None = None


@dataclass(frozen=True)
class Members:
    """The workloads of one search: their inputs as arrays, one entry per workload (W,)."""

    resolved: list[Resolved]
    layouts: dict[str, np.ndarray]  # gpus, tp, dp, ep of the layouts some member may use
    allowed: dict[str, np.ndarray]  # role -> (W, T) which of them each member may use
    warnings: list[list[str]]  # per member: pinned degrees that leave no room for KV
    prompt_p50: np.ndarray
    prompt_sigma: np.ndarray
    hit_rate: np.ndarray
    output_p50: np.ndarray
    output_sigma: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    budget: np.ndarray  # cluster GPUs
    paths: list[TransferPath]
    path: TransferPath  # the paths stacked: numeric fields (W,)
    # Mixed traffic: the decode batch's mean context, output-weighted over the classes
    # (`classes.batch_context_tokens`); nan for one class.
    batch_context: np.ndarray | None = None
    # Mixed traffic: the uncached prompt a chunked token belongs to and the seat context's
    # squared CV (`classes.chunk_prompt_tokens`, `classes.batch_mix`); nan for one class.
    chunk_prompt: np.ndarray | None = None
    seat_scv: np.ndarray | None = None
    # Mixed traffic: the classes' shape for the always-disaggregated mode
    # (`calc/replicas/mixed_members.py`); None when every member is one class.
    mix: MemberMix | None = None
    # Mixed traffic: the longest class's p99 prompt + p99 output; nan for one class.
    class_context: np.ndarray | None = None
    rate_per_s: np.ndarray | None = None  # the workloads' rates

    @property
    def first(self) -> Resolved:
        """Any member: they share model, GPU, dtypes, engine and efficiency constants."""
        return self.resolved[0]

    def lengths(self, prompt_p50, index, shape) -> Lengths:
        """Lengths for rows that take member `index[i]`'s distributions at `prompt_p50[i]`."""
        lengths = Lengths.build(
            prompt_p50=np.reshape(prompt_p50, shape),
            prompt_sigma=self.prompt_sigma[index].reshape(shape),
            hit_rate=self.hit_rate[index].reshape(shape),
            output_p50=self.output_p50[index].reshape(shape),
            output_sigma=self.output_sigma[index].reshape(shape),
        )
        return batch_context(lengths, self, prompt_p50, index, shape)

    def rows(self, prompts: Sequence[np.ndarray], extra: tuple | None = None) -> Rows:
        """One row per member and prompt: member k at each of `prompts[k]` (p50 lengths).

        `extra`, (member indices, TPOT targets ms), appends a row per entry: that member at its
        own prompt with the TPOT target replaced (the interactivity band's targets, searched
        with the decision's rows instead of in a search of their own).
        """
        index = np.repeat(np.arange(len(self.resolved)), [len(p) for p in prompts])
        shape = (-1, 1, 1, 1)
        p50 = np.concatenate(prompts)
        tpot_ms = self.tpot_ms[index]
        if extra is not None:
            extra_index = np.asarray(extra[0], dtype=int)
            index = np.concatenate([index, extra_index])
            p50 = np.concatenate([p50, self.prompt_p50[extra_index]])
            tpot_ms = np.concatenate([tpot_ms, np.asarray(extra[1], dtype=float)])
        lengths = self.lengths(p50, index, shape)
        mixed = {} if self.mix is None else self.mix.rows_at(lengths, p50, index, shape)
        if self.class_context is not None:
            own = p50 == self.prompt_p50[index]
            mixed["class_context"] = np.where(own, self.class_context[index], np.nan)
        if self.rate_per_s is not None:
            mixed["rate_per_s"] = self.rate_per_s[index].reshape(shape)
        mixed["own"] = p50 == self.prompt_p50[index]
        return Rows(
            lengths=lengths,
            ttft_ms=self.ttft_ms[index].reshape(shape),
            tpot_ms=tpot_ms.reshape(shape),
            budget=self.budget[index],
            path=self.path.take(index, (-1, 1, 1)),
            allowed={role: mask[index] for role, mask in self.allowed.items()},
            **mixed,
        )


def members_of(resolved: Sequence[Resolved]) -> Members:
    """`resolved` must share a `group_key`. Layouts no member may use are not searched."""
    resolved = list(resolved)
    lay = parallel.as_arrays(candidate_layouts(resolved))
    fits = engine_for(resolved[0], lay["tp"], lay["dp"], lay["ep"]).fits()
    masks, warnings = tp_masks(resolved, lay, fits)
    used = np.logical_or.reduce([m.any(axis=0) for m in masks.values()])
    traffic = [r.workload.traffic for r in resolved]
    paths = [transfer_path(r) for r in resolved]

    def each(values) -> np.ndarray:
        return np.array(list(values), dtype=float)

    prompt_p50 = each(t.prompt_tokens.p50 for t in traffic)
    return Members(
        resolved=resolved,
        layouts={name: column[used] for name, column in lay.items()},
        allowed={role: m[:, used] for role, m in masks.items()},
        warnings=warnings,
        prompt_p50=prompt_p50,
        prompt_sigma=each(lognormal_sigma(t.prompt_tokens) for t in traffic),
        hit_rate=each(t.prefix_cache_hit_rate for t in traffic),
        output_p50=each(t.output_tokens.p50 for t in traffic),
        output_sigma=each(lognormal_sigma(t.output_tokens) for t in traffic),
        ttft_ms=each(r.workload.slo.ttft_ms for r in resolved),
        tpot_ms=each(r.workload.slo.tpot_ms for r in resolved),
        budget=each(r.workload.cluster.gpus for r in resolved),
        paths=paths,
        path=TransferPath.stack(paths),
        batch_context=each(batch_context_tokens(r.workload) for r in resolved),
        chunk_prompt=each(chunk_prompt_tokens(r.workload) for r in resolved),
        seat_scv=each(batch_mix(r.workload)[0] for r in resolved),
        mix=member_mix(resolved, prompt_p50),
        class_context=each(max(class_context_tokens(r.workload), default=np.nan) for r in resolved),
        rate_per_s=each(t.requests_per_second for t in traffic),
    )


def batch_context(lengths: Lengths, m: Members, prompt_p50, index, shape) -> Lengths:
    """A mixed-traffic member's own row takes its classes' output-weighted batch context, and
    for the colocated model the prompt a chunked token belongs to and the seat context's
    spread across classes."""
    if m.batch_context is None or np.isnan(m.batch_context).all():
        return lengths
    ctx = m.batch_context[index]
    own = np.isfinite(ctx) & (np.ravel(prompt_p50) == m.prompt_p50[index])
    if not own.any():
        return lengths

    def on_own(values: np.ndarray, plain: np.ndarray) -> np.ndarray:
        plain = np.broadcast_to(plain, np.shape(lengths.decode_context_mean))
        return np.where(own, values, np.ravel(plain)).reshape(shape)

    return replace(
        lengths,
        decode_context_mean=on_own(ctx, lengths.decode_context_mean),
        chunk_prompt_tokens=on_own(m.chunk_prompt[index], lengths.chunk_prompt_tokens),
        context_scv=on_own(m.seat_scv[index], lengths.context_scv),
    )


# --- the search -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """Best configuration of each mode per row (leading axis); indices refer to `layouts`."""

    layouts: dict[str, np.ndarray]  # gpus, tp, dp, ep per candidate
    rows: Rows
    colo_rate: np.ndarray  # per replica, (S, T)
    colo_chunk_index: np.ndarray
    colo_batch: np.ndarray
    colo_best_t: np.ndarray  # (S,)
    colo_within: np.ndarray  # (S,) req/s within the budget
    prefill_rate: np.ndarray  # the prefill pool of the best split, req/s, (S, Tp, Td)
    prefill_rates: PoolRates  # the prefill pools' rates at whole sizes, where tabulated
    decode_rate: np.ndarray  # per decode replica, KV ingress included, (S, Tp, Td)
    decode_batch: np.ndarray  # (S, Td)
    pair_served: np.ndarray  # (S, Tp, Td) req/s within the budget
    best_x: np.ndarray  # (S, Tp, Td) prefill replicas of the best split
    best_y: np.ndarray  # decode replicas
    best_pair: np.ndarray  # (S, 2) indices into layouts (prefill, decode)
    disagg_within: np.ndarray  # (S,)
    gain: np.ndarray  # (S,)


def search(r: Resolved, rows: Rows, layouts: dict[str, np.ndarray]) -> Found:
    """`r` is any member of the rows' group: it supplies the engine they share.

    The candidate axis holds layouts (`calc/physics/parallel.py`): budgets count their GPUs, KV
    moves between attention ranks (`tp` GPUs hold one request's KV).
    """
    w = r.workload
    lengths, budget = rows.lengths, rows.budget
    n_rows = budget.shape[0]
    everyone = np.arange(n_rows)
    tps, atp = layouts["gpus"], layouts["tp"]
    axis4 = (1, -1, 1, 1)
    engine = engine_for(  # colocated, prefill and decode all try every layout
        r, atp.reshape(axis4), layouts["dp"].reshape(axis4), layouts["ep"].reshape(axis4)
    )

    # Rows whose p99 request outruns the model's context serve nothing in either mode.
    served_rows = within_context(r.model.max_context_tokens, lengths, rows.class_context)

    # Colocated: every (layout, chunk, batch) at once; the replicas on the budget form one
    # pooled queue.
    chunks = w.efficiency.chunk_tokens
    servers = np.maximum(budget[:, None] // tps, 1.0).reshape(n_rows, -1, 1, 1)
    # Layouts a row may not use are never chosen (masked below) nor read: not searched; nor
    # are the rows that serve nothing (their rate reads 0 below) but a member's own, whose
    # chunk and batch its verdict reports.
    searched = rows.allowed["colocated"]
    if rows.own is not None and not served_rows.all():
        searched = searched & (served_rows | rows.own)[:, None]
    best = colocated_best.best_points(
        engine,
        lengths,
        rows.ttft_ms,
        rows.tpot_ms,
        chunks,
        servers,
        searched,
        rows.rate_per_s,
    )
    colo_rate = np.where(served_rows[:, None], best.rate_per_s, 0.0)
    colo_within_t = (budget[:, None] // tps) * colo_rate
    colo_within_t = np.where(rows.allowed["colocated"], colo_within_t, -1.0)
    colo_t = colo_within_t.argmax(axis=1)
    colo_within = np.maximum(colo_within_t[everyone, colo_t], 0.0)

    # Disaggregated: decode per layout, prefill pools per (prefill, decode) layout pair, then
    # the best whole-replica split of every allowed pair. Budgets count GPUs per replica
    # (tp x dp); a request's KV moves between attention ranks (tp GPUs each side), and a
    # decode replica of dp ranks receives on each rank's NICs in parallel.
    path = rows.path
    d_point = decode.replica_capacity(engine, lengths, rows.tpot_ms, rows.batch_mix)
    d_alone = d_point.rate_per_s[:, :, 0, 0]  # (S, Td) before KV ingress
    p_gpus, d_gpus = tps[None, :, None], tps[None, None, :]
    p_atp, d_atp = atp[None, :, None], atp[None, None, :]
    ingress = ingress_rate_per_s(r, path, lengths, p_atp, d_atp)
    target = rows.ttft_ms.reshape(-1, 1, 1)
    nodes = prefill_and_transfer_nodes(r, engine, lengths, path, atp, prompts=rows.prompts)
    pool = prefill_pool(r, engine, lengths, path, target, atp, prompts=rows.prompts, nodes=nodes)
    # A receiver's link also must not make its transfers wait past the TTFT target.
    t_nodes = nodes[1]
    b3 = budget[:, None, None]
    allowed = pairs_allowed(w.engine, atp, atp, b3, tps, tps)
    ingress = np.minimum(
        ingress, receiver_rate_per_s(t_nodes, pool.nodes_ms, target, needed=allowed)
    )
    d_rate = np.minimum(d_alone[:, None, :], ingress * layouts["dp"][None, None, :])
    d_rate = np.where(served_rows[:, None, None], d_rate, 0.0)
    # Small splits' pools at every size in one bisection; the split and the verdict read them.
    rates = PoolRates.tabulate(pool, np.floor((b3 - d_gpus) / p_gpus), allowed & (d_rate > 0))
    p_best, served, best_x, best_y = pooled_split(b3, p_gpus, d_gpus, pool, d_rate, allowed, rates)
    tp_ok = rows.allowed["prefill"][:, :, None] & rows.allowed["decode"][:, None, :]
    flat = np.where(tp_ok, served, -1.0).reshape(n_rows, -1).argmax(axis=1)
    pair = np.stack(np.unravel_index(flat, served.shape[1:]), axis=1)
    disagg_within = served.reshape(n_rows, -1)[everyone, flat]

    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(
            colo_within > 0,
            disagg_within / colo_within,
            np.where(disagg_within > 0, np.inf, np.nan),
        )
    return Found(
        layouts=layouts,
        rows=rows,
        colo_rate=colo_rate,
        colo_chunk_index=best.chunk_index,
        colo_batch=best.batch,
        colo_best_t=colo_t,
        colo_within=colo_within,
        prefill_rate=p_best,
        prefill_rates=rates,
        decode_rate=d_rate,
        decode_batch=d_point.batch[:, :, 0, 0],
        pair_served=served,
        best_x=best_x,
        best_y=best_y,
        best_pair=pair,
        disagg_within=disagg_within,
        gain=gain,
    )


def within_context(max_context_tokens: int, lengths: Lengths, class_context=None) -> np.ndarray:
    """Whether a p99 prompt plus a p99 output fits the model's context window, per row (S,).

    A request beyond it cannot be served at all (the engine rejects it), so such a row is
    infeasible in both modes rather than priced as if the window were longer. A mixed
    member's own rows check their longest class's p99 request (`class_context`, finite
    there), not the fitted log-normal's.
    """
    output_p99 = queueing.lognormal_p99(lengths.output_p50, lengths.output_sigma)
    total = np.ravel(lengths.prompt_p99 + output_p99)
    if class_context is not None:
        total = np.where(np.isfinite(class_context), class_context, total)
    return total <= max_context_tokens * (1.0 + 1e-9)


def pairs_allowed(
    engine_name: str, tp_p: np.ndarray, tp_d: np.ndarray, budget, gpus_p=None, gpus_d=None
):
    """vLLM/TensorRT-LLM NIXL paths need decode TP >= prefill TP; SGLang needs them equal.

    TP is the attention TP (the ranks one request's KV lives on); under DP attention each
    rank's KV moves on its own, so DP and EP sizes may differ between the roles.
    """
    p, d = tp_p[:, None], tp_d[None, :]
    same_rule = p == d if engine_name == "sglang" else d >= p
    gp = tp_p if gpus_p is None else gpus_p
    gd = tp_d if gpus_d is None else gpus_d
    return same_rule & (gp[:, None] + gd[None, :] <= budget)
