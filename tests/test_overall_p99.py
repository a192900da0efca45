"""The conditional layout priced on 99% of ALL requests within the TTFT target (issue 14e).

The SLO, and the simulator's goodput, count every request: the layout meets the TTFT target
when s P(pooled TTFT > target) + (1 - s) P(local TTFT > target) <= 1%, not when each part's
own p99 does (`calc/modes/overall_ttft.py`). On the issue's bimodal workload the decode workers'
short prompts have room to spare, so the pooled long prompts may miss more than 1% of the time.
"""

from __future__ import annotations

import numpy as np
import pytest

from disagg_decider.calc.modes import conditional, conditional_rows, overall_ttft
from disagg_decider.calc.queues import queueing
from disagg_decider.classes import components
from disagg_decider.decide import decide
from disagg_decider.workload import resolve
from tests.test_conditional import bimodal

TTFT_MS = bimodal().slo.ttft_ms  # the mix's own target (1.2 s, tests/bimodal_support.py)


@pytest.fixture(scope="module")
def at_capacity():
    """The bimodal workload asked for more than the cluster serves: every figure of the
    conditional layout is then at its priced goodput."""
    w = bimodal(requests_per_second=1000)
    return w, resolve(w), decide(w)


def _chosen_rows(r, k):
    """The verdict's conditional layout as `overall_ttft` reads it (one row)."""
    cand = conditional.Candidate(
        threshold_tokens=float(k.threshold_tokens),
        long_share=k.share_to_prefill,
        goodput_rate_per_s=k.max_rate_per_s,
        prefill_tp=int(k.prefill_tp),
        decode_tp=k.decode_tp,
        prefill_replicas=k.prefill_replicas,
        decode_replicas=k.decode_replicas,
        chunk_tokens=int(k.chunk_tokens),
        ttft_p99_ms=None,
        tpot_p99_ms=None,
    )
    rows = [(r, cand)]
    return conditional_rows.Rows.of(r, rows).layouts(rows)


def test_overall_miss_within_one_percent_while_the_pooled_part_alone_is_not(at_capacity):
    _, r, v = at_capacity
    k = v.conditional
    assert k.layout == "conditional"
    # The layout's p99 over all requests meets the target at its goodput ...
    assert k.ttft_p99_ms <= TTFT_MS * 1.001
    # ... while the long prompts' own p99 does not: the part-by-part pricing (before 14e)
    # would have stopped at a lower rate. The local prompts' p99 is far inside the target.
    assert k.pooled_ttft_p99_ms > TTFT_MS * 1.1
    assert k.local_ttft_p99_ms < TTFT_MS * 0.5
    layouts = _chosen_rows(r, k)
    rate = np.array([k.max_rate_per_s])
    target = np.array([TTFT_MS])
    pooled = float(layouts.pooled(rate).miss(target)[0])
    overall = float(layouts.miss_at(rate, target)[0])
    assert overall <= queueing.P99_TAIL * (1 + 1e-6)
    assert pooled > 2 * queueing.P99_TAIL  # the pool alone misses more than 2%
    # The overall miss binds at the goodput: 2% more load breaks it (nothing else limits).
    assert float(layouts.miss_at(rate * 1.02, target)[0]) > queueing.P99_TAIL
    assert bool(overall_ttft.within(layouts, rate)[0])


def test_overall_p99_lies_between_the_parts_and_has_one_percent_miss(at_capacity):
    _, r, v = at_capacity
    k = v.conditional
    lo, hi = sorted([k.local_ttft_p99_ms, k.pooled_ttft_p99_ms])
    assert lo <= k.ttft_p99_ms <= hi
    layouts = _chosen_rows(r, k)
    rate = np.array([k.max_rate_per_s])
    # The reported p99 is the time whose share of all requests beyond it is 1%: a little
    # earlier more than 1% are later (the bisection's answer is the bracket's upper end).
    below = layouts.miss_at(rate, np.array([k.ttft_p99_ms * 0.99]))[0]
    at = layouts.miss_at(rate, np.array([k.ttft_p99_ms]))[0]
    assert at <= queueing.P99_TAIL * (1 + 1e-6) < below


def test_the_overall_pricing_serves_more_than_part_by_part(at_capacity):
    """The same layout priced part by part (each part's p99 within the target) serves less:
    the lift starts from that rate and only goes up."""
    w, r, v = at_capacity
    k = v.conditional
    layouts = _chosen_rows(r, k)
    rate = np.array([k.max_rate_per_s])
    assert float(layouts.pooled(rate).miss(np.array([TTFT_MS]))[0]) > queueing.P99_TAIL
    # The curve's point at the chosen threshold is the overall-priced goodput.
    point = next(p for p in k.curve if p.threshold_tokens == k.threshold_tokens)
    assert point.goodput_per_gpu * w.cluster.gpus == pytest.approx(k.max_rate_per_s)
    split = conditional.split_at(components(w), k.threshold_tokens)
    assert split.long_share == pytest.approx(k.share_to_prefill)


def test_the_simulated_layout_meets_99_percent_near_the_priced_rate(at_capacity):
    """Three seeded runs (20,000 requests each, steady state pooled) of the verdict's own
    conditional pools: 99% of all requests within both targets while the long prompts alone
    miss the TTFT target more than 1% of the time. On the roofline that held at the priced
    goodput; on the fitted physics the calculator prices this mix about 8% high (the
    simulator meets 96.5% at the priced rate, 99.2% at 92% of it, where the long prompts
    still miss 1.6%), so both are checked: the layout's overall pricing, and the size of
    the calculator's optimism."""
    from disagg_decider.sim import conditional as sim_conditional
    from disagg_decider.sim import metrics, run
    from disagg_decider.sim.goodput import replay_at

    w, r, v = at_capacity
    k = v.conditional
    cfg = sim_conditional.config_of(r, v)
    engines = run.engine(r, cfg.prefill_tp), run.engine(r, cfg.decode_tp)

    def simulated(rate: float) -> tuple[float, float]:
        met, long_miss = [], []
        for seed in (1, 2, 3):
            requests = replay_at(run.synthetic_requests(r, 20000, seed=seed), rate)
            outcome = sim_conditional.simulate(*engines, requests, cfg)
            ttft, tpot = metrics.ttft_ms(outcome, requests), metrics.tpot_ms(outcome, requests)
            steady = metrics.steady_window(len(ttft))
            pooled = (requests.uncached > cfg.threshold_tokens)[steady]
            ok = (ttft <= w.slo.ttft_ms)[steady] & (tpot <= w.slo.tpot_ms)[steady]
            met.append(ok)
            long_miss.append(~ok[pooled])
        return float(np.concatenate(met).mean()), float(np.concatenate(long_miss).mean())

    near, long_near = simulated(0.92 * k.max_rate_per_s)
    assert near >= 0.99 and long_near > 0.01, (near, long_near)
    at_priced, _ = simulated(k.max_rate_per_s)
    assert at_priced >= 0.96, at_priced
