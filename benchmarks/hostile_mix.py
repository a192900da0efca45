"""Workloads the seeded mix does not reach: wide prompt tails, and MoE models without NVLink.

`workload_mix.py` varies the shipped examples with p99/p50 of 1-3x on mostly NVLink GPUs.
Issue 24 found the verdict's colocated sizing short where prompts spread wider (p99/p50 of
3-8x: a p99 prompt's chunks block the queue behind it for many iterations) and where a
mixture-of-experts model runs expert parallelism on GPUs without NVLink (every all-to-all
leaves the GPU). This draws both, independently of the examples:

- `wide`: a dense or MoE model on an NVLink GPU, prompt p50 256-8K with p99/p50 log-uniform
  in 1-8;
- `pcie-moe`: a MoE model on L40S (the catalog's only GPU without a scale-up link; MI300X has
  Infinity Fabric), prompt p99/p50 in 1-8 too, over Ethernet or InfiniBand.

Each is offered a rate between 20% and 90% of the most its cluster carries in either mode, so
the verdict sizes pools for a rate it can serve.

    from hostile_mix import hostile_mix
    workloads = hostile_mix(80, seed=24)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "skill") not in sys.path:
    sys.path.insert(0, str(ROOT / "skill"))

from disagg_decider.catalog import get_model  # noqa: E402
from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.workload import Workload  # noqa: E402

# (model, weights dtype, NVLink GPUs it is served on)
WIDE = (
    ("llama-3.1-8b", "bf16", ("h100", "a100-80g", "h200")),
    ("llama-3.3-70b", "fp8", ("h100", "h200", "b200")),
    ("qwen3-32b", "fp8", ("h100", "h200")),
    ("mixtral-8x7b", "bf16", ("h100", "h200")),
    ("gpt-oss-120b", "fp8", ("h100", "h200", "b200")),
    ("qwen3-30b-a3b", "bf16", ("h100", "h200")),
    ("deepseek-v3", "fp8", ("h200", "b200")),
    ("llama-3.3-70b", "bf16", ("mi300x",)),
)
# (model, weights dtype, smallest cluster whose GPUs hold the weights) on L40S, 48 GB each
PCIE_MOE = (
    ("qwen3-30b-a3b", "bf16", 2),
    ("qwen3-30b-a3b", "fp8", 1),
    ("mixtral-8x7b", "fp8", 2),
    ("gpt-oss-120b", "fp8", 2),
    ("qwen3-235b-a22b", "fp8", 8),
)
PCIE_NETWORKS = ("roce-100", "roce-200", "tcp-25", "tcp-100", "ib-ndr-400")
RATE_SHARE = (0.2, 0.9)  # of the cluster's most, either mode
REDRAWS = 8


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _lengths(rng: np.random.Generator, model: str) -> dict:
    """Prompt p50 256-8K with p99/p50 1-8, output p50 64-1K with p99/p50 1-3, all inside the
    model's context (the simulator would clip them)."""
    context = get_model(model).max_context_tokens
    output = round(_log_uniform(rng, 64, 1024))
    out_spread = float(rng.uniform(1.0, 3.0))
    prompt = round(_log_uniform(rng, 256, 8192))
    spread = _log_uniform(rng, 1.0, 8.0)
    prompt = max(16, min(prompt, int((context - 2 * output * out_spread) / spread)))
    return {
        "prompt_tokens": {"p50": prompt, "p99": max(round(prompt * spread), prompt)},
        "output_tokens": {"p50": output, "p99": max(round(output * out_spread), output)},
        "requests_per_second": 1.0,
        "prefix_cache_hit_rate": float(rng.choice([0.0, 0.0, 0.3])),
    }


def _slo(rng: np.random.Generator) -> dict:
    return {
        "ttft_ms": float(round(_log_uniform(rng, 500, 8000))),
        "tpot_ms": float(round(rng.uniform(20, 100))),
    }


def _draw(rng: np.random.Generator, k: int) -> dict:
    """One workload's fields at 1 req/s: even k wide tails on NVLink, odd k MoE on L40S."""
    if k % 2 == 0:
        model, dtype, gpus = WIDE[int(rng.integers(len(WIDE)))]
        gpu = gpus[int(rng.integers(len(gpus)))]
        big = model == "deepseek-v3"
        cluster = int(rng.choice([16, 24, 32] if big else [4, 8, 16, 32]))
        network, kind = "ib-ndr-400", "wide"
    else:
        model, dtype, least = PCIE_MOE[int(rng.integers(len(PCIE_MOE)))]
        gpu = "l40s"
        cluster = int(rng.choice([c for c in (2, 4, 8, 16, 32) if c >= least]))
        network, kind = PCIE_NETWORKS[int(rng.integers(len(PCIE_NETWORKS)))], "pcie-moe"
    return {
        "name": f"h{k:02d}-{kind}-{model}-{dtype}-{gpu}x{cluster}",
        "model": model,
        "weights_dtype": dtype,
        "kv_cache_dtype": "fp8" if dtype == "fp8" else dtype,
        "engine": "vllm",
        "traffic": _lengths(rng, model),
        "slo": _slo(rng),
        "cluster": {"gpu": gpu, "gpus": cluster, "gpus_per_node": 8, "network": network},
        "ops": {"maturity": "high"},
    }


def _at_rate(data: dict, rate_per_s: float) -> Workload:
    data["traffic"]["requests_per_second"] = rate_per_s
    return Workload.model_validate(data)


def hostile_mix(n: int, seed: int = 24) -> list[Workload]:
    """`n` workloads, the same for the same seed; a draw neither mode can serve on its cluster
    draws its SLOs again (a few times), and is dropped if it still cannot.

    Each workload has its own stream, and draws its shape and its rate's share first: a change
    to the calculator moves a workload's rate (a share of what it says the cluster carries),
    never which workloads are drawn.
    """
    out = []
    for k in range(n):
        rng = np.random.default_rng([seed, k])
        data = _draw(rng, k)
        share = float(rng.uniform(*RATE_SHARE))
        for _ in range(REDRAWS):
            v = decide(_at_rate(data, 1.0))
            most = max(v.colocated.max_rate_per_s, v.disaggregated.max_rate_per_s)
            if most > 0:
                out.append(_at_rate(data, round(most * share, 4)))
                break
            data["slo"] = _slo(rng)
    return out
