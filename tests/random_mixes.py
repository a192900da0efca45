"""Seeded traffic mixes of one to three classes, for the threshold split's tests."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from disagg_decider.classes import Component


def random_mixes(
    rng: np.random.Generator, n: int, point_mass_share: float
) -> Iterator[tuple[Component, ...]]:
    """`n` mixes: weights from a Dirichlet, prompts of 50-20,000 tokens (about
    `point_mass_share` of them with no spread), cache hits of none or up to 90%, outputs of
    20-3,000 tokens."""
    for _ in range(n):
        classes = int(rng.integers(1, 4))
        yield tuple(
            Component(
                weight=float(w),
                prompt_p50=float(rng.uniform(50, 20000)),
                prompt_sigma=float(rng.uniform(0, 1.5)) if rng.random() > point_mass_share else 0.0,
                hit_rate=float(rng.choice([0.0, rng.uniform(0, 0.9)])),
                output_p50=float(rng.uniform(20, 3000)),
                output_sigma=float(rng.uniform(0.0, 1.2)),
            )
            for w in rng.dirichlet(np.ones(classes))
        )
