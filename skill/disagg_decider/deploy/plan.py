"""What to deploy, read off the Verdict: the pools, their sizes and the checks they must pass.

Every emitter takes a `DeployPlan` and nothing else, so the replica counts, TP degrees, batch
limits and the conditional-disaggregation threshold in every file are the Verdict's numbers.
`plan_checks.check` holds the constraints that make a layout unrunnable (refusals) or risky
(warnings), with the reason and the source, so the CLI and the output README can say why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from disagg_decider import catalog
from disagg_decider.calc.physics.model_costs import weight_bytes
from disagg_decider.deploy.fields import check_k8s_prefix, k8s_name
from disagg_decider.deploy.placement import (
    GPU_PRODUCT_LABEL,
    heterogeneous_errors,
    with_placement,
)
from disagg_decider.deploy.routing import always_split_warning, dynamo_needs_always_split
from disagg_decider.errors import UserError
from disagg_decider.verdict import Verdict
from disagg_decider.workload import HfConfigRef, Workload, resolve

Role = Literal["prefill", "decode", "colocated"]
Engine = Literal["vllm", "sglang", "trtllm"]
Layout = Literal["auto", "disaggregated", "colocated"]

LAYOUTS: tuple[str, ...] = ("auto", "disaggregated", "colocated")
# A prefill-only engine runs no decode steps beside a prompt, so chunking buys nothing: give it
# room for a p99 prompt in one step, in whole 256-token blocks, and never less than this.
MIN_PREFILL_TOKEN_BUDGET = 2048


@dataclass(frozen=True)
class Pool:
    """One set of identical engine replicas."""

    role: Role
    replicas: int
    tp: int  # GPUs per replica (SGLang's --tp): dp attention ranks of tp // dp GPUs
    max_num_seqs: int | None  # None: leave the engine's default
    max_num_batched_tokens: int
    dp: int = 1  # data-parallel attention ranks per replica
    ep: int = 1  # expert-parallel size (1: experts sharded by TP)
    nodes: int = 1  # nodes one replica spans (wide EP over several nodes: > 1)
    node_selector: tuple[str, str] | None = None  # (label key, value): the pool's GPU type

    @property
    def gpus_per_pod(self) -> int:
        """GPUs each pod of a replica holds: the whole replica, or one node's share."""
        return self.tp // self.nodes

    @property
    def dp_local(self) -> int:
        """DP ranks on each node of a replica (vLLM's --data-parallel-size-local)."""
        return self.dp // self.nodes

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp

    @property
    def attention_tp(self) -> int:
        """GPUs one request's attention and KV live on (vLLM's --tensor-parallel-size)."""
        return self.tp // self.dp

    @property
    def layout(self) -> str:
        from disagg_decider.calc.physics.parallel import label

        return label(self.attention_tp, self.dp, self.ep)


@dataclass(frozen=True)
class DeployPlan:
    name: str  # Kubernetes-safe prefix for every object
    target: str
    engine: Engine
    disaggregated: bool
    pools: tuple[Pool, ...]
    # Verdict.conditional_disagg_threshold_tokens when its layout is conditional; 0 (every
    # prompt to the prefill pool) when the plan disaggregates without a threshold.
    threshold_tokens: int
    ttft_ms: float
    tpot_ms: float
    prompt_tokens_p50: int
    output_tokens_p50: int
    requests_per_second: float
    model_path: str
    served_model_name: str
    image: str | None  # None: each target's pinned default
    weights_dtype: str
    kv_dtype: str
    hbm_utilization: float
    model_size_gib: int  # volume size for the weights, with headroom
    cluster_gpus: int
    gpus_per_node: int
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)
    workload: Workload | None = None  # for per-pool GPU counts of a heterogeneous cluster

    def pool(self, role: Role) -> Pool:
        for p in self.pools:
            if p.role == role:
                return p
        raise KeyError(role)

    @property
    def total_gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def layout(self) -> str:
        """The layout the files run, in the verdict's names: `conditional` (a prefill pool for
        prompts above the threshold), `disaggregated` (every prompt to it) or `colocated`."""
        if not self.disaggregated:
            return "colocated"
        return "conditional" if self.threshold_tokens > 0 else "disaggregated"

    @property
    def multinode(self) -> bool:
        """Some replica spans several nodes (llm-d: the chart's LeaderWorkerSet mode)."""
        return any(p.nodes > 1 for p in self.pools)


def make_plan(
    workload: Workload,
    verdict: Verdict,
    target: str,
    *,
    layout: Layout = "auto",
    model_path: str | None = None,
    served_model_name: str | None = None,
    image: str | None = None,
    base_dir: Path | None = None,
    gpu_label_key: str = GPU_PRODUCT_LABEL,
    gpu_products: dict[str, str] | None = None,
) -> DeployPlan:
    """Read the pools off the Verdict; `layout` only chooses which of its two sizings to use."""
    warnings: list[str] = []
    engine = _engine_for(target, workload.engine, warnings)
    disaggregated = verdict.disaggregate if layout == "auto" else layout == "disaggregated"
    if layout == "disaggregated" and not verdict.disaggregate:
        warnings.append(
            "--layout disaggregated overrides the verdict (colocate): the pools below are the "
            "calculator's best disaggregated sizing, which the rulebook did not choose"
        )
    if layout == "colocated" and verdict.disaggregate:
        warnings.append(
            f"--layout colocated overrides the verdict ({verdict.decision}): the pool below is "
            "the calculator's best colocated sizing, which the rulebook did not choose"
        )
    # `auto` deploys the verdict's layout: its conditional pools and threshold when that is
    # the best layout; `--layout disaggregated` the always-disaggregated sizing (threshold 0).
    conditional = disaggregated and layout == "auto" and _is_conditional(verdict)
    if conditional and target == "dynamo" and dynamo_needs_always_split(verdict):
        conditional = False  # deploy/routing.py: Dynamo cannot keep cold prompts local
        warnings.append(always_split_warning(verdict))
    pools = (
        _disaggregated_pools(workload, verdict, conditional)
        if disaggregated
        else (_colocated_pool(verdict),)
    )
    pools = tuple(_engine_limits(p, engine, warnings) for p in pools)
    hetero = heterogeneous_errors(workload, verdict, disaggregated)
    if hetero:
        raise UserError("; ".join(hetero))
    pools = with_placement(pools, workload, gpu_label_key, gpu_products or {})
    path = model_path or _default_model_path(workload)
    weights_dtype, kv_dtype, own = _priced_dtypes(workload, verdict)
    if model_path is None and weights_dtype != "bf16" and not own:
        dtype = weights_dtype
        warnings.append(
            f"weights_dtype is {dtype}: the sizing assumes {dtype} weights, so pass "
            f"--model-path with a {dtype} checkpoint if {path} is not one"
        )
    name = k8s_name(workload.name)
    check_k8s_prefix(name, "the Kubernetes name made from the workload's name")
    return DeployPlan(
        name=name,
        target=target,
        engine=engine,
        disaggregated=disaggregated,
        pools=pools,
        threshold_tokens=verdict.conditional.threshold_tokens if conditional else 0,  # type: ignore[union-attr]
        ttft_ms=workload.slo.ttft_ms,
        tpot_ms=workload.slo.tpot_ms,
        prompt_tokens_p50=round(workload.traffic.prompt_tokens.p50),
        output_tokens_p50=round(workload.traffic.output_tokens.p50),
        requests_per_second=workload.traffic.requests_per_second,
        model_path=path,
        served_model_name=served_model_name or path,
        image=image,
        weights_dtype=weights_dtype,
        kv_dtype=kv_dtype,
        hbm_utilization=workload.efficiency.hbm_utilization,
        model_size_gib=_model_size_gib(workload, base_dir),
        cluster_gpus=workload.cluster.gpus,
        gpus_per_node=workload.cluster.gpus_per_node,
        verdict=verdict,
        warnings=warnings,
        workload=workload,
    )


def _priced_dtypes(workload: Workload, verdict: Verdict) -> tuple[str, str, bool]:
    """(weights, KV, the model's own) formats the verdict priced. The model's own formats
    are its published checkpoint's, which the default model path already holds."""
    d = verdict.dtypes
    if d is None:
        return workload.priced_weights_dtype, workload.kv_dtype, False
    return d.weights, d.kv_cache, d.source != "workload"


def _engine_for(target: str, workload_engine: str, warnings: list[str]) -> Engine:
    if target in ("vllm", "sglang"):
        if workload_engine != target:
            warnings.append(
                f"the verdict was computed for engine {workload_engine} (workload.engine); "
                f"these files run {target}, whose KV transfer may differ"
            )
        return target  # type: ignore[return-value]
    if target == "llm-d" and workload_engine == "trtllm":
        warnings.append(
            "llm-d's model servers run vLLM or SGLang, not TensorRT-LLM: emitting vLLM "
            "(the verdict was computed for trtllm's layer-wise KV transfer)"
        )
        return "vllm"
    return workload_engine  # type: ignore[return-value]


def _is_conditional(v: Verdict) -> bool:
    k = v.conditional
    return (
        k is not None
        and k.layout == "conditional"
        and k.threshold_tokens is not None
        and bool(k.prefill_tp)
        and bool(k.chunk_tokens)
    )


def conditional_decode_max_seqs(w: Workload, chunk_tokens: int) -> int:
    """Sequences a conditional decode worker admits: the engine's cap, at most its chunk (vLLM
    needs max_num_batched_tokens >= max_num_seqs)."""
    return min(w.efficiency.max_decode_batch, chunk_tokens)


def _disaggregated_pools(w: Workload, v: Verdict, conditional: bool) -> tuple[Pool, Pool]:
    k = v.conditional
    if conditional and k is not None and k.prefill_tp and k.chunk_tokens:
        # Decode workers that prefill the prompts under the threshold in chunks, as the
        # calculator sized them (calc/modes/conditional.py).
        return (
            Pool(
                role="prefill",
                replicas=k.prefill_replicas,
                tp=k.prefill_tp,
                max_num_seqs=None,
                max_num_batched_tokens=prefill_token_budget(w.traffic.prompt_tokens.p99),
            ),
            Pool(
                role="decode",
                replicas=k.decode_replicas,
                tp=k.decode_tp,
                max_num_seqs=conditional_decode_max_seqs(w, k.chunk_tokens),
                max_num_batched_tokens=k.chunk_tokens,
            ),
        )
    s = v.sizing
    prefill = Pool(
        role="prefill",
        replicas=s.prefill_replicas,
        tp=s.prefill_tp * s.prefill_dp,
        max_num_seqs=None,
        max_num_batched_tokens=prefill_token_budget(w.traffic.prompt_tokens.p99),
        dp=s.prefill_dp,
        ep=s.prefill_ep,
    )
    # Always disaggregated: the decode pool prefills nothing, one token per running sequence.
    decode = Pool(
        role="decode",
        replicas=s.decode_replicas,
        tp=s.decode_tp * s.decode_dp,
        max_num_seqs=per_rank(s.decode_max_batch, s.decode_dp),
        max_num_batched_tokens=per_rank(s.decode_max_batch, s.decode_dp),
        dp=s.decode_dp,
        ep=s.decode_ep,
    )
    return prefill, decode


def per_rank(replica_batch: int, dp: int) -> int:
    """The engines' sequence cap per attention-DP rank (vLLM --max-num-seqs, SGLang
    --max-running-requests, TensorRT-LLM max_batch_size apply to each rank) for a replica
    sized to hold `replica_batch` sequences over `dp` ranks."""
    if replica_batch < 1:
        return replica_batch
    return max(1, math.ceil(replica_batch / max(dp, 1)))


def _colocated_pool(v: Verdict) -> Pool:
    s = v.sizing
    return Pool(
        role="colocated",
        replicas=s.colocated_replicas,
        tp=s.colocated_tp * s.colocated_dp,
        max_num_seqs=per_rank(s.colocated_max_batch, s.colocated_dp),
        max_num_batched_tokens=s.colocated_chunk_tokens,
        dp=s.colocated_dp,
        ep=s.colocated_ep,
    )


def prefill_token_budget(prompt_tokens_p99: float) -> int:
    return max(MIN_PREFILL_TOKEN_BUDGET, math.ceil(prompt_tokens_p99 / 256) * 256)


def _engine_limits(pool: Pool, engine: Engine, warnings: list[str]) -> Pool:
    """vLLM refuses to start when a step's token budget is below its sequence limit."""
    if engine != "vllm" or pool.max_num_seqs is None:
        return pool
    if pool.max_num_batched_tokens >= pool.max_num_seqs:
        return pool
    warnings.append(
        f"{pool.role}: max_num_batched_tokens raised from {pool.max_num_batched_tokens} to "
        f"{pool.max_num_seqs} because vLLM requires it to be >= max_num_seqs"
    )
    return replace(pool, max_num_batched_tokens=pool.max_num_seqs)


def _default_model_path(w: Workload) -> str:
    if isinstance(w.model, HfConfigRef):
        raise UserError(
            f"workload {w.name!r} names its model by hf_config ({w.model.hf_config}): pass "
            "--model-path with the Hugging Face repo or local path the engines should load"
        )
    repo = catalog.get_model(w.model).hf_repo
    if not repo:
        raise UserError(
            f"model {w.model!r} has no hf_repo in the catalog: pass --model-path with the "
            "Hugging Face repo or local path the engines should load"
        )
    return repo


def _model_size_gib(w: Workload, base_dir: Path | None) -> int:
    """Volume for the checkpoint: its published formats' weights (bf16 unless the model
    ships quantized: gpt-oss MXFP4 experts, DeepSeek FP8) plus a quarter."""
    model = resolve(w, base_dir).model
    return max(1, math.ceil(weight_bytes(model, model.weights_dtype) * 1.25 / 2**30))
