"""Conditional disaggregation (issue 14): mixed traffic, the threshold chosen for goodput.

The bimodal workload of the issue: 70% 400/150-token chat beside 30% 16K/300-token RAG on
16 H200 over 400G RDMA, p99 TTFT 1.2 s (tests/bimodal_support.py says why not 2 s) and TPOT
25 ms (Qwen3-32B FP8 on vLLM). Sending only the RAG prompts to a prefill pool beats both
colocating everything (the long prompts' chunks slow every decode step) and disaggregating
everything (the chat prompts pay a transfer and a prefill pool for work a decode worker does in
one chunk).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from pydantic import ValidationError

from disagg_decider.calc.layouts.threshold_split import partial_moments
from disagg_decider.calc.modes import conditional, conditional_choice
from disagg_decider.classes import Component, components
from disagg_decider.decide import decide
from disagg_decider.workload import Workload, resolve
from tests.bimodal_support import CHAT, RAG, bimodal_data
from tests.conftest import at_max_rate


def bimodal(**traffic) -> Workload:
    return Workload.model_validate(bimodal_data(**traffic))


@pytest.fixture(scope="module")
def bimodal_verdict():
    return decide(bimodal())


def test_bimodal_conditional_beats_both_modes_with_threshold_between_classes(bimodal_verdict):
    v = bimodal_verdict
    k = v.conditional
    assert v.layout == "conditional"
    # Its colocated mode is a little optimistic on this mix (calc/sim 1.07), its always-split
    # mode, priced class by class, close or a little low (`test_bimodal_always_split_agrees_
    # with_the_simulator`). The conditional layout, priced on 99% of all requests within the
    # TTFT target (`calc/modes/overall_ttft.py`, issue 14e) rather than each part's own p99, is
    # within a few % of the simulator (calc/sim 0.98), and so the margins are 5% again
    # (1.18x colocated and 1.13x always-split; 1.08x and 1.03x when priced part by part,
    # which is when they were relaxed to 2%).
    assert k.goodput_per_gpu > 1.05 * v.colocated.goodput_per_gpu
    assert k.goodput_per_gpu > 1.05 * v.disaggregated.goodput_per_gpu
    # Between the chat prompts' p99 and the RAG prompts' p50.
    assert 1200 < v.conditional_disagg_threshold_tokens < 16000
    # It sends about the RAG share: none of the chat class, most of the RAG class (whose
    # shortest prompts may stay local).
    assert 0.25 <= k.share_to_prefill <= 0.31
    assert k.ttft_p99_ms <= 1200 * 1.001 and k.tpot_p99_ms <= 25 * 1.001
    assert "largest threshold within 1%" in k.threshold_reason


def test_the_verdict_explains_crossover_and_threshold_in_one_sentence(bimodal_verdict):
    v = bimodal_verdict
    sentence = [s for s in v.summary.split("Layout: ")[1:]]
    assert len(sentence) == 1
    assert str(v.conditional_disagg_threshold_tokens) in sentence[0]
    assert "crossover" in sentence[0] or "p50 prompt" in sentence[0]


def test_choose_takes_the_largest_threshold_within_one_percent():
    options = [(0.0, 10.0), (500.0, 12.0), (2000.0, 11.95), (8000.0, 11.0), (None, 9.0)]
    assert options[conditional_choice.choose(options)][0] == 2000.0
    # No prefill pool counts as the largest threshold of all.
    assert conditional_choice.choose([(0.0, 10.0), (500.0, 10.0), (None, 9.95)]) == 2
    # Always-disaggregated when nothing else comes within 1%.
    assert conditional_choice.choose([(0.0, 10.0), (500.0, 9.8), (None, 5.0)]) == 0


def test_partial_moments_match_sampling():
    rng = random.Random(7)
    p50, sigma, t = 2000.0, 0.8, 3000.0
    xs = [p50 * math.exp(sigma * rng.gauss(0, 1)) for _ in range(200_000)]
    below = [x for x in xs if x <= t]
    p, m1, m2 = (float(v[0]) for v in partial_moments(p50, sigma, np.array([t])))
    assert p == pytest.approx(len(below) / len(xs), rel=0.01)
    assert m1 == pytest.approx(sum(below) / len(xs), rel=0.01)
    assert m2 == pytest.approx(sum(x * x for x in below) / len(xs), rel=0.02)


def test_classes_split_at_threshold_keeps_the_mix():
    comps = [Component(0.7, 400, 0.47, 0.0, 150, 0.47), Component(0.3, 16000, 0.17, 0.0, 300, 0.47)]
    parts = conditional.split_at(comps, 4000.0)
    assert parts.long_share == pytest.approx(0.3, abs=1e-3)
    # The long part is the RAG class: its mean prompt about 16K.
    assert float(parts.long.prompt_mean) == pytest.approx(16000 * math.exp(0.17**2 / 2), rel=0.01)
    # Local prefill work per arriving request: the chat class's mean, times its share.
    assert float(parts.local.uncached_mean) == pytest.approx(
        0.7 * 400 * math.exp(0.47**2 / 2), rel=0.01
    )


def test_single_class_and_one_class_list_agree():
    one = bimodal(classes=[{**CHAT, "share": 1.0}])
    plain = Workload.model_validate(
        {
            **one.model_dump(exclude={"traffic"}),
            "traffic": {
                "requests_per_second": 20,
                "prompt_tokens": CHAT["prompt_tokens"],
                "output_tokens": CHAT["output_tokens"],
            },
        }
    )
    assert one.traffic.prompt_tokens.p50 == pytest.approx(plain.traffic.prompt_tokens.p50)
    assert one.traffic.prompt_tokens.p99 == pytest.approx(plain.traffic.prompt_tokens.p99)
    assert components(one)[0].prompt_sigma == pytest.approx(components(plain)[0].prompt_sigma)


@pytest.mark.parametrize(
    ("traffic", "message"),
    [
        ({"classes": [{**CHAT, "share": 0.5}, RAG]}, "sum to 1"),
        ({"prompt_tokens": 400}, "not both"),
        ({"classes": []}, "at least 1"),
        ({"classes": [CHAT] * 17}, "at most 16"),
    ],
)
def test_bad_classes_are_refused_with_the_reason(traffic, message):
    with pytest.raises(ValidationError, match=message):
        bimodal(**traffic)


def test_bimodal_conditional_beats_both_in_the_simulator(bimodal_verdict):
    """The verdict's three layouts simulated on the same 3,000 requests drawn per class: the
    conditional layout (router threshold T, Dynamo's isl_bounding) serves the most within the
    p99 targets, and its simulated goodput is within 15% of the calculator's."""
    from disagg_decider.sim import conditional as sim_conditional
    from disagg_decider.sim import run

    v = bimodal_verdict
    base = run.synthetic_requests(resolve(bimodal()), 3000, seed=1)
    measured = {}
    for mode in ("colocated", "disaggregated"):
        w_top, v_top = at_max_rate(bimodal(), mode)  # the pools its max rate belongs to
        setup = run.setup(resolve(w_top), v_top)
        measured[mode] = run.goodput(setup, mode, base, 0.99, getattr(v, mode).max_rate_per_s)
    w_top, v_top = at_max_rate(bimodal(), "conditional")
    r = resolve(w_top)
    cfg = sim_conditional.config_of(r, v_top)
    cond = sim_conditional.goodput(r, cfg, base, 0.99, v.conditional.max_rate_per_s)
    assert cond > 1.05 * max(measured.values()), (cond, measured, v.conditional.max_rate_per_s)
    assert 0.85 <= cond / v.conditional.max_rate_per_s <= 1.15


def test_a_part_whose_moments_cancel_to_zero_is_not_fitted():
    """Found by the invariants' generator: prompts of 16-19 tokens, one-token outputs on one
    A100. At the largest thresholds the long part's share is a rounding residue whose mean
    cancels to zero; it keeps the mix's lengths instead of dividing by that zero."""
    w = Workload.model_validate(
        {
            "name": "generated",
            "model": "llama-3.1-8b",
            "weights_dtype": "bf16",
            "engine": "vllm",
            "traffic": {
                "prompt_tokens": {"p50": 16, "p99": 19.46895810687181},
                "output_tokens": 1,
                "requests_per_second": 1.0,
            },
            "slo": {"ttft_ms": 500, "tpot_ms": 50},
            "cluster": {"gpu": "a100-80g", "gpus": 1, "gpus_per_node": 1, "network": "efa"},
        }
    )
    v = decide(w)
    assert v.conditional is not None and v.conditional.layout == "colocated"
    assert v.conditional.goodput_per_gpu == pytest.approx(v.colocated.goodput_per_gpu)
