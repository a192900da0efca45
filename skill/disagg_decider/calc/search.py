"""The search: every serving configuration of both modes, evaluated at once.

Arrays carry the axes (row, TP, chunk, batch). A row is one prompt length of one workload: its
own p50 prompt and the crossover grid, for every workload of a batch. Workloads that share a
model, GPU, dtypes, engine and efficiency constants (`group_key`) share one `Engine`, so one
search serves them all and numpy's fixed cost per call is paid once per batch rather than once
per decision; everything else a workload sets (lengths, SLOs, GPU budget, network, TP limits)
is an array with one entry per row (`Rows`).

The colocated comparator tries every TP degree, chunk budget and decode batch; the
disaggregated side tries every prefill TP, decode TP and whole-replica split of the GPU budget
that the engine allows. `search` returns, per row, the best of each mode; `compare` turns each
workload's own row into the verdict's numbers and the rest into its crossover.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from disagg_decider.calc import colocated, decode, queueing
from disagg_decider.calc.kvpath import TransferPath, transfer_path
from disagg_decider.calc.lengths import Lengths
from disagg_decider.calc.pools import ingress_rate_per_s, pooled_split, prefill_pool
from disagg_decider.calc.step import Engine
from disagg_decider.classes import batch_context_tokens
from disagg_decider.workload import Resolved, Workload, lognormal_sigma

TP_CANDIDATES = (1, 2, 4, 8)
ROLES = ("colocated", "prefill", "decode")


# --- engines and TP choices ------------------------------------------------------------------


def engine_for(r: Resolved, tp) -> Engine:
    w = r.workload
    return Engine(r.model, r.gpu, w.weights_dtype, w.kv_dtype, tp, w.efficiency)


def group_key(r: Resolved) -> tuple:
    """Workloads with equal keys run on the same `Engine`, so one search can serve them all."""
    w = r.workload
    return (
        id(r.model),
        id(r.gpu),
        w.weights_dtype,
        w.kv_dtype,
        w.engine,
        w.efficiency.model_dump_json(),
    )


def pinned_tps(w: Workload) -> dict[str, int | None]:
    """The TP degree the workload pins per role (`parallelism:`), None where it lets us choose."""
    p = w.parallelism
    return {"colocated": p.colocated_tp, "prefill": p.prefill_tp, "decode": p.decode_tp}


def candidate_tps(members: Sequence[Resolved]) -> np.ndarray:
    """TP degrees a search evaluates: the usual ones plus any a workload pins."""
    pins = {pin for r in members for pin in pinned_tps(r.workload).values() if pin}
    return np.array(sorted(set(TP_CANDIDATES) | pins))


def _tp_masks(
    members: Sequence[Resolved], tps: np.ndarray, fits: np.ndarray
) -> tuple[dict[str, np.ndarray], list[list[str]]]:
    """Which of `tps` each member's roles may use: role -> (W, T), plus warnings per member.

    A role uses its pinned degree, or every usual one within a node. Degrees whose weights
    leave no room for KV are dropped; when none is left the largest is kept, so the mode
    reports itself infeasible rather than vanishing.
    """
    clusters = [r.workload.cluster for r in members]
    limit = np.array([min(c.gpus, c.gpus_per_node) for c in clusters])
    free = np.isin(tps, TP_CANDIDATES) & (tps <= limit[:, None])  # TP1 is always among them
    warnings: list[list[str]] = [[] for _ in members]
    pinned = [pinned_tps(r.workload) for r in members]
    masks = {}
    for role in ROLES:
        pins = np.array([p[role] or 0 for p in pinned])
        options = np.where(pins[:, None] > 0, tps == pins[:, None], free)
        usable = options & fits
        for k in np.flatnonzero(~usable.any(axis=1)):
            if pins[k]:
                r = members[k]
                warnings[k].append(
                    f"parallelism.{role}_tp={pins[k]}: {r.model.id} in {r.workload.weights_dtype} "
                    f"leaves no room for KV on {pins[k]} x {r.gpu.id}"
                )
            usable[k] = tps == tps[options[k]][-1]
        masks[role] = usable
    return masks, warnings


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


@dataclass(frozen=True)
class Members:
    """The workloads of one search: their inputs as arrays, one entry per workload (W,)."""

    resolved: list[Resolved]
    tps: np.ndarray  # TP degrees searched: those some member may use
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

    def rows(self, prompts: Sequence[np.ndarray]) -> Rows:
        """One row per member and prompt: member k at each of `prompts[k]` (p50 lengths)."""
        index = np.repeat(np.arange(len(self.resolved)), [len(p) for p in prompts])
        shape = (-1, 1, 1, 1)
        return Rows(
            lengths=self.lengths(np.concatenate(prompts), index, shape),
            ttft_ms=self.ttft_ms[index].reshape(shape),
            tpot_ms=self.tpot_ms[index].reshape(shape),
            budget=self.budget[index],
            path=self.path.take(index, (-1, 1, 1)),
            allowed={role: mask[index] for role, mask in self.allowed.items()},
        )


def members_of(resolved: Sequence[Resolved]) -> Members:
    """`resolved` must share a `group_key`. TP degrees no member may use are not searched."""
    resolved = list(resolved)
    tps = candidate_tps(resolved)
    masks, warnings = _tp_masks(resolved, tps, engine_for(resolved[0], tps).fits())
    used = np.logical_or.reduce([m.any(axis=0) for m in masks.values()])
    traffic = [r.workload.traffic for r in resolved]
    paths = [transfer_path(r) for r in resolved]

    def each(values) -> np.ndarray:
        return np.array(list(values), dtype=float)

    return Members(
        resolved=resolved,
        tps=tps[used],
        allowed={role: m[:, used] for role, m in masks.items()},
        warnings=warnings,
        prompt_p50=each(t.prompt_tokens.p50 for t in traffic),
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
    )


def batch_context(lengths: Lengths, m: Members, prompt_p50, index, shape) -> Lengths:
    """A mixed-traffic member's own row takes its classes' output-weighted batch context."""
    if m.batch_context is None or np.isnan(m.batch_context).all():
        return lengths
    ctx = m.batch_context[index]
    own = np.isfinite(ctx) & (np.ravel(prompt_p50) == m.prompt_p50[index])
    if not own.any():
        return lengths
    mixed = np.where(own, ctx, np.ravel(lengths.decode_context_mean)).reshape(shape)
    return replace(lengths, decode_context_mean=mixed)


# --- the search -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """Best configuration of each mode per row (leading axis); TP indices refer to `tps`."""

    tps: np.ndarray
    rows: Rows
    colo_rate: np.ndarray  # per replica, (S, T)
    colo_chunk_index: np.ndarray
    colo_batch: np.ndarray
    colo_best_t: np.ndarray  # (S,)
    colo_within: np.ndarray  # (S,) req/s within the budget
    prefill_rate: np.ndarray  # the prefill pool of the best split, req/s, (S, Tp, Td)
    decode_rate: np.ndarray  # per decode replica, KV ingress included, (S, Tp, Td)
    decode_batch: np.ndarray  # (S, Td)
    pair_served: np.ndarray  # (S, Tp, Td) req/s within the budget
    best_x: np.ndarray  # (S, Tp, Td) prefill replicas of the best split
    best_y: np.ndarray  # decode replicas
    best_pair: np.ndarray  # (S, 2) indices into tps (prefill, decode)
    disagg_within: np.ndarray  # (S,)
    gain: np.ndarray  # (S,)


def search(r: Resolved, rows: Rows, tps: np.ndarray) -> Found:
    """`r` is any member of the rows' group: it supplies the engine they share."""
    w = r.workload
    lengths, budget = rows.lengths, rows.budget
    n_rows = budget.shape[0]
    everyone = np.arange(n_rows)
    tp4 = tps.reshape(1, -1, 1, 1)
    engine = engine_for(r, tp4)  # colocated, prefill and decode all try every degree

    # Rows whose p99 request outruns the model's context serve nothing in either mode.
    served_rows = within_context(r.model.max_context_tokens, lengths).reshape(n_rows)

    # Colocated: every (TP, chunk, batch) at once.
    chunks = w.efficiency.chunk_tokens
    servers = np.maximum(budget[:, None] // tps, 1.0).reshape(n_rows, -1, 1, 1)
    best = colocated.best_points(engine, lengths, rows.ttft_ms, rows.tpot_ms, chunks, servers)
    colo_rate = np.where(served_rows[:, None], best.rate_per_s, 0.0)
    colo_within_t = (budget[:, None] // tps) * colo_rate
    colo_within_t = np.where(rows.allowed["colocated"], colo_within_t, -1.0)
    colo_t = colo_within_t.argmax(axis=1)
    colo_within = np.maximum(colo_within_t[everyone, colo_t], 0.0)

    # Disaggregated: decode per TP, prefill pools per (prefill TP, decode TP), then the best
    # whole-replica split of every allowed pair.
    path = rows.path
    d_point = decode.replica_capacity(engine, lengths, rows.tpot_ms)
    d_alone = d_point.rate_per_s[:, :, 0, 0]  # (S, Td) before KV ingress
    p_tp, d_tp = tps[None, :, None], tps[None, None, :]
    d_rate = np.minimum(d_alone[:, None, :], ingress_rate_per_s(r, path, lengths, p_tp, d_tp))
    d_rate = np.where(served_rows[:, None, None], d_rate, 0.0)
    pool = prefill_pool(r, engine, lengths, path, rows.ttft_ms.reshape(-1, 1, 1), tps)
    b3 = budget[:, None, None]
    allowed = pairs_allowed(w.engine, tps, tps, b3)
    p_best, served, best_x, best_y = pooled_split(b3, p_tp, d_tp, pool, d_rate, allowed)
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
        tps=tps,
        rows=rows,
        colo_rate=colo_rate,
        colo_chunk_index=best.chunk_index,
        colo_batch=best.batch,
        colo_best_t=colo_t,
        colo_within=colo_within,
        prefill_rate=p_best,
        decode_rate=d_rate,
        decode_batch=d_point.batch[:, :, 0, 0],
        pair_served=served,
        best_x=best_x,
        best_y=best_y,
        best_pair=pair,
        disagg_within=disagg_within,
        gain=gain,
    )


def within_context(max_context_tokens: int, lengths: Lengths) -> np.ndarray:
    """Whether a p99 prompt plus a p99 output fits the model's context window.

    A request beyond it cannot be served at all (the engine rejects it), so such a row is
    infeasible in both modes rather than priced as if the window were longer.
    """
    output_p99 = queueing.lognormal_p99(lengths.output_p50, lengths.output_sigma)
    return lengths.prompt_p99 + output_p99 <= max_context_tokens * (1.0 + 1e-9)


def pairs_allowed(engine_name: str, tp_p: np.ndarray, tp_d: np.ndarray, budget):
    """vLLM/TensorRT-LLM NIXL paths need decode TP >= prefill TP; SGLang needs them equal."""
    p, d = tp_p[:, None], tp_d[None, :]
    same_rule = p == d if engine_name == "sglang" else d >= p
    return same_rule & (p + d <= budget)
