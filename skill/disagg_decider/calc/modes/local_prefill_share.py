"""Which of the conditional layout's local prefills Dynamo's router can actually keep local.

The calculator prices the conditional layout on the uncached prompt length alone, as llm-d's
`prefix-based-pd-decider` routes (`nonCachedTokens`). Dynamo's router (policy `isl_bounding`,
its default) keeps a request on the decode worker only if eff_isl < `eff_isl_threshold` AND
eff_isl / prompt < `eff_isl_ratio_threshold`, where eff_isl is the prompt minus the prefix
cached on the chosen decode worker and the ratio must lie in [0, 1]; equality means no bypass
(ai-dynamo/dynamo `lib/kv-router/src/conditional_disagg.rs`; shared/reference/dynamo_llmd.md,
"Generation 2"). A prompt with nothing cached has ratio 1, so at the loosest ratio, 1.0, it
still goes to the prefill pool whatever its length.

The calculator models a class's hits as the same share of every prompt, so a class with hit
rate 0 is the cache-cold part and one with any hit passes ratio 1.0. Nothing here changes the
conditional figures; it reads them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from disagg_decider.calc.layouts.threshold_split import partial_moments
from disagg_decider.calc.result import ConditionalResult
from disagg_decider.classes import components

DYNAMO_MAX_RATIO = 1.0  # eff_isl_ratio_threshold must lie in [0, 1]


def cold_local_share(workload: Any, cond: ConditionalResult | None) -> float | None:
    """Share of all requests the conditional layout prefills locally although nothing of their
    prompt is cached (eff_isl / prompt = 1, which fails Dynamo's ratio check at its maximum).

    None unless the layout is conditional. Per class: its share times the probability that its
    uncached prompt is within the threshold, the same log-normal split the layout was priced on
    (`threshold_split.split_at`), for classes with prefix-cache hit rate 0.
    """
    if cond is None or cond.layout != "conditional" or not cond.threshold_tokens:
        return None
    threshold, share = float(cond.threshold_tokens), 0.0
    for c in components(workload):
        if 1.0 - c.hit_rate < DYNAMO_MAX_RATIO:
            continue  # part of every prompt is cached: the ratio check passes at 1.0
        below, _, _ = partial_moments(c.prompt_p50, c.prompt_sigma, np.array([threshold]))
        share += c.weight * float(below[0])
    return share


def dynamo_layout(layout: str, cold_share: float | None, material_share: float) -> str:
    """The layout Dynamo's router can run: always-disaggregated where the conditional layout
    keeps a material share of requests local that Dynamo would send to the prefill pool (the
    conditional pools are not sized for them), the verdict's layout otherwise."""
    if layout == "conditional" and cold_share is not None and cold_share >= material_share:
        return "disaggregated"
    return layout
