"""What the calculator hands downstream: plain, JSON-ready records with units in their names."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModeResult(_Out):
    """One serving mode, sized for the workload's rate on the cluster."""

    mode: Literal["colocated", "disaggregated"]
    feasible: bool  # some layout on the cluster's GPUs meets both SLOs at a positive rate
    fits_cluster: bool  # the workload's rate fits in cluster.gpus
    gpus: int  # sized for the workload's rate (capped at the cluster)
    gpus_needed_for_rate: int | None  # whole replicas for the rate, may exceed the cluster
    max_rate_per_s: float  # goodput within the whole cluster's GPU budget
    goodput_per_gpu: float  # max_rate_per_s / cluster.gpus: idle GPUs count against a mode
    ttft_p99_ms: float | None  # at the workload's rate with the sized pools
    tpot_p99_ms: float | None
    cost_per_million_tokens_usd: float | None
    cost_per_year_usd: float


class ColocatedResult(ModeResult):
    mode: Literal["colocated"] = "colocated"
    tp: int  # attention TP per DP rank; GPUs per replica = tp x dp
    dp: int = 1  # data-parallel attention ranks per replica
    ep: int = 1  # expert-parallel size (1: experts sharded by TP)
    layout: str = ""  # e.g. TP8, DP16/EP16 (calc/physics/parallel.py)
    replicas: int
    chunk_tokens: int  # max_num_batched_tokens of the best chunked-prefill setting
    max_batch: int


class DisaggregatedResult(ModeResult):
    mode: Literal["disaggregated"] = "disaggregated"
    prefill_tp: int  # attention TP per DP rank; GPUs per replica = tp x dp
    decode_tp: int
    prefill_dp: int = 1
    decode_dp: int = 1
    prefill_ep: int = 1
    decode_ep: int = 1
    prefill_layout: str = ""
    decode_layout: str = ""
    prefill_replicas: int
    decode_replicas: int
    prefill_gpus: int
    decode_gpus: int
    max_batch: int
    transfer_ms_p99: float


class ThresholdPoint(_Out):
    """Goodput per GPU of the conditional layout at one routing threshold.

    `threshold_tokens` 0 is always-disaggregated, None no prefill pool (colocated)."""

    threshold_tokens: int | None
    goodput_per_gpu: float
    share_to_prefill: float


class ConditionalResult(_Out):
    """Conditional disaggregation: prompts above `threshold_tokens` uncached tokens go to a
    prefill pool, the rest prefill on the decode workers (`calc/modes/conditional.py`).

    `layout` says what the best threshold is: `conditional`, or `disaggregated` (T = 0) or
    `colocated` (no prefill pool) when one of those is within 1% of the best. `max_rate_per_s`
    and `goodput_per_gpu` are the whole cluster's split's, as the modes' are; the pools are
    sized for the workload's rate (`calc/modes/conditional_sizing.py`: the fewest replicas of the
    chosen threshold, TP pair and chunk that carry it; the cluster's split where the rate
    needs it all); latencies at the workload's rate on those pools.
    """

    mode: Literal["conditional"] = "conditional"
    layout: Literal["colocated", "disaggregated", "conditional"]
    feasible: bool
    threshold_tokens: int | None
    threshold_reason: str
    share_to_prefill: float  # requests sent to the prefill pool
    max_rate_per_s: float
    goodput_per_gpu: float
    prefill_tp: int | None
    decode_tp: int
    prefill_replicas: int
    decode_replicas: int
    chunk_tokens: int | None  # the decode workers' max_num_batched_tokens when they prefill
    ttft_p99_ms: float | None  # over all requests, pooled and local (99% of them within it)
    tpot_p99_ms: float | None
    # Each part's own p99 TTFT where the layout is conditional (one may exceed the target
    # while 99% of all requests meet it), else None.
    pooled_ttft_p99_ms: float | None = None
    local_ttft_p99_ms: float | None = None
    gain_over_colocated: float | None
    gain_over_disaggregated: float | None
    curve: list[ThresholdPoint]

    @property
    def gpus(self) -> int:
        """GPUs its pools take (plain TP replicas; no prefill pool where it has none)."""
        return (
            self.prefill_replicas * (self.prefill_tp or 0) + self.decode_replicas * self.decode_tp
        )


class Limit(_Out):
    """What stops a mode (or both) from serving the workload as asked, in words a user acts on.

    `memory`: weights plus one sequence's KV do not fit any replica the cluster allows;
    `context`: prompt p99 plus output p99 exceed the model's context; `slo`: no layout meets a
    p99 target, even unloaded; `rate`: the layout meets the targets but the rate needs more
    GPUs than the cluster has.
    """

    mode: Literal["colocated", "disaggregated", "both"]
    kind: Literal["memory", "context", "slo", "rate"]
    detail: str


class InteractivityBand(_Out):
    """The tokens/s-per-user interval where the split beats colocation by `margin`
    (`interactivity.py`: the always-disaggregated goodput per GPU at least `margin` times the
    colocated one, or the split alone meets the targets).

    An edge at the end of the grid (`reaches_grid_low` / `reaches_grid_high`) means the band
    runs at least that far; beyond the grid nothing was priced.
    """

    low_tokens_per_s_per_user: float
    high_tokens_per_s_per_user: float
    reaches_grid_low: bool
    reaches_grid_high: bool
    target_tokens_per_s_per_user: float
    target_inside: bool
    margin: float  # the rulebook's min_gain the split must reach
    grid_low_tokens_per_s_per_user: float
    grid_high_tokens_per_s_per_user: float
    grid_points: int  # TPOT targets priced (the workload's own included)
    basis: str


class Analysis(_Out):
    """Per-request figures at the p50 prompt after prefix-cache hits, plus both modes."""

    kv_bytes_per_token: float
    kv_bytes_per_request: float
    kv_transfer_ms: float  # the engine's transfer style, exposed part
    kv_transfer_serialized_ms: float
    kv_transfer_layerwise_ms: float
    kv_transfer_path: Literal["scale-up", "pcie", "network"]
    kv_transfer_gb_per_s: float
    kv_transfer_rdma: bool
    prefill_ms: float
    decode_step_ms: float
    effective_prompt_tokens: float
    colocated: ColocatedResult
    disaggregated: DisaggregatedResult
    gain: float | None  # disaggregated / colocated goodput; None unless both modes are feasible
    crossover_prompt_tokens: int | None
    # The conditional layout's threshold (0: always-disaggregated; None: no prefill pool).
    conditional_disagg_threshold_tokens: int | None
    limits: list[Limit]
    warnings: list[str]
    conditional: ConditionalResult | None = None
    # Set by the pipeline (decide.py) from a coarse TPOT sweep and the rulebook's min_gain.
    interactivity_band: InteractivityBand | None = None
