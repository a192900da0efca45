"""Mixed traffic in the modes' search: what a mixed member's own row takes from its classes.

The colocated and always-disaggregated modes price one length distribution per row: for a
workload with `traffic.classes`, the log-normal with the mix's mean and second moment
(`disagg_decider.classes`). That keeps the mean prompt, but not the mix's shape, which the
always-disaggregated mode reads on both sides:

- the prefill pool's p99 TTFT is read off the tail of its service-side time, and the fitted
  log-normal's tail is not the mix's (70% 400-token chat beside 30% 16K-token RAG: the fit's
  p99 prompt is about 36K tokens, the mix's about 22K). A mixed row prices its pool on the
  mix's own uncached-prompt quantiles at the queueing nodes (`classes.mixture_quantiles`),
  each with the cached prefix its likely class brings, and the pool's mean and variability
  of service class by class (`PromptMix`);
- the decode batch holds seats of every class: its KV read per step varies with which classes
  hold them and its seats reserve the long-output classes' KV (`classes.batch_mix`,
  `decode.BatchMix`).

Only a mixed member's own row (its own p50 prompt) is priced so; the crossover grid's rows
(other prompt lengths, one log-normal each) and one-class members keep the one-class
pricing, and with no mixed member in a search nothing here runs (None), so one-class outputs
do not move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas import prefill
from disagg_decider.calc.replicas.decode import BatchMix
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.classes import (
    Component,
    batch_mix,
    cached_per_uncached,
    components,
    mixture_quantiles,
    uncached,
)
from disagg_decider.workload import Resolved

# The probabilities of `queueing.Z_NODES` under the standard normal.
_NODE_PROBABILITIES = [0.5 * math.erfc(-z / math.sqrt(2.0)) for z in queueing.Z_NODES.tolist()]
_K = len(_NODE_PROBABILITIES)


@dataclass(frozen=True)
class PromptMix:
    """The prompts a search's rows send to a prefill pool, for `pools.prefill_pool`.

    Node arrays are shaped as `prefill.prompt_nodes(lengths)` (quantiles last) and hold the
    row's one-log-normal nodes off a mixed member's own rows, with the same arithmetic as
    `prefill.service_nodes_ms`, so those rows price exactly as without a mix. Class arrays
    (last axis: classes x nodes) give a mixed row's service moments class by class.
    """

    own: np.ndarray  # (rows,) bool
    uncached_nodes: np.ndarray
    cached_nodes: np.ndarray
    class_uncached: np.ndarray  # (..., C * K)
    class_cached: np.ndarray
    class_weights: np.ndarray

    def service_nodes_ms(self, engine: Engine) -> np.ndarray:
        """Prefill time at each node (`prefill.service_nodes_ms`'s shape)."""
        return prefill.prefill_ms(engine, self.uncached_nodes, self.cached_nodes)

    def moments(self, engine: Engine, mean: np.ndarray, scv: np.ndarray):
        """Service mean and scv: the classes' own on a mixed member's own rows (a quadrature
        on each class's log-normal, exact where the mix's 25 quantile nodes straddle the gap
        between classes), `mean` and `scv` (the nodes') elsewhere."""
        s = prefill.prefill_ms(engine, self.class_uncached, self.class_cached)
        w = np.broadcast_to(self.class_weights, s.shape)
        # Class by class, each a sum over its K nodes, added in class order: a padding class
        # (weight 0) adds an exact 0, so a member prices the same in any block of members.
        m1 = m2 = 0.0
        for k in range(0, s.shape[-1], _K):
            part, weight = s[..., k : k + _K], w[..., k : k + _K]
            m1 = m1 + (part * weight).sum(axis=-1)
            m2 = m2 + (part * part * weight).sum(axis=-1)
        own = self.own.reshape(self.own.shape + (1,) * (np.ndim(m1) - 1))
        safe = np.where(m1 > 0, m1, 1.0)  # off the own rows the class weights are all 0
        mixed_scv = np.maximum(m2 / (safe * safe) - 1.0, 0.0)
        return np.where(own, m1, mean), np.where(own, mixed_scv, scv)


@dataclass(frozen=True)
class MemberMix:
    """Per member of a search (W,), nan where the member is one class."""

    prompt_p50: np.ndarray  # (W,) the member's own p50 prompt: which row is its own
    uncached_nodes: np.ndarray  # (W, K) the mix's uncached prompt at the queueing nodes
    cached_nodes: np.ndarray  # (W, K) the cached prefix each brings (its likely class's)
    uncached_p99: np.ndarray  # (W,)
    cached_p99: np.ndarray  # (W,)
    class_uncached: np.ndarray  # (W, C * K) each class at its own log-normal's nodes
    class_cached: np.ndarray
    class_weights: np.ndarray  # (W, C * K) share x node weight (0 for padding)
    context_scv: np.ndarray  # (W,)
    held_tokens: np.ndarray  # (W,)

    def own(self, prompt_p50, index) -> np.ndarray:
        """Which rows (member `index[i]` at `prompt_p50[i]`) are a mixed member's own row."""
        return np.isfinite(self.context_scv[index]) & (
            np.ravel(prompt_p50) == self.prompt_p50[index]
        )

    def rows_at(self, lengths: Lengths, prompt_p50, index, shape) -> dict:
        """`search.Rows`' mixed-traffic fields for rows of member `index[i]` at `prompt_p50[i]`."""
        own = self.own(prompt_p50, index)
        return {
            "prompts": self.prompts_at(lengths, own, index),
            "batch_mix": self.batch_at(own, index, shape),
        }

    def prompts_at(self, lengths: Lengths, own: np.ndarray, index) -> PromptMix | None:
        """The rows' `PromptMix`; None where no row is a mixed member's own."""
        if not own.any():
            return None
        nodes = prefill.prompt_nodes(lengths)
        share = lengths.uncached_share
        u, cached = nodes * share, nodes * (1.0 - share)  # as prefill.service_nodes_ms
        shape = np.shape(u)
        flat = lambda a: np.broadcast_to(a, shape).reshape(len(own), -1)  # noqa: E731
        on = own[:, None]

        def take(mixed: np.ndarray, plain: np.ndarray) -> np.ndarray:
            return np.where(on, mixed[index], flat(plain)).reshape(shape)

        classes = (*shape[:-1], self.class_weights.shape[-1])

        def per_class(a: np.ndarray, fill: float) -> np.ndarray:
            return np.where(on, a[index], fill).reshape(classes)

        return PromptMix(
            own=own,
            uncached_nodes=take(self.uncached_nodes, u),
            cached_nodes=take(self.cached_nodes, cached),
            class_uncached=per_class(self.class_uncached, 1.0),
            class_cached=per_class(self.class_cached, 0.0),
            class_weights=per_class(self.class_weights, 0.0),
        )

    def p99_at(self, lengths: Lengths, own: np.ndarray, index) -> tuple[np.ndarray, np.ndarray]:
        """(uncached, cached) tokens of the rows' p99 prompt: the mix's own on its own rows."""
        p99, share = lengths.prompt_p99, lengths.uncached_share
        u, cached = p99 * share, p99 * lengths.hit_rate  # as prefill.p99_prefill_ms
        on = own.reshape(np.shape(u))
        return (
            np.where(on, self.uncached_p99[index].reshape(on.shape), u),
            np.where(on, self.cached_p99[index].reshape(on.shape), cached),
        )

    def batch_at(self, own: np.ndarray, index, shape) -> BatchMix | None:
        """The decode batch mix of the rows, nan off a mixed member's own rows; None where
        no row is one."""
        if not own.any():
            return None
        nan = np.full(len(own), math.nan)
        return BatchMix(
            context_scv=np.where(own, self.context_scv[index], nan).reshape(shape),
            held_tokens=np.where(own, self.held_tokens[index], nan).reshape(shape),
        )


def _mixed_prompts(comps: list[Component]) -> tuple[list[float], list[float], float, float]:
    """The mix's uncached prompt at the queueing nodes and at p99, with the cached prefix
    each brings (`classes.cached_per_uncached`)."""
    quantiles = mixture_quantiles(uncached(comps), [*_NODE_PROBABILITIES, 0.99])
    cached = [u * cached_per_uncached(comps, u) for u in quantiles]
    return quantiles[:-1], cached[:-1], quantiles[-1], cached[-1]


def _class_nodes(comps: list[Component], width: int) -> tuple[list, list, list]:
    """Every class at its own log-normal's queueing nodes, padded to `width` classes."""
    us, cs, ws = [], [], []
    for c in comps:
        p = c.prompt_p50 * np.exp(c.prompt_sigma * queueing.Z_NODES)
        us += (p * (1.0 - c.hit_rate)).tolist()
        cs += (p * c.hit_rate).tolist()
        ws += (c.weight * queueing.Z_WEIGHTS).tolist()
    pad = (width - len(comps)) * _K
    return us + [1.0] * pad, cs + [0.0] * pad, ws + [0.0] * pad


def member_mix(resolved: Sequence[Resolved], prompt_p50: np.ndarray) -> MemberMix | None:
    """The members' mixes; None when every member is one class."""
    comps = [components(r.workload) for r in resolved]
    if all(len(c) == 1 for c in comps):
        return None
    width = max(len(c) for c in comps)
    nan_k = [math.nan] * _K
    rows: dict[str, list] = {k: [] for k in MemberMix.__dataclass_fields__ if k != "prompt_p50"}
    for r, cs in zip(resolved, comps, strict=True):
        mixed = len(cs) > 1
        u, cached, u99, c99 = _mixed_prompts(cs) if mixed else (nan_k, nan_k, math.nan, math.nan)
        cu, cc, cw = (
            _class_nodes(cs, width)
            if mixed
            else ([1.0] * width * _K, [0.0] * width * _K, [0.0] * width * _K)
        )
        scv, held = batch_mix(r.workload)
        for key, value in zip(
            rows,
            (u, cached, u99, c99, cu, cc, cw, scv, held),
            strict=True,
        ):
            rows[key].append(value)
    return MemberMix(
        prompt_p50=np.asarray(prompt_p50, dtype=float),
        **{k: np.array(v, dtype=float) for k, v in rows.items()},
    )
