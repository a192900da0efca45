"""What one simulated mode hands to `metrics`: when each request got its first and last token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Outcome:
    mode: str  # "colocated" or "disaggregated"
    gpus: int
    first_token_ms: np.ndarray
    done_ms: np.ndarray
    layout: str  # e.g. "2 x TP8, chunk 512" or "3P x TP4 + 1D x TP4"
    share_to_prefill: float | None = None  # conditional layout: requests the router sent there

    @classmethod
    def of(cls, mode: str, cfg: Any, times: Any, **extra: Any) -> Outcome:
        """A finished run of `mode`: its config's GPUs and layout (`cfg.gpus`, `cfg.layout()`)
        and the first- and last-token time each request recorded (`times.first_ms`,
        `times.done_ms`), as every mode's event loop ends."""
        return cls(
            mode=mode,
            gpus=cfg.gpus,
            first_token_ms=np.asarray(times.first_ms),
            done_ms=np.asarray(times.done_ms),
            layout=cfg.layout(),
            **extra,
        )
