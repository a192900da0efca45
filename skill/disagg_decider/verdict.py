"""The verdict: what `decide` answers, in one JSON-ready record.

Renderers, the MCP server and the deploy emitters read only this (and the workload), so they
can never disagree with the CLI.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from disagg_decider.calc.result import (
    ColocatedResult,
    ConditionalResult,
    DisaggregatedResult,
    InteractivityBand,
    Limit,
)
from disagg_decider.plan import Plan
from disagg_decider.plan_text import NextStep

Decision = Literal["colocate", "dynamo", "llm-d"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Reference(_Out):
    title: str
    url: str


class Comparison(_Out):
    """One leaf of a rule's condition as evaluated: metric op threshold, with both values."""

    metric: str
    op: str
    actual: Any
    threshold: Any
    param: str | None = None
    holds: bool


class RuleIdentity(_Out):
    """Who a rule is and which way it pushes: what a fired rule and an explained rule share."""

    id: str
    name: str
    title: str
    category: str
    kind: Literal["veto", "effect", "advice"]  # advice: reported, weighs nothing
    pushes: Literal["colocate", "disaggregate", "dynamo", "llm-d", "advice"]


class FiredRule(RuleIdentity):
    weight: float
    compared: list[Comparison]
    rationale: str
    references: list[Reference] = []


class Assumption(_Out):
    """A default the verdict filled in because the workload left it out (assumptions.py)."""

    field: str  # dotted path in the workload file
    value: Any  # the value the verdict used
    affects: str  # what it changes, for the reader


class Metrics(_Out):
    """Per-request figures at the p50 prompt after prefix-cache hits, and both modes' goodput."""

    kv_bytes_per_token: float
    kv_bytes_per_request: float
    kv_transfer_ms: float
    kv_transfer_serialized_ms: float
    kv_transfer_layerwise_ms: float
    kv_transfer_path: str
    kv_transfer_gb_per_s: float
    kv_transfer_rdma: bool
    prefill_ms: float | None  # null where the model fits no replica (a memory limit)
    decode_step_ms: float | None
    effective_prompt_tokens: float
    goodput_per_gpu_colocated: float
    goodput_per_gpu_disaggregated: float
    gain: float | None
    crossover_prompt_tokens: int | None
    # Requests the conditional layout prefills locally with nothing cached, which Dynamo's
    # router cannot keep local (calc/modes/local_prefill_share.py); null unless the layout is
    # conditional.
    conditional_cold_local_share: float | None = None


class Sizing(_Out):
    cluster_gpus: int  # what the workload has; a mode's gpus_needed_for_rate may exceed it
    prefill_gpus: int
    decode_gpus: int
    colocated_gpus: int
    prefill_replicas: int
    decode_replicas: int
    colocated_replicas: int
    prefill_tp: int
    decode_tp: int
    colocated_tp: int  # attention TP per DP rank; GPUs per replica = tp x dp
    prefill_dp: int = 1  # data-parallel attention ranks per replica (calc/physics/parallel.py)
    decode_dp: int = 1
    colocated_dp: int = 1
    prefill_ep: int = 1  # expert-parallel size; 1 = experts sharded by TP
    decode_ep: int = 1
    colocated_ep: int = 1
    decode_max_batch: int
    colocated_max_batch: int
    colocated_chunk_tokens: int


class PricedDtypes(_Out):
    """The number formats the verdict priced, and where they come from."""

    weights: str  # a `dtypes` precision: `fp8`, or `mxfp4-experts/bf16` (experts/the rest)
    kv_cache: str
    source: str  # "workload", or "model: <where the checkpoint's formats are published>"


class Neighbour(_Out):
    """A grid threshold next to the chosen one, and its goodput per GPU relative to the chosen."""

    threshold_tokens: int
    goodput_ratio: float  # neighbour / chosen goodput per GPU


class Cliff(_Out):
    """Whether the conditional layout's routing threshold sits where goodput falls steeply."""

    threshold_tokens: int
    neighbours: list[Neighbour]  # the grid thresholds just below and just above
    drop_share: float  # a neighbour this much lower (share of the chosen's goodput) is a cliff
    on_cliff: bool
    sentence: str


class Confidence(_Out):
    """How far the deciding gain sits from its rule's threshold, against the calculator's
    measured error (calc/error_bands.json), and whether the routing threshold is on a cliff."""

    gain: float | None  # the gain the deciding comparison read (metrics.gain)
    rule: str | None  # the fired rule whose gain comparison sits nearest its threshold
    param: str | None  # its rulebook parameter (min_gain...)
    threshold: float | None
    margin: float | None  # gain / threshold - 1
    # |log(gain / threshold)| in units of the error band's half-width: 1 or less is a close call
    distance_in_error_bands: float | None = None
    error_band_low: float  # the gain's measured error as a factor range (calculator / simulator)
    error_band_high: float
    close_call: bool
    summary: str | None  # one sentence, only for a close call
    cliff: Cliff | None = None  # the conditional layout's threshold; None for other layouts
    basis: str  # where the error figures come from


class Provenance(_Out):
    """Where each number comes from (provenance.py): `fields` maps every numeric leaf's JSON
    path (list indices generalised: `pools[]`) to its source, `inputs` what the derived figures
    rest on (the model, GPU, link, efficiency constants and step times)."""

    fields: dict[str, str]
    inputs: dict[str, str]


class Verdict(_Out):
    workload: str
    model: str
    gpu: str
    decision: Decision
    disaggregate: bool
    # The chosen layout meets both p99 targets on the cluster's GPUs at some rate; when false,
    # `limits` says what stops it (and the decision is colocate unless a split is feasible).
    feasible: bool
    summary: str
    fired_rules: list[FiredRule]
    scores: dict[str, float]
    metrics: Metrics
    sizing: Sizing
    colocated: ColocatedResult
    disaggregated: DisaggregatedResult
    # The routing threshold of the best layout (`conditional`): 0 always-disaggregated, None
    # no prefill pool (the reason is conditional.threshold_reason).
    conditional_disagg_threshold_tokens: int | None
    limits: list[Limit]
    thresholds: dict[str, Any]
    overrides_applied: list[str]
    warnings: list[str]
    # Defaults filled in where the workload said nothing (network, Kubernetes, maturity, dtypes,
    # efficiencies...): each can move the decision, so each is named.
    assumptions: list[Assumption] = []
    calibration: list[str] = []  # constants taken from a calibration file, with their residuals
    slo_basis: str = "p99-under-load"
    # Where the step times came from, for a workload that asked for `step_source: silicon`:
    # silicon (calc/physics/silicon.py), or default where the database lacked it (see warnings).
    # None (the default physics, not asked) is left out of the output, which stays as before.
    step_source: Literal["default", "silicon"] | None = Field(
        default=None, exclude_if=lambda value: value is None
    )
    # Which of the three layouts serves the most per GPU within the p99 targets (the decision
    # stays colocate|dynamo|llm-d); `conditional` holds its threshold, pools and curve.
    # `none` where no layout meets the targets (then `limits` says why).
    layout: Literal["colocated", "disaggregated", "conditional", "none"] = "colocated"
    conditional: ConditionalResult | None = None
    # The layout Dynamo's router can run as sized: `disaggregated` (the always-split pools) where
    # the conditional layout keeps a material share of cache-cold prompts local, which Dynamo
    # sends to the prefill pool (calc/modes/local_prefill_share.py); `layout` otherwise. llm-d runs
    # `layout`.
    dynamo_layout: Literal["colocated", "disaggregated", "conditional", "none"] = "colocated"
    # The weight and KV formats priced: the workload's, or the model's published ones.
    dtypes: PricedDtypes | None = None
    # The tokens/s per user (1000 / TPOT ms) where the always-disaggregated split serves at
    # least min_gain times the colocated goodput per GPU, read off a coarse sweep of the TPOT
    # target (interactivity.py); null when it wins nowhere on the grid.
    interactivity_band: InteractivityBand | None = None
    # What to deploy (orchestrator, pools, threshold, GPUs, cost; plan.py): the summary's first
    # sentence. Null where the chosen mode meets no target. `alternatives`: the other feasible
    # layouts, priced; `next_steps`: commands to deploy, simulate, benchmark and calibrate
    # (the workload path is WORKLOAD.yaml until a front end that read the file puts it in).
    plan: Plan | None = None
    alternatives: list[Plan] = []
    next_steps: list[NextStep] = []
    # How close the call is (confidence.py) and where every number comes from (provenance.py).
    confidence: Confidence | None = None
    provenance: Provenance | None = None
