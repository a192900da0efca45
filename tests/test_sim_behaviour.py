"""What the simulator must get right beyond low load: seeds, queueing, bursts, memory, the link,
prefix caching, and bookkeeping every request passes through."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from disagg_decider.calc.physics.kvpath import TransferPath
from disagg_decider.decide import decide
from disagg_decider.sim import colocated, disaggregated, metrics, run
from disagg_decider.sim.goodput import replay_at
from disagg_decider.workload import load_workload, resolve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chat():
    w = load_workload(ROOT / "examples" / "chat-short-colocate.yaml")
    r = resolve(w)
    return w, r, run.setup(r, decide(w))


def _both(s, requests):
    return {m: run.simulate_mode(s, m, requests) for m in ("colocated", "disaggregated")}


def test_same_seed_same_results_different_seed_differs(chat) -> None:
    _, r, s = chat
    a = _both(s, run.synthetic_requests(r, 2000, seed=7))
    b = _both(s, run.synthetic_requests(r, 2000, seed=7))
    c = _both(s, run.synthetic_requests(r, 2000, seed=8))
    for mode in a:
        assert np.array_equal(a[mode].first_token_ms, b[mode].first_token_ms)
        assert np.array_equal(a[mode].done_ms, b[mode].done_ms)
        assert not np.array_equal(a[mode].done_ms, c[mode].done_ms)


@pytest.mark.parametrize("mode", ["colocated", "disaggregated"])
def test_every_request_finishes_in_order_of_its_events(chat, mode) -> None:
    _, r, s = chat
    req = run.synthetic_requests(r, 3000, seed=1)
    o = run.simulate_mode(s, mode, req)
    assert (o.first_token_ms >= req.arrival_ms).all()
    assert (o.done_ms >= o.first_token_ms).all()
    assert (o.done_ms > 0).all()
    single = req.output == 1
    assert np.allclose(o.done_ms[single], o.first_token_ms[single])


@pytest.mark.parametrize("mode", ["colocated", "disaggregated"])
def test_queueing_grows_with_load(chat, mode) -> None:
    _, r, s = chat
    base = run.synthetic_requests(r, 2000, seed=2, rate_per_s=1.0)
    p99 = []
    for rate in (10.0, 40.0, 80.0):
        req = replay_at(base, rate)
        m = metrics.summarize(run.simulate_mode(s, mode, req), req, 1e9, 1e9, 1.0)
        p99.append(m.ttft_ms.p99)
    assert p99[0] < p99[1] < p99[2]


def test_bursty_arrivals_hurt_tail_latency(chat) -> None:
    _, r, s = chat
    out = []
    for cv in (1.0, 4.0):
        req = run.synthetic_requests(r, 3000, seed=3, cv=cv)
        m = metrics.summarize(run.simulate_mode(s, "disaggregated", req), req, 1e9, 1e9, 1.0)
        out.append(m.ttft_ms.p99)
    assert out[1] > 1.5 * out[0]


def test_kv_memory_limits_the_batch(chat) -> None:
    """A replica with room for few sequences queues the rest: TTFT rises, TPOT falls."""
    _, r, s = chat
    req = run.synthetic_requests(r, 2000, seed=4, rate_per_s=30.0)
    wide = colocated.simulate(s.colocated_engine, req, s.colocated)
    few = dataclasses.replace(s.colocated, max_batch=8)
    narrow = colocated.simulate(s.colocated_engine, req, few)
    m_wide = metrics.summarize(wide, req, 1e9, 1e9, 1.0)
    m_narrow = metrics.summarize(narrow, req, 1e9, 1e9, 1.0)
    assert m_narrow.ttft_ms.p90 > 2 * m_wide.ttft_ms.p90
    assert m_narrow.tpot_ms.p50 < m_wide.tpot_ms.p50


def test_slow_shared_link_delays_first_tokens() -> None:
    """On 10 Gb/s TCP, transfers queue behind each other on the decode replica's NIC."""
    w = load_workload(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml")
    r = resolve(w)
    s = run.setup(r, decide(w))
    req = run.synthetic_requests(r, 600, seed=5)
    fast = disaggregated.simulate(s.prefill_engine, s.decode_engine, req, s.disaggregated)
    slow_path = TransferPath("network", 10.0, 0.4, 0.08, False)
    slow_cfg = dataclasses.replace(s.disaggregated, path=slow_path)
    slow = disaggregated.simulate(s.prefill_engine, s.decode_engine, req, slow_cfg)
    t_fast = metrics.ttft_ms(fast, req)
    t_slow = metrics.ttft_ms(slow, req)
    # A 7k-token FP8 KV of Llama-70B is ~1.2 GB: ~2.4 s alone at 0.5 GB/s.
    assert np.median(t_slow) > np.median(t_fast) + 2000
    # With 3 prefill replicas feeding one decode replica, contention shows in the tail.
    alone_ms = 1.2e9 / 0.5e9 * 1e3
    assert np.percentile(t_slow, 99) > np.median(t_fast) + 1.3 * alone_ms


def test_prefix_cache_hits_shorten_prefill() -> None:
    w = load_workload(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml")
    ttfts = []
    for hit in (0.0, 0.8):
        traffic = w.traffic.model_copy(update={"prefix_cache_hit_rate": hit})
        wh = w.model_copy(update={"traffic": traffic})
        r = resolve(wh)
        s = run.setup(r, decide(w))  # same pools for both
        req = run.synthetic_requests(r, 500, seed=6)
        both = _both(s, req)
        ttfts.append([np.median(metrics.ttft_ms(both[m], req)) for m in both])
    assert ttfts[1][0] < 0.5 * ttfts[0][0]
    assert ttfts[1][1] < 0.5 * ttfts[0][1]


def test_pool_size_options_resize_with_verdict_tp(chat) -> None:
    w, r, _ = chat
    v = decide(w)
    z = v.sizing
    s = run.setup(
        r,
        v,
        colocated_gpus=4 * z.colocated_tp,
        prefill_gpus=2 * z.prefill_tp,
        decode_gpus=3 * z.decode_tp,
    )
    assert s.colocated.replicas == 4 and s.disaggregated.prefill_replicas == 2
    assert s.disaggregated.decode_replicas == 3
    from disagg_decider.errors import UserError

    w70 = load_workload(ROOT / "examples" / "rag-8k-h200-rdma-dynamo.yaml")
    v70 = decide(w70)
    # On the fitted physics the 70B RAG plan prefills on TP1 replicas and decodes on TP4 (the
    # roofline prefilled on TP2): a size off the decode pool's TP is the one that can be wrong.
    tp = v70.sizing.decode_tp
    assert tp > 1
    with pytest.raises(UserError, match=r"--decode-gpus .*multiple of the verdict's TP degree"):
        run.setup(resolve(w70), v70, decode_gpus=tp + 1)
