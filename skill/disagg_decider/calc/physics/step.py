"""One forward pass of an engine, as a roofline (physics.md 2.3, 2.4, 2.9).

Prefill, decode and chunked-prefill iterations are all the same thing: some decode tokens,
each reading its context's KV, plus some prefill tokens. The pass takes the longer of its
memory time (weights + KV read over HBM bandwidth x MBU) and its compute time (FLOPs over
peak x MFU), plus tensor-parallel all-reduces and a fixed per-step overhead. One function for
all three keeps the colocated and disaggregated numbers comparable.

Everything broadcasts over numpy arrays, TP degree included: the calculator evaluates many
candidates (workload, prompt length, TP, chunk size, batch) per numpy call. `Engine` holds what
every pass of one engine shares; `passes.PassTerms` what a pass costs regardless of its batch
(the roofline itself is `PassTerms.roofline_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from disagg_decider.calc.physics import kv, model_costs, moe, step_split
from disagg_decider.calc.physics.engine_cache import once, shared_property, shared_table
from disagg_decider.calc.physics.passes import pass_terms
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
        if not self.expert_parallel.any():
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
        if not copies.any():
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
