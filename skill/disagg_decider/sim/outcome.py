"""What one simulated mode hands to `metrics`: when each request got its first and last token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Outcome:
    mode: str  # "colocated" or "disaggregated"
    gpus: int
    first_token_ms: np.ndarray
    done_ms: np.ndarray
    layout: str  # e.g. "2 x TP8, chunk 512" or "3P x TP4 + 1D x TP4"
    share_to_prefill: float | None = None  # conditional layout: requests the router sent there
