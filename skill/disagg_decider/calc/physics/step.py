"""One forward pass of an engine, as a roofline (physics.md 2.3, 2.4, 2.9).

Prefill, decode and chunked-prefill iterations are all the same thing: some decode tokens,
each reading its context's KV, plus some prefill tokens. The pass takes the longer of its
memory time (weights + KV read over HBM bandwidth x MBU) and its compute time (FLOPs over
peak x MFU), plus tensor-parallel all-reduces and a fixed per-step overhead. One function for
all three keeps the colocated and disaggregated numbers comparable.

Everything broadcasts over numpy arrays, TP degree included: the calculator evaluates many
candidates (workload, prompt length, TP, chunk size, batch) per numpy call. `PassTerms` holds
what a pass costs regardless of its batch, so searches that try many batches on the same
contexts repeat only the short part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from disagg_decider.calc.physics import kv, model_costs, moe, step_split
from disagg_decider.calc.physics.engine_cache import once, shared_property, shared_table
from disagg_decider.catalog import Gpu, ModelSpec, get_link
from disagg_decider.workload import Efficiency

if TYPE_CHECKING:
    from disagg_decider.calc.physics.silicon_steps import SiliconSteps

# Share of NVLink line rate moved data reaches: the catalog's `nvlink` link (0.8); DeepEP's
# normal kernels reach ~153-158 of H800's ~160 GB/s, i.e. 0.8 of its 200 GB/s one way.
NVLINK_EFFICIENCY = get_link("nvlink").efficiency


@dataclass(frozen=True, eq=False)
class Engine:
    """A model on replicas of one GPU type; `tp`, `dp`, `ep` may be arrays of candidates.

    A replica is `dp` attention ranks of `tp` GPUs each, with a MoE model's experts spread
    over `ep` GPUs (`calc/physics/parallel.py`); dp = ep = 1 is plain tensor parallelism. The MoE
    all-to-all crosses `domain_gpus`-GPU scale-up domains over `rdma_gb_per_s` per GPU.
    """

    model: ModelSpec
    gpu: Gpu
    weights_dtype: str
    kv_dtype: str
    tp: np.ndarray | int
    eff: Efficiency
    dp: np.ndarray | int = 1
    ep: np.ndarray | int = 1
    domain_gpus: int = 8
    rdma_gb_per_s: float = 45.0
    # Measured step source (`calc/physics/silicon.py`, `step_source: silicon`); None: the roofline.
    steps: SiliconSteps | None = None

    @once
    def _constants(self) -> dict[str, object] | None:
        """This engine's entry in the shared table, None where it is not shared
        (`engine_cache.shared_table`)."""
        return shared_table(
            self.model,
            self.gpu,
            (self.tp, self.dp, self.ep),
            self.eff,
            (self.weights_dtype, self.kv_dtype, self.domain_gpus, self.rdma_gb_per_s),
            self.steps,
        )

    @property
    def prefill_overhead_ms(self):
        """Fixed time a prefill adds to its pass; the measured source's passes include theirs
        (layouts it does not cover keep the roofline's)."""
        if self.steps is None:
            return self.eff.prefill_overhead_ms
        return self.steps.prefill_overhead_ms(
            self.tp, self.dp, self.ep, self.eff.prefill_overhead_ms
        )

    @shared_property
    def gpus(self):
        """GPUs per replica."""
        return np.asarray(self.tp) * np.asarray(self.dp)

    @shared_property
    def max_decode_batch(self):
        """Sequences a replica may hold: the engine's cap on each attention-DP rank.

        vLLM, SGLang and TensorRT-LLM apply `max_num_seqs` (`max_batch_size`) per DP rank, so
        a DP16/EP16 replica holds up to 16 x 512 sequences, not 512."""
        return self.eff.max_decode_batch * np.asarray(self.dp)

    @shared_property
    def peak_flops(self):
        return model_costs.peak_tflops(self.gpu, self.weights_dtype, self.model) * 1e12 * self.gpus

    @shared_property
    def hbm_bytes_per_s(self):
        return self.gpu.hbm_tb_per_s * 1e12 * self.gpus

    @shared_property
    def ms_per_byte(self):
        """HBM time per byte read, at the achievable share of bandwidth (MBU)."""
        return 1e3 / (self.hbm_bytes_per_s * self.eff.decode_mbu)

    @shared_property
    def kv_ms_per_byte(self):
        """HBM time per KV byte read: at `kv_mbu` where the fitted physics sets it, else MBU."""
        kv_mbu = self.eff.kv_mbu
        return self.ms_per_byte if kv_mbu is None else 1e3 / (self.hbm_bytes_per_s * kv_mbu)

    @shared_property
    def ms_per_flop(self):
        """Compute time per FLOP at peak; divided by the pass's MFU."""
        return 1e3 / self.peak_flops

    @shared_property
    def dense_weights_ms(self):
        """HBM time of a dense model's weights per pass (every pass reads them all): the
        same `(weight_bytes_read + extra_weight_bytes) * ms_per_byte` `PassTerms.ms` computed
        on every call, done once per engine. None for a MoE model (experts touched vary)."""
        if self.model.moe is not None:
            return None
        weights = model_costs.weight_bytes_read(self.model, self.weights_dtype, 0.0)
        return (weights + self.extra_weight_bytes) * self.ms_per_byte

    @shared_property
    def expert_parallel(self):
        return np.asarray(self.ep) > 1

    @shared_property
    def linear_flops_per_token(self):
        """Linear FLOPs per token; under EP the busiest GPU's experts carry the imbalance."""
        base = model_costs.linear_flops_per_token(self.model)
        if not np.any(self.expert_parallel):
            return base  # a plain number keeps the TP-only passes as cheap as before
        extra = (moe.EXPERT_IMBALANCE - 1.0) * moe.routed_flops_per_token(self.model)
        return np.where(self.expert_parallel, base + extra, base)

    @shared_property
    def expert_gemm_ms(self):
        """What a prompt-carrying pass adds for its routed experts' GEMMs running on the
        tokens each expert receives (T k / E of the pass's T), not on all T (`moe.py`)."""
        if self.model.moe is None:
            return 0.0
        routed = moe.routed_flops_per_token(self.model)
        routed = np.where(self.expert_parallel, routed * moe.EXPERT_IMBALANCE, routed)
        extra = moe.expert_gemm_extra_flops(self.model, routed, self.eff)
        return extra * self.ms_per_flop

    @shared_property
    def split_constants(self):
        """The fitted physics' per-engine constants (`step_split.SplitConstants`)."""
        return step_split.engine_constants(self)

    @shared_property
    def extra_weight_bytes(self):
        """Non-expert weights read once more by each DP rank beyond the first."""
        copies = np.asarray(self.dp, dtype=float) - 1.0
        if not np.any(copies):
            return 0.0
        return copies * moe.non_expert_bytes(self.model, self.weights_dtype)

    @shared_property
    def allreduce_coefficients(self):
        """(ms per token, fixed ms) of the TP all-reduces per layer over the scale-up link.

        Two per layer under plain TP; with EP the MoE layers all-to-all instead, leaving one
        per layer (attention) plus one per dense layer. Each DP rank's TP group carries 1/dp
        of the replica's tokens.
        """
        tp = np.asarray(self.tp, dtype=float)
        dp = np.asarray(self.dp, dtype=float)
        layers = self.model.layers
        ops = np.where(
            self.expert_parallel, 2 * layers - model_costs.moe_layers(self.model), 2 * layers
        )
        ring_bytes_per_token = (
            2.0 * (tp - 1.0) / tp * self.model.hidden * model_costs.ACTIVATION_BYTES
        )
        link = model_costs.scaleup_gb_per_s(self.gpu) * 1e9
        per_token = np.where(tp > 1, ops * ring_bytes_per_token / link * 1e3 / dp, 0.0)
        if self.eff.allreduce_time_scale != 1.0:
            per_token = per_token * self.eff.allreduce_time_scale
        fixed = np.where(tp > 1, ops * self.eff.allreduce_latency_us / 1e3, 0.0)
        return per_token, fixed

    @shared_property
    def fixed_step_ms(self):
        """A pass's fixed time: the all-reduces' latency and the per-step overhead."""
        return self.allreduce_coefficients[1] + self.eff.step_overhead_ms

    def alltoall_coefficients(self, low_latency: bool):
        """(ms per token, fixed ms) of the MoE dispatch/combine; DeepEP low-latency mode for
        decode passes, normal mode for passes carrying prompt tokens (calc/physics/moe.py)."""
        nvlink = model_costs.scaleup_gb_per_s(self.gpu) * NVLINK_EFFICIENCY
        per_token, fixed = moe.alltoall_coefficients(
            self.model,
            self.weights_dtype,
            self.ep,
            self.gpus,
            self.domain_gpus,
            nvlink,
            self.rdma_gb_per_s,
            low_latency,
        )
        scale = self.eff.alltoall_time_scale
        return (per_token, fixed) if scale == 1.0 else (per_token * scale, fixed * scale)

    @shared_property
    def decode_alltoall(self):
        return self.alltoall_coefficients(low_latency=True)

    @shared_property
    def prefill_alltoall(self):
        return self.alltoall_coefficients(low_latency=False)

    @shared_property
    def _kv_copies(self):
        return kv.kv_replication(self.model, self.tp)

    def kv_capacity_bytes(self):
        """HBM left for KV across the replica after weights and activation reserve.

        Each GPU holds its share of the non-expert weights (over attention TP) and of the
        experts (over EP, or TP without EP): spreading experts frees memory for KV.
        """
        return self._kv_capacity_bytes

    @shared_property
    def _kv_capacity_bytes(self):
        usable = self.gpu.hbm_gb * 1e9 * self.eff.hbm_utilization
        weights = moe.weights_per_gpu_bytes(self.model, self.weights_dtype, self.tp, self.ep)
        per_gpu = usable - self.eff.activation_reserve_gb * 1e9 - weights
        return np.maximum(per_gpu, 0.0) * self.gpus

    def fits(self):
        return self.kv_capacity_bytes() > 0

    def kv_bytes_held(self, tokens):
        """KV bytes the TP group stores for one sequence of `tokens` (with replication)."""
        return kv.kv_bytes(self.model, self.kv_dtype, tokens) * self._kv_copies


def iteration_ms(engine: Engine, decode_batch, decode_context, prefill_tokens, prefill_context):
    """Time of one forward pass.

    `decode_batch` sequences each add one token after `decode_context` tokens of KV;
    `prefill_tokens` new prompt tokens are computed after `prefill_context` earlier ones.
    """
    return pass_terms(engine, decode_context, prefill_context).ms(decode_batch, prefill_tokens)


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
        moe_comm=m.moe is not None and bool(np.any(engine.expert_parallel)),
        decode_context=decode_context,
        decode_attention_flops=attention,
    )
