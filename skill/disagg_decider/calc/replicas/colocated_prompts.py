"""The prompt side of colocated replicas at a batch (`colocated.evaluate`): the chunk room,
the rate Little's law gives, and the M/G/c queue prompts form behind the pool's router.

`colocated.evaluate` prices a batch from it, `colocated_load` places loads on it and reads the
p99 TTFT's terms without the rest (`ttft_terms`): one function for the shared part, so every
caller sees the same bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from disagg_decider.calc.physics.passes import paired_ms
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.array_helpers import broadcast_shape, planes_of, shape_of

if TYPE_CHECKING:
    from disagg_decider.calc.replicas.colocated import Lines


class PromptQueue(NamedTuple):
    """The prompt side of colocated replicas at a batch: the chunk room, the rate Little's law
    gives, and the M/G/c queue prompts form (mean service, its scv, S' at the z nodes)."""

    room: np.ndarray  # prompt tokens a chunk-carrying iteration takes
    per_room: np.ndarray  # iterations one prompt's chunks occupy
    t_full: np.ndarray  # a chunk-carrying iteration, ms
    rate_per_ms: np.ndarray  # per replica
    seen_empty: np.ndarray  # the pure decode step at B + 1, ms
    pool_rate: np.ndarray  # the pool's arrivals, per ms
    mean_s: np.ndarray  # mean service, ms
    scv: np.ndarray
    nodes: np.ndarray  # S' at `queueing.Z_NODES`, a new last axis


def prompt_queue(at: Lines, b, steps=None) -> PromptQueue:
    """What `evaluate` and `ttft_terms` share, computed by one function so both see the same
    bits. `steps`, (room, the chunk-carrying pass at the batch, the pure decode and the
    chunk-carrying pass at B + 1), may be passed in by a caller that has them
    (`colocated.evaluate` takes its passes in one call each)."""
    c, lengths = at.chunk, at.lengths
    u_mean = lengths.uncached_mean
    if steps is None:  # the chunk-carrying pass at B and B + 1 and the pure decode one at B + 1
        room = np.maximum(c - b, 1.0)
        empty, full = paired_ms(at.empty_pass, at.full_pass, (b + 1.0,), (b, b + 1.0), (room, room))
        steps = (room, full[0], empty[0], full[1])
    room, t_full, seen_empty, seen_full = steps
    per_room = u_mean / room
    # A decoding request is in the batch it decodes with: itself and the others, B + 1 on
    # average (M/G/inf: Poisson(B) others), so Little's law reads the steps at B + 1. Where
    # the batch is a handful this is most of the step's growth: a MoE step on 8 L40S runs
    # 7.7 ms at batch 1 and 13.3 at 3, each sequence waking other experts (issue 24).
    seen_slow = seen_full - seen_empty
    rate_per_ms = b / (lengths.output_mean * seen_empty + (b * per_room) * seen_slow)
    # Prefill as a server working through prompt tokens at `room` tokens per t_full: a prompt
    # of u tokens occupies it u / room iterations (chunks pack several short prompts), and its
    # first token comes out of the iteration that finishes it. The pool's replicas behind a
    # join-shortest-queue router form one M/G/c queue (`queueing`).
    # full * (1 + u / room) at every node. Uncached nodes held node-major (a search's many
    # lines) give S' laid out so too, read with the nodes on the last axis.
    u = at.uncached_nodes
    planes = None if u.flags.c_contiguous else planes_of(u)
    if planes is not None:
        nodes = np.moveaxis(_times_one_plus(t_full, planes / np.asarray(room)), 0, -1)
    else:
        nodes = _times_one_plus(np.asarray(t_full)[..., None], u / np.asarray(room)[..., None])
    return PromptQueue(
        room=room,
        per_room=per_room,
        t_full=t_full,
        rate_per_ms=rate_per_ms,
        seen_empty=seen_empty,
        pool_rate=rate_per_ms * at.servers,  # `rate_per_ms` is per replica
        mean_s=t_full * per_room,
        scv=at.prompt_scv,
        nodes=nodes,
    )


def _times_one_plus(full, share: np.ndarray) -> np.ndarray:
    """full * (1 + share), in place on `share` (a fresh array) where its shape holds the
    product's: the same operations on the same values (addition commutes exactly)."""
    if broadcast_shape(shape_of(full), share.shape) != share.shape:
        return full * (1.0 + share)
    np.add(share, 1.0, out=share)
    np.multiply(full, share, out=share)
    return share


def ttft_p99_of(at: Lines, q: PromptQueue) -> np.ndarray:
    return queueing.p99_of_sum_ms(*_ttft_terms(at, q))


def _ttft_terms(at: Lines, q: PromptQueue) -> tuple:
    return (q.pool_rate, at.servers, q.mean_s, q.scv, q.nodes)


def ttft_terms(at: Lines, batch) -> tuple:
    """The arguments of the p99 TTFT bisection (`queueing.p99_of_sum_ms`) that
    `evaluate(at, batch, with_ttft=True)` runs, without the rest.

    `colocated_load.latency_terms` needs only the p99 TTFT at its fractional batches: the
    TPOT p99, the miss probability and the headroom (two more roofline passes and a tail sum)
    would be thrown away; and a block solves its report-only bisections together
    (`reported_ttft`). Same function for the shared part (`prompt_queue`), so the same bits.
    """
    return _ttft_terms(at, prompt_queue(at, batch))
