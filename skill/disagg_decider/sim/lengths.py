"""Prompt and output lengths drawn from the workload's log-normal fits.

The calculator's `Lengths` fits each p50/p99 pair to a log-normal (`workload.lognormal_sigma`);
drawing from the same fit keeps simulator and calculator on the same traffic. Prefix-cache hits
are the workload's share of prompt tokens, applied to every prompt.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.calc.replicas.lengths import Lengths


def sample(
    lengths: Lengths, count: int, rng: np.random.Generator, max_context_tokens: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompt, output, cached) token counts; prompt + output stays within the model's context."""
    p50 = float(np.ravel(lengths.prompt_p50)[0])
    prompt = np.rint(p50 * np.exp(lengths.prompt_sigma * rng.standard_normal(count)))
    output = np.rint(lengths.output_p50 * np.exp(lengths.output_sigma * rng.standard_normal(count)))
    return clip_to_context(prompt, output, lengths.hit_rate, max_context_tokens)


def clip_to_context(
    prompt: np.ndarray, output: np.ndarray, hit_rate: float, max_context_tokens: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At least one prompt and one output token, prompt + output within the context window."""
    prompt = np.clip(prompt, 1, max(max_context_tokens - 1, 1)).astype(np.int64)
    output = np.clip(output, 1, None).astype(np.int64)
    output = np.minimum(output, np.maximum(max_context_tokens - prompt, 1))
    cached = np.floor(prompt * hit_rate).astype(np.int64)
    cached = np.minimum(cached, prompt - 1)
    return prompt, output, cached
