"""The named metrics a rule may compare: workload fields and calculator outputs, flat.

This table is the only vocabulary of the rulebook. Rule files are checked against it at load
time (a typo fails with the nearest name), the skill file documents it, and nothing computes
a metric anywhere else: arithmetic stays in the calculator, out of YAML.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from disagg_decider.calc.modes.local_prefill_share import cold_local_share
from disagg_decider.calc.result import Analysis
from disagg_decider.dtypes import DTYPES, parts
from disagg_decider.workload import Resolved

Value = float | int | bool | str | None


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    doc: str
    get: Callable[[Resolved, Analysis], Value]

    @property
    def kind(self) -> Literal["bool", "enum", "number"]:
        """What a rule may compare this metric with, read from its unit: "bool" is a flag,
        "a|b|c" lists an enum's values, any other unit (tokens, ms, share...) is a number."""
        if self.unit == "bool":
            return "bool"
        return "enum" if "|" in self.unit else "number"

    @property
    def choices(self) -> tuple[str, ...]:
        """The allowed values of an enum metric; empty for the others."""
        return tuple(self.unit.split("|")) if self.kind == "enum" else ()


def bulk_dtype(precision: str) -> str:
    """The format most weight bytes are in: the experts' under mixed precision."""
    return parts(precision)[1]


def _w(r: Resolved):
    return r.workload


METRICS: tuple[Metric, ...] = (
    # --- the workload as given
    Metric("prompt_tokens_p50", "tokens", "median prompt length", lambda r, a: _w(r).traffic.prompt_tokens.p50),
    Metric("prompt_tokens_p99", "tokens", "p99 prompt length", lambda r, a: _w(r).traffic.prompt_tokens.p99),
    Metric("output_tokens_p50", "tokens", "median output length", lambda r, a: _w(r).traffic.output_tokens.p50),
    Metric("output_tokens_p99", "tokens", "p99 output length", lambda r, a: _w(r).traffic.output_tokens.p99),
    Metric("prefix_cache_hit_rate", "share", "share of prompt tokens already cached", lambda r, a: _w(r).traffic.prefix_cache_hit_rate),
    Metric("requests_per_second", "req/s", "offered load", lambda r, a: _w(r).traffic.requests_per_second),
    Metric("traffic_classes", "classes", "request classes in the traffic (1 for the single-class form)", lambda r, a: len(_w(r).traffic.classes or ()) or 1),
    Metric("ttft_slo_ms", "ms", "p99 time-to-first-token target", lambda r, a: _w(r).slo.ttft_ms),
    Metric("tpot_slo_ms", "ms", "p99 time-per-output-token target", lambda r, a: _w(r).slo.tpot_ms),
    Metric("cluster_gpus", "GPUs", "GPUs available to this service", lambda r, a: _w(r).cluster.gpus),
    Metric("gpus_per_node", "GPUs", "GPUs per node", lambda r, a: _w(r).cluster.gpus_per_node),
    Metric("network_rdma", "bool", "the scale-out network supports RDMA (GPUDirect)", lambda r, a: r.link.rdma),
    Metric("network_gbps_per_gpu", "Gb/s", "scale-out line rate per GPU", lambda r, a: r.link_gbps),
    Metric("kubernetes", "bool", "the service runs on Kubernetes", lambda r, a: _w(r).cluster.kubernetes),
    Metric("ops_maturity", "low|medium|high", "can the team run two pools with per-role autoscaling", lambda r, a: _w(r).ops.maturity),
    Metric("orchestrator_preference", "any|kubernetes-native|managed-stack", "what the team wants to operate", lambda r, a: _w(r).ops.orchestrator_preference),
    Metric("cncf_commitment", "bool", "the platform standardises on CNCF projects", lambda r, a: _w(r).ops.cncf_commitment),
    Metric("wants_sla_planner", "bool", "the team wants SLA-driven P/D autoscaling", lambda r, a: _w(r).ops.wants_sla_planner),
    Metric("wants_scale_to_zero", "bool", "pools must scale to zero when idle", lambda r, a: _w(r).ops.wants_scale_to_zero),
    Metric("engine", "vllm|sglang|trtllm", "inference engine", lambda r, a: _w(r).engine),
    Metric("weights_dtype", "|".join(DTYPES), "weight format priced (the model's own where the workload omits it; mixed precision: the routed experts', most of the bytes)", lambda r, a: bulk_dtype(_w(r).priced_weights_dtype)),
    Metric("model_is_moe", "bool", "mixture-of-experts model", lambda r, a: r.model.moe is not None),
    Metric("model_uses_mla", "bool", "multi-head latent attention (compressed KV)", lambda r, a: r.model.mla is not None),
    Metric("model_params_b", "1e9 params", "total parameters", lambda r, a: r.model.params_total_b),
    Metric("scaleup_domain_gpus", "GPUs", "GPUs one NVLink domain spans (72 on NVL72)", lambda r, a: r.gpu.scaleup_domain_gpus),
    # --- the calculator
    Metric("effective_prompt_tokens", "tokens", "p50 prompt after prefix-cache hits", lambda r, a: a.effective_prompt_tokens),
    Metric("kv_bytes_per_token", "bytes", "KV bytes per token", lambda r, a: a.kv_bytes_per_token),
    Metric("kv_bytes_per_request", "bytes", "KV bytes moved per request at the p50 prompt", lambda r, a: a.kv_bytes_per_request),
    Metric("kv_transfer_ms", "ms", "exposed KV transfer time at the p50 prompt", lambda r, a: a.kv_transfer_ms),
    Metric("kv_transfer_p99_ms", "ms", "exposed KV transfer time at the p99 prompt", lambda r, a: a.disaggregated.transfer_ms_p99),
    Metric("kv_transfer_share_of_ttft", "share", "p99 transfer time over the TTFT target", lambda r, a: a.disaggregated.transfer_ms_p99 / _w(r).slo.ttft_ms),
    Metric("kv_transfer_rdma", "bool", "the KV moves over NVLink or RDMA", lambda r, a: a.kv_transfer_rdma),
    Metric("kv_transfer_over_network", "bool", "the KV leaves the NVLink domain", lambda r, a: a.kv_transfer_path == "network"),
    Metric("prefill_ms", "ms", "prefill time of the p50 prompt on one prefill replica", lambda r, a: a.prefill_ms),
    Metric("decode_step_ms", "ms", "decode step time at the sized operating point", lambda r, a: a.decode_step_ms),
    Metric("goodput_per_gpu_colocated", "req/s/GPU", "best colocated goodput per cluster GPU", lambda r, a: a.colocated.goodput_per_gpu),
    Metric("goodput_per_gpu_disaggregated", "req/s/GPU", "best disaggregated goodput per cluster GPU", lambda r, a: a.disaggregated.goodput_per_gpu),
    Metric("gain", "ratio", "disaggregated over colocated goodput; unset unless both modes meet the SLOs", lambda r, a: a.gain),
    Metric("colocated_feasible", "bool", "some colocated configuration meets both SLOs", lambda r, a: a.colocated.feasible),
    Metric("disaggregated_feasible", "bool", "some P/D split meets both SLOs", lambda r, a: a.disaggregated.feasible),
    Metric("colocated_fits_cluster", "bool", "the colocated layout meets both SLOs at the workload's rate on the cluster's GPUs", lambda r, a: a.colocated.fits_cluster),
    Metric("disaggregated_fits_cluster", "bool", "the split meets both SLOs at the workload's rate on the cluster's GPUs", lambda r, a: a.disaggregated.fits_cluster),
    Metric("conditional_fits_cluster", "bool", "the conditional layout (llm-d's plan) carries the workload's rate within both SLOs on the cluster's GPUs", lambda r, a: conditional_fits_cluster(r, a)),
    Metric("gpus_saved_by_split", "GPUs", "GPUs the always-disaggregated sizing saves over the colocated one at the workload's rate; unset unless both fit the cluster", lambda r, a: _gpus_saved_by_split(a)),
    Metric("crossover_prompt_tokens", "tokens", "prompt length where disaggregation starts to win", lambda r, a: a.crossover_prompt_tokens),
    Metric("layout", "colocated|disaggregated|conditional", "the layout with the most goodput per GPU (conditional: long prompts to a prefill pool)", lambda r, a: a.conditional.layout if a.conditional else "colocated"),
    Metric("goodput_per_gpu_conditional", "req/s/GPU", "best conditional-disaggregation goodput per cluster GPU (never below either mode)", lambda r, a: a.conditional.goodput_per_gpu if a.conditional else None),
    Metric("conditional_share_to_prefill", "share", "share of requests the chosen threshold sends to the prefill pool", lambda r, a: a.conditional.share_to_prefill if a.conditional else None),
    Metric("conditional_cold_local_share", "share", "share of all requests the conditional layout prefills locally with nothing cached (eff_isl/prompt = 1): Dynamo's router, whose ratio check is at most 1.0, sends them to the prefill pool", lambda r, a: cold_local_share(r.workload, a.conditional)),
    Metric("conditional_gain_over_always", "ratio", "conditional over always-disaggregated goodput; unset unless both serve", lambda r, a: a.conditional.gain_over_disaggregated if a.conditional else None),
    Metric("conditional_gain_over_colocated", "ratio", "conditional over colocated goodput; unset unless both serve", lambda r, a: a.conditional.gain_over_colocated if a.conditional else None),
    Metric("prefill_gpus", "GPUs", "sized prefill pool", lambda r, a: a.disaggregated.prefill_gpus),
    Metric("decode_gpus", "GPUs", "sized decode pool", lambda r, a: a.disaggregated.decode_gpus),
    Metric("colocated_gpus", "GPUs", "sized colocated pool", lambda r, a: a.colocated.gpus),
    Metric("colocated_ep", "GPUs", "expert-parallel size of the colocated layout (1: TP only)", lambda r, a: a.colocated.ep),
    Metric("prefill_ep", "GPUs", "expert-parallel size of the prefill layout (1: TP only)", lambda r, a: a.disaggregated.prefill_ep),
    Metric("decode_ep", "GPUs", "expert-parallel size of the decode layout (1: TP only)", lambda r, a: a.disaggregated.decode_ep),
    Metric("interactivity_band_low", "tokens/s/user", "lowest tokens/s per user (1000 / TPOT ms) where the split serves at least min_gain times the colocated goodput per GPU (coarse TPOT sweep); unset when it wins nowhere", lambda r, a: a.interactivity_band.low_tokens_per_s_per_user if a.interactivity_band else None),
    Metric("interactivity_band_high", "tokens/s/user", "highest tokens/s per user where the split serves at least min_gain times colocation; unset when it wins nowhere", lambda r, a: a.interactivity_band.high_tokens_per_s_per_user if a.interactivity_band else None),
    Metric("interactivity_band_found", "bool", "the split wins by min_gain at some tokens/s per user of the coarse TPOT sweep (10 to 400 and the target)", lambda r, a: a.interactivity_band is not None),
    Metric("target_in_interactivity_band", "bool", "the workload's own 1000 / TPOT target lies inside the band where the split wins by min_gain", lambda r, a: bool(a.interactivity_band and a.interactivity_band.target_inside)),
    Metric("split_narrows_ep", "bool", "the decode layout's EP group is narrower than the colocated one", lambda r, a: a.disaggregated.decode_ep < a.colocated.ep),
)  # fmt: skip


def conditional_fits_cluster(r: Resolved, a: Analysis) -> bool:
    """The conditional pools, sized for the rate, fit the cluster and carry the rate.

    Dynamo runs the always-split pools where its router cannot keep cache-cold prompts local
    (DSG018), so which orchestrator's plan carries the rate can differ (rule ORC010)."""
    from disagg_decider.plan import conditional_carries_rate

    w = r.workload
    k = a.conditional
    return k is not None and conditional_carries_rate(
        k, w.cluster.gpus, w.traffic.requests_per_second
    )


def _gpus_saved_by_split(a: Analysis) -> int | None:
    """Colocated minus always-disaggregated GPUs for the workload's rate. Goodput per GPU
    compares the modes on the whole cluster; at a rate well below it, what a team buys is
    the GPUs each mode needs for that rate, and a split that needs as many saves nothing."""
    colo, split = a.colocated, a.disaggregated
    if not (colo.fits_cluster and split.fits_cluster):
        return None
    return int(colo.gpus_needed_for_rate) - int(split.gpus_needed_for_rate)


BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


def metric_values(r: Resolved, a: Analysis, names: Sequence[str] | None = None) -> dict[str, Any]:
    """Every metric, or only `names`: a rulebook reads about half of them, once per workload."""
    return {name: get(r, a) for name, get in _getters(None if names is None else tuple(names))}


@lru_cache(maxsize=64)  # a rulebook's names each (a server may load many)
def _getters(names: tuple[str, ...] | None) -> tuple[tuple[str, Callable], ...]:
    """(name, getter) of every metric or of `names`, looked up once per rulebook's names
    (`engine.metrics_read`: one tuple per rulebook), not once per workload."""
    chosen = METRICS if names is None else [BY_NAME[n] for n in names]
    return tuple((m.name, m.get) for m in chosen)
