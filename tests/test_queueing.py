"""The pooled-queue approximation (`calc.queues.queueing`) against the simulator's own prefill pool.

The simulator's least-work router sends each prompt to the replica free soonest, which makes a
pool of c replicas one M/G/c queue; the calculator prices it with Erlang C and an
Allen-Cunneen tail. Service times here are the calculator's prefill times of Llama-3.3-70B on
TP4 H200 over log-normal prompts (p50 4,000, p99 8,000 tokens: E[S] about 400 ms), the case
the issue measured. DistServe's M/D/1 formula is the c = 1 special case.
"""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider.calc.physics.step import Engine
from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas.prefill import prefill_ms
from disagg_decider.catalog import get_gpu, get_model
from disagg_decider.sim.routing import pooled_waits
from disagg_decider.workload import Efficiency

REQUESTS = 200_000  # heavy load needs long runs: waits are correlated over many requests


@pytest.fixture(scope="module")
def service_ms() -> np.ndarray:
    engine = Engine(get_model("llama-3.3-70b"), get_gpu("h200"), "bf16", "bf16", 4, Efficiency())
    rng = np.random.default_rng(7)
    sigma = np.log(2.0) / queueing.Z99
    prompts = np.rint(4000 * np.exp(sigma * rng.standard_normal(REQUESTS)))
    return np.asarray(prefill_ms(engine, prompts), dtype=float)


@pytest.mark.parametrize("servers", [1, 2, 4, 8])
@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7, 0.9])
def test_p99_wait_matches_the_simulated_pool(service_ms, servers, rho):
    mean = float(service_ms.mean())
    scv = float(service_ms.var()) / mean**2
    rate = rho * servers / mean
    rng = np.random.default_rng(servers * 100 + int(rho * 10))
    n = REQUESTS if rho >= 0.9 else REQUESTS // 4
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    waits = pooled_waits(arrivals, service_ms[:n], servers)[n // 10 :]
    simulated = float(np.percentile(waits, 99))
    calculated = float(queueing.wait_p99_ms(rate, servers, mean, scv))
    if simulated < 0.02 * mean:  # fewer than 1% wait at all: both must say (nearly) none
        assert calculated < 0.1 * mean
    else:
        assert calculated == pytest.approx(simulated, rel=0.20)


def test_pooling_beats_independent_replicas(service_ms):
    """c replicas behind a least-work router wait far less than c independent M/G/1 queues
    at rate / c (the issue: c = 8 at rho 0.9, 9,789 ms per-replica vs about 1,200 pooled)."""
    mean = float(service_ms.mean())
    scv = float(service_ms.var()) / mean**2
    pooled = float(queueing.wait_p99_ms(0.9 * 8 / mean, 8, mean, scv))
    alone = float(queueing.wait_p99_ms(0.9 / mean, 1, mean, scv))
    assert pooled < alone / 3


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.95])
def test_single_server_is_distserve_md1(rho):
    """DistServe (section 3.1): avg TTFT = D + R D^2 / (2 (1 - R D)) for an M/D/1 prefill."""
    d = 250.0
    rate = rho / d
    distserve = d + rate * d * d / (2.0 * (1.0 - rate * d))
    ours = d + float(queueing.wait_mean_ms(rate, 1, d, 0.0))
    assert ours == pytest.approx(distserve, rel=1e-9)


def test_erlang_c_known_values():
    # M/M/2 at a = 1: C = a^2 / (2 - a) / (1 + a + a^2 / (2 - a)) = 1/3.
    assert float(queueing.erlang_c(2, 1.0)) == pytest.approx(1 / 3)
    assert float(queueing.erlang_c(1, 0.7)) == pytest.approx(0.7)
    assert float(queueing.erlang_c(4, 4.0)) == 1.0


def test_max_rate_inverts_the_p99_of_the_sum_exactly():
    """At the largest rate the p99 of wait + service is the target, not below it."""
    nodes = 300.0 * np.exp(0.3 * queueing.Z_NODES)
    mean = float((nodes * queueing.Z_WEIGHTS).sum())
    scv = float((nodes**2 * queueing.Z_WEIGHTS).sum()) / mean**2 - 1
    for servers in (1, 3, 8):
        rate = float(queueing.max_rate_per_ms(servers, mean, scv, nodes, 1500.0))
        p99 = float(queueing.p99_of_sum_ms(rate, servers, mean, scv, nodes))
        assert p99 == pytest.approx(1500.0, rel=1e-3)
    # Sum of p99s would be more cautious: the p99 of the sum is below it.
    rate = float(queueing.max_rate_per_ms(1, mean, scv, nodes, 1500.0))
    wait = float(queueing.wait_p99_ms(rate, 1, mean, scv))
    assert wait + float(queueing.node_quantile(nodes, 0.01)) > 1500.0
