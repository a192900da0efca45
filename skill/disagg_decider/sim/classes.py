"""Requests of mixed traffic: each request drawn from its own class (`traffic.classes`).

The calculator carries a mix as moment-matched log-normals; the simulator draws the classes
themselves (a bimodal mix stays bimodal), so comparing the two checks that approximation too.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.classes import Component
from disagg_decider.sim import arrivals
from disagg_decider.sim.lengths import clip_to_context
from disagg_decider.sim.requests import Requests


def synthetic(
    comps: list[Component],
    count: int,
    rate_per_s: float,
    seed: int,
    max_context_tokens: int,
    cv: float = 1.0,
) -> Requests:
    """`count` requests at `rate_per_s`, each of a class drawn with its share."""
    gap_stream, class_stream, length_stream = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    gaps = arrivals.unit_gaps(count, gap_stream, cv)
    weights = np.array([c.weight for c in comps])
    which = class_stream.choice(len(comps), size=count, p=weights / weights.sum())
    z_prompt = length_stream.standard_normal(count)
    z_output = length_stream.standard_normal(count)
    pick = lambda f: np.array([f(c) for c in comps])[which]  # noqa: E731
    prompt = np.rint(
        pick(lambda c: c.prompt_p50) * np.exp(pick(lambda c: c.prompt_sigma) * z_prompt)
    )
    output = np.rint(
        pick(lambda c: c.output_p50) * np.exp(pick(lambda c: c.output_sigma) * z_output)
    )
    hit = pick(lambda c: c.hit_rate)
    prompt, output, _ = clip_to_context(prompt, output, 0.0, max_context_tokens)
    cached = np.minimum(np.floor(prompt * hit).astype(np.int64), prompt - 1)
    return Requests(arrivals.arrival_times_ms(gaps, rate_per_s), prompt, output, cached)
