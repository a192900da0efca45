"""One forward pass's cost once its contexts are known, at any batch and chunk (physics.md 2.3).

`step.Engine` holds what an engine's passes share (its model, GPU, layout and efficiencies);
`PassTerms` adds what a pass costs regardless of how many tokens it carries, so searches that
try many batches on the same contexts repeat only the short part, and `stacked_ms` prices
several batches in one call. Everything broadcasts over numpy arrays, TP degree included.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from disagg_decider.calc.physics import model_costs, step_split
from disagg_decider.calc.physics.engine_cache import once

if TYPE_CHECKING:
    from disagg_decider.calc.physics.step import Engine


@dataclass(frozen=True, eq=False)
class PassTerms:
    """The parts of a forward pass that do not depend on how many tokens it carries.

    Searches evaluate the same contexts at many batch and chunk sizes; computing these once
    keeps the repeated part of the roofline short.
    """

    engine: Engine
    kv_read_ms_per_sequence: np.ndarray  # HBM time to read one decode sequence's KV
    decode_flops_per_sequence: np.ndarray  # one decode token: linear + attention
    prefill_context: np.ndarray
    fixed_ms: np.ndarray  # all-reduce latency and per-step overhead
    moe_comm: bool = False  # some candidate runs expert parallelism
    decode_context: np.ndarray | float = 0.0  # KV tokens each decode sequence reads
    decode_attention_flops: np.ndarray | float = 0.0  # one decode token's attention FLOPs

    def ms(self, decode_batch, prefill_tokens):
        """Time of one pass with `decode_batch` decode sequences and `prefill_tokens` new ones.

        The one place every step time comes from (calculator and simulator alike): the
        engine's measured step source where it has one and covers the layout, else the
        roofline.
        """
        steps = self.engine.steps
        if steps is None:
            return self.roofline_ms(decode_batch, prefill_tokens)
        e = self.engine
        measured, covered = steps.pass_ms(
            e.tp,
            e.dp,
            e.ep,
            decode_batch,
            self.decode_context,
            prefill_tokens,
            self.prefill_context,
        )
        if measured is not None and covered.all():
            return measured
        roofline = self.roofline_ms(decode_batch, prefill_tokens)
        return roofline if measured is None else np.where(covered, measured, roofline)

    def roofline_ms(self, decode_batch, prefill_tokens):
        """The roofline pass: the longer of memory and compute time, plus communication."""
        e = self.engine
        m, eff = e.model, e.eff
        b, c = decode_batch, prefill_tokens
        if eff.attention_mfu is not None:
            return step_split.pass_ms(self, b, c)
        tokens = b + c
        weights_ms = e.dense_weights_ms
        if weights_ms is None:
            weights = (
                model_costs.weight_bytes_read(m, e.weights_dtype, tokens) + e.extra_weight_bytes
            )
            weights_ms = weights * e.ms_per_byte
        memory_ms = weights_ms + b * self.kv_read_ms_per_sequence
        # Passes that carry prompt tokens run at prefill MFU, pure decode passes at decode MFU;
        # small passes reach less of it (short GEMMs are launch- and memory-bound).
        scalar_c = isinstance(c, (float, int))
        if scalar_c:
            mfu = eff.prefill_mfu if c > 0 else eff.decode_mfu
        else:
            mfu = np.where(c > 0, eff.prefill_mfu, eff.decode_mfu)
        mfu = mfu * tokens / (tokens + eff.saturation_tokens)
        flops = b * self.decode_flops_per_sequence
        if not (scalar_c and c == 0 and self.no_prefill_context):
            # A pure decode pass with no prompt context adds exactly +0.0 here, which could
            # only turn a -0.0 compute time into +0.0 under a positive memory time.
            prefill_flops = c * e.linear_flops_per_token + model_costs.attention_flops(
                m, c, self.prefill_context
            )
            flops = flops + prefill_flops
        compute_ms = (flops / mfu) * e.ms_per_flop
        if e.model.moe is not None and not (scalar_c and c == 0):
            # Routed experts' GEMMs run at the tokens each expert receives, not the pass's.
            compute_ms = compute_ms + np.where(c > 0, e.expert_gemm_ms, 0.0)
        # Two ring all-reduces of the hidden state per layer: per-token bandwidth here, their
        # latency in `fixed_ms`.
        all_reduce_ms = e.allreduce_coefficients[0] * tokens
        comm_ms = all_reduce_ms + self.fixed_ms
        if self.moe_comm:
            # MoE dispatch/combine, not overlapped with compute (SGLang's two-batch overlap
            # hides part of it: this side errs slow).
            (ll_token, ll_fixed), (nm_token, nm_fixed) = e.decode_alltoall, e.prefill_alltoall
            comm_ms = comm_ms + np.where(
                c > 0, nm_token * tokens + nm_fixed, ll_token * tokens + ll_fixed
            )
        return np.maximum(memory_ms, compute_ms) + comm_ms

    @once
    def no_prefill_context(self) -> bool:
        """The pass has no earlier prompt tokens (a pure decode pass's terms)."""
        context = self.prefill_context
        return context.ndim == 0 and bool(context == 0.0)


def stacked_ms(terms: PassTerms, batches, prompt_tokens) -> np.ndarray:
    """`terms.ms(batches[i], prompt_tokens[i])` for every i, in one call: stacked on a new
    first axis (`prompt_tokens` one float for all, or one per batch). Every operation of a
    pass is element by element, so each slice has the bits its own call gives; a search
    reads a colocated line's steps at three batches (its mean, B + 1 and p99), in one call
    instead of three.

    The stacked values take the pass's other operands' dimensions (leading ones added where
    those have more), so they broadcast against them as each batch alone does."""
    e = terms.engine
    operands = (
        e.tp,
        e.dp,
        e.ep,
        terms.kv_read_ms_per_sequence,
        terms.decode_flops_per_sequence,
        terms.prefill_context,
        terms.fixed_ms,
        terms.decode_context,
    )
    scalar_c = isinstance(prompt_tokens, (float, int))
    values = batches if scalar_c else (*batches, *prompt_tokens)
    shape = np.broadcast(*values).shape
    ndim = 0  # the operands' most dimensions (floats have none)
    for x in operands:
        if type(x) is np.ndarray and x.ndim > ndim:
            ndim = x.ndim
    shape = (*(1,) * max(ndim - len(shape), 0), *shape)
    b = np.empty((len(batches), *shape))
    for i, part in enumerate(batches):
        b[i] = part
    if scalar_c:
        return terms.ms(b, prompt_tokens)
    c = np.empty((len(prompt_tokens), *shape))
    for i, part in enumerate(prompt_tokens):
        c[i] = part
    return terms.ms(b, c)


# Up to this many points a pass, `paired_ms` prices both passes in one call: it saves one
# call's fixed cost (~30 numpy calls, 10-20 us) but prices the prompt's terms on the pure
# decode slots too, and past ~2,000 points that costs more (a batch's search: 4.3 ms against
# 2.6 at 15,000 points; 42 us against 52 at 300, one decision's).
PAIRED_MAX_POINTS = 1_024


def with_prefill_context(terms: PassTerms, prefill_context) -> PassTerms:
    """`pass_terms(terms.engine, its decode context, prefill_context)` from a pass on the same
    decode contexts: the same values (only the prompt's context differs), its other fields
    shared (so `paired_ms` knows the two passes apart only there)."""
    return replace(terms, prefill_context=np.asarray(prefill_context, dtype=float))


def paired_ms(empty: PassTerms, full: PassTerms, empty_batches, full_batches, prompt_tokens):
    """(`stacked_ms(empty, empty_batches, 0.0)`, `stacked_ms(full, full_batches,
    prompt_tokens)`) in one pass call: a pure decode pass's batches and a chunk-carrying
    one's, stacked, the pure decode ones with no prompt tokens and no prompt context.

    The same bits: every operation of a pass is element by element, and the terms a pure
    decode pass skips (the prompt's FLOPs and attention, the routed experts' GEMMs) add
    exactly +0.0 to non-negative times at no prompt tokens; mfu and the all-to-all pick
    the decode values at no prompt tokens, as the pure decode pass does. Only where that
    holds and the stacked slices have the shapes the two calls give: `full` shares all but
    its prompt context with `empty` (`with_prefill_context`), `empty` has none, the engine
    prices passes by the roofline (no measured steps), the pure decode batches broadcast to
    the shape the other pass's batches, prompts and prompt context do, and a pass holds at
    most `PAIRED_MAX_POINTS` points; else the two calls."""
    if not _pairs(empty, full):
        return stacked_ms(empty, empty_batches, 0.0), stacked_ms(full, full_batches, prompt_tokens)
    context = full.prefill_context
    shape = np.broadcast(*empty_batches).shape
    wide = np.broadcast(*full_batches, *prompt_tokens, context, full.kv_read_ms_per_sequence)
    if (
        wide.size > PAIRED_MAX_POINTS
        or np.broadcast(*full_batches, *prompt_tokens, context).shape != shape
    ):
        return stacked_ms(empty, empty_batches, 0.0), stacked_ms(full, full_batches, prompt_tokens)
    e, n = empty.engine, len(empty_batches)
    operands = (
        e.tp,
        e.dp,
        e.ep,
        full.kv_read_ms_per_sequence,
        full.decode_flops_per_sequence,
        context,
        full.fixed_ms,
        full.decode_context,
    )
    ndim = 0  # the operands' most dimensions, as `stacked_ms` pads to
    for x in operands:
        if type(x) is np.ndarray and x.ndim > ndim:
            ndim = x.ndim
    shape = (*(1,) * max(ndim - len(shape), 0), *shape)
    batches = (*empty_batches, *full_batches)
    b, c = np.empty((len(batches), *shape)), np.empty((len(batches), *shape))
    for i, part in enumerate(batches):
        b[i] = part
    c[:n] = 0.0
    for i, part in enumerate(prompt_tokens):
        c[n + i] = part
    contexts = np.empty((len(batches), *(1,) * (len(shape) - context.ndim), *context.shape))
    contexts[:n] = 0.0
    contexts[n:] = context
    out = with_prefill_context(full, contexts).ms(b, c)
    return out[:n], out[n:]


def _pairs(empty: PassTerms, full: PassTerms) -> bool:
    """Whether `paired_ms` may price the two passes in one call (its conditions but shapes)."""
    if empty.engine.steps is not None or not empty.no_prefill_context:
        return False
    return (
        empty.engine is full.engine
        and empty.kv_read_ms_per_sequence is full.kv_read_ms_per_sequence
        and empty.decode_flops_per_sequence is full.decode_flops_per_sequence
        and empty.fixed_ms is full.fixed_ms
        and empty.moe_comm is full.moe_comm
        and empty.decode_context is full.decode_context
        and empty.decode_attention_flops is full.decode_attention_flops
    )


def pass_terms(engine: Engine, decode_context, prefill_context) -> PassTerms:
    m = engine.model
    linear = engine.linear_flops_per_token
    attention = model_costs.attention_flops(m, 1.0, decode_context)
    return PassTerms(
        engine=engine,
        kv_read_ms_per_sequence=engine.kv_bytes_held(decode_context) * engine.kv_ms_per_byte,
        decode_flops_per_sequence=linear + attention,
        prefill_context=np.asarray(prefill_context, dtype=float),
        fixed_ms=engine.fixed_step_ms,
        moe_comm=m.moe is not None and bool(engine.expert_parallel.any()),
        decode_context=decode_context,
        decode_attention_flops=attention,
    )
