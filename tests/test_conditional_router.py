"""The conditional layout's router policies in the simulator, as Dynamo defines them
(ai-dynamo/dynamo docs/components/router/router-disaggregated-serving.md, summarised in
shared/reference/dynamo_llmd.md "Generation 2"): `isl_bounding` prefills locally ("bypass")
iff the uncached prompt is at most T; `prefill_load` iff the chosen prefill worker is busy;
`isl_or_load` iff either."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from disagg_decider.decide import decide
from disagg_decider.sim import conditional as sim_conditional
from disagg_decider.sim import run
from disagg_decider.sim.goodput import replay_at
from disagg_decider.workload import resolve
from tests.test_conditional import bimodal


@pytest.fixture(scope="module")
def setup():
    w = bimodal()
    v = decide(w)
    r = resolve(w)
    base = run.synthetic_requests(r, 2000, seed=1)
    return r, v, base


def _run(r, cfg, requests):
    p_engine, d_engine = run.engine(r, cfg.prefill_tp), run.engine(r, cfg.decode_tp)
    return sim_conditional.simulate(p_engine, d_engine, requests, cfg)


def test_at_low_load_isl_or_load_routes_as_isl_bounding_and_prefill_load_sends_all(setup):
    r, v, base = setup
    requests = replay_at(base, 2.0)  # the prefill pool is never backed up
    out = {
        p: _run(r, sim_conditional.config_of(r, v, p), requests) for p in sim_conditional.POLICIES
    }
    long_share = float(np.mean(requests.uncached > v.conditional.threshold_tokens))
    assert out["isl_bounding"].share_to_prefill == pytest.approx(long_share)
    assert out["isl_or_load"].share_to_prefill == pytest.approx(long_share)
    np.testing.assert_array_equal(
        out["isl_or_load"].first_token_ms, out["isl_bounding"].first_token_ms
    )
    # prefill_load ignores the length: an idle prefill pool takes every prompt, chat included
    assert out["prefill_load"].share_to_prefill == 1.0


def test_under_prefill_backlog_isl_or_load_keeps_long_prompts_local(setup):
    r, v, base = setup
    requests = replay_at(base, 1.5 * v.conditional.max_rate_per_s)  # the prefill pool backs up
    bounding = _run(r, sim_conditional.config_of(r, v, "isl_bounding"), requests)
    cfg = sim_conditional.config_of(r, v, "isl_or_load")
    or_load = _run(r, cfg, requests)
    # only long prompts can change side, and some do: they bypass a busy prefill worker
    assert or_load.share_to_prefill < bounding.share_to_prefill - 0.02
    assert not np.array_equal(or_load.first_token_ms, bounding.first_token_ms)
    # the load check is what differs: with a prefill worker never busy the two agree
    never_busy = dataclasses.replace(cfg, prefill_busy_tokens=math.inf)
    same = _run(r, never_busy, requests)
    np.testing.assert_array_equal(same.first_token_ms, bounding.first_token_ms)
    assert same.share_to_prefill == bounding.share_to_prefill


def test_threshold_override_and_unknown_policy(setup):
    r, v, base = setup
    requests = replay_at(base, 2.0)
    cfg = sim_conditional.config_of(r, v, threshold_tokens=0)
    assert _run(r, cfg, requests).share_to_prefill == 1.0  # T = 0: always disaggregated
    with pytest.raises(ValueError, match="isl_or_load"):
        sim_conditional.config_of(r, v, "fastest")


def test_dynamo_ratio_check_keeps_cache_cold_prompts_off_the_local_path(setup):
    """Dynamo's isl_bounding also needs uncached / prompt < eff_isl_ratio_threshold (at most
    1.0): a prompt with no cached prefix never bypasses on length (its own unit test
    `small_eff_isl_but_ratio_at_or_above_threshold_does_not_bypass`). On this mix (no prefix
    hits) the conditional layout then routes as always-disaggregated."""
    r, v, base = setup
    requests = replay_at(base, 2.0)
    assert not requests.cached.any()
    cfg = sim_conditional.config_of(r, v, eff_isl_ratio_threshold=1.0)
    assert _run(r, cfg, requests).share_to_prefill == 1.0
    # with half of every prompt cached, the ratio passes and the length decides again
    half = dataclasses.replace(requests, cached=requests.prompt // 2)
    cfg = sim_conditional.config_of(r, v, eff_isl_ratio_threshold=0.7)
    plain = sim_conditional.config_of(r, v)
    with_ratio, without = _run(r, cfg, half), _run(r, plain, half)
    assert with_ratio.share_to_prefill == without.share_to_prefill < 0.5
