"""Colocated pools sized for wide prompt tails and MoE models on PCIe GPUs (issue 24).

`benchmarks/rate_sizing_vs_sim.py --hostile 80` draws workloads the seeded mix does not reach;
before these fixes some verdicts' colocated plans met their targets for as few as 83.8% of
requests in the simulator, all on the TPOT target. What the calculator missed:

- a decoding request is itself in the batch it decodes with: it sees itself and the others,
  B + 1 on average, not B (a MoE step at batch 1-4 grows by half with each sequence: every
  new one wakes other experts);
- the prompts queued behind its own are chunked right after its first token, inside its
  decode (`chunk_runs.backlog_share`);
- where a short output meets a handful of long prompts, the count is Poisson and skewed
  (`chunk_runs.share_spread_p99`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas import chunk_runs
from disagg_decider.decide import decide
from disagg_decider.sim import metrics, run
from disagg_decider.workload import Workload, resolve, with_rate
from tests.conftest import traffic_workload

REQUESTS = 3000


def _workload(model: str, gpu: str, gpus: int, prompt, output, rate, slo, cached) -> Workload:
    data = traffic_workload(
        model,
        gpu,
        gpus,
        prompt,
        output,
        rate,
        slo,
        cached,
        "roce-200",
        weights_dtype="fp8",
        kv_cache_dtype="fp8",
        engine="vllm",
        ops={"maturity": "high"},
    )
    return Workload.model_validate(data)


def _colocated_share(w: Workload, seed: int = 1) -> float:
    """Steady-state share of requests within both targets on the verdict's colocated pools."""
    r, v = resolve(w), decide(w)
    requests = run.synthetic_requests(r, REQUESTS, seed=seed)
    out = run.simulate_mode(run.setup(r, v), "colocated", requests)
    return metrics.attainment(out, requests, w.slo.ttft_ms, w.slo.tpot_ms, steady=True)[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_deepseek_v3_with_a_7x_prompt_tail_keeps_its_plan_within_targets(seed):
    """DeepSeek-V3 on 24 H200, 548-token prompts with p99 7x, TPOT 23 ms: one TP8 replica was
    priced at 22.3 ms p99 TPOT and met both targets for 82-84% of requests (a 26.6 ms p99).
    With the fitted step physics (main after issue 24's first try) its colocated pools carry
    10.8 req/s, short of the rate: the verdict splits. Either colocation no longer claims the
    rate, or its plan meets 99%."""
    w = _workload("deepseek-v3", "h200", 24, (548, 3845), (88, 194), 11.2225, (700.0, 23.0), 0.3)
    v = decide(w)
    assert v.decision in ("colocate", "dynamo", "llm-d")
    assert not v.colocated.fits_cluster or _colocated_share(w, seed) >= 0.99
    # At 95% of what colocation says it carries, its plan keeps 99% within both targets.
    at = with_rate(w, round(0.95 * v.colocated.max_rate_per_s, 4))
    assert decide(at).colocated.fits_cluster
    assert _colocated_share(at, seed) >= 0.99


def test_a_moe_model_on_pcie_gpus_at_light_load_is_not_sized_past_what_it_carries():
    """Qwen3-235B-A22B on 8 L40S (TP8 over PCIe), one replica at 1.79 req/s with a mean
    decode batch near 1: its step grows by half from batch 1 to 3. Priced at 22.6 ms p99
    TPOT against a 30 ms target, simulated at 37 ms (93.9% within both targets). Either the
    calculator no longer says it carries that rate, or its plan meets 97%."""
    w = _workload("qwen3-235b-a22b", "l40s", 8, (520, 593), (69, 159), 1.7891, (1048.0, 30.0), 0.0)
    v = decide(w)
    assert not v.colocated.fits_cluster or _colocated_share(w) >= 0.97
    if v.colocated.max_rate_per_s <= 0:
        return  # colocation claims no rate at all on these GPUs: nothing it sizes can miss
    # At 95% of what it now says the cluster carries, the simulator agrees.
    at = with_rate(w, round(0.95 * v.colocated.max_rate_per_s, 4))
    assert decide(at).colocated.fits_cluster
    assert _colocated_share(at) >= 0.97


def _poisson_p99(mean: float) -> int:
    """The smallest k with P(X <= k) >= 0.99, X ~ Poisson(mean)."""
    k, term = 0, math.exp(-mean)
    total = term
    while total < 0.99:
        k += 1
        term *= mean / k
        total += term
    return k


@pytest.mark.parametrize("runs", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_the_share_of_chunk_steps_reads_a_poisson_count_of_runs_at_its_p99(runs):
    """A window of `draws` runs' worth of iterations meets a Poisson number of runs (mean
    draws x carrying): its p99 share must reach the Poisson p99 (within a run's share) where
    the normal reading alone falls short of it at a few runs."""
    draws = 100.0
    carrying = runs / draws
    p99 = carrying + chunk_runs.share_spread_p99(np.array(carrying), np.array(draws))
    exact = _poisson_p99(runs) / draws
    assert exact - 0.5 / draws <= float(p99) <= exact + 1.0 / draws
    if runs <= 2.0:
        normal = carrying + queueing.Z99 * math.sqrt(carrying * (1 - carrying) / draws)
        assert normal < exact - 0.5 / draws


def test_the_backlog_behind_a_prompt_is_what_arrived_during_its_sojourn():
    """One replica, prompts of 4 iterations each at 100 ms service, 2 per second: an M/G/1
    queue at 20% load. The prompts queued behind a request's own are the arrivals during its
    wait and service, each 4 iterations, spread over a 100-iteration window."""
    q = type("Q", (), {})()
    q.rate_per_ms, q.pool_rate = np.array(2e-3), np.array(2e-3)
    q.mean_s, q.scv, q.per_room = np.array(100.0), np.array(0.0), np.array(4.0)
    share = chunk_runs.backlog_share(q, np.array(1.0), np.array(100.0))
    wait = float(queueing.wait_mean_ms(q.pool_rate, 1.0, q.mean_s, q.scv))
    assert wait > 0
    assert float(share) == pytest.approx(2e-3 * (wait + 100.0) * 4.0 / 100.0)
