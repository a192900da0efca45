"""A colocated replica below one decode sequence in flight: the low-load end of its load curve.

The colocated search (`colocated_best.best_points`) looks for the largest decode batch B that meets
both p99 targets on the batch grid, which starts at B = 1. At B = 1 a replica already runs at
the rate Little's law gives for one sequence always decoding (B / (OSL t)): for short outputs
that is several requests per second, with prefill chunks riding along in a large share of
iterations. A workload far below that rate (70B on 8 H200, 9K-token prompts, 23-token outputs,
0.1 req/s: the replica at B = 1 carries 2.2 req/s with a p99 TPOT of 79 ms) was declared
infeasible "at any load", while a replica serving it is mostly idle and meets both targets (the
simulator: p99 TPOT 22.6 ms).

Below B = 1 the rate sizing (`colocated_load._on_curve`) moves each p99 linearly from its idle
value (no queue, no chunk riding along) towards its value at B = 1, in proportion to the load.
The same line answers how much load a replica carries within the targets there: the largest
share s of the B = 1 rate with idle + s (at_one - idle) within each target. So the search and
the sizing at the workload's rate read one model, and a line the search finds feasible here is
one the sizing reports within the targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from disagg_decider.calc.replicas.colocated import ColocatedGrid, Lines


def rate_below_batch_one(at: Lines, one: ColocatedGrid) -> np.ndarray:
    """Requests per second each line carries within both p99 targets below one sequence in
    flight; 0 where even an idle replica misses a target or no sequence's KV fits. `one` is
    the lines evaluated at B = 1 with TTFT (`colocated.evaluate`): the caller evaluates, so this
    module reads that point and imports nothing of the search that calls it."""
    shares = [
        _share(np.ravel(one.idle_ttft_ms), np.ravel(one.ttft_p99_ms), np.ravel(at.ttft_ms)),
        _share(np.ravel(one.idle_tpot_ms), np.ravel(one.tpot_p99_ms), np.ravel(at.tpot_ms)),
    ]
    share = np.minimum(*np.broadcast_arrays(*shares))
    fits = np.ravel(np.asarray(at.inverse_memory_limit, dtype=float)) <= 1.0
    rate = np.ravel(one.rate_per_s) * np.where(fits, share, 0.0)
    return np.where(np.isfinite(rate), rate, 0.0)


def _share(idle: np.ndarray, at_one: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The load share s in [0, 1] with idle + s (at_one - idle) <= target (the same line
    `colocated_load` reports below batch 1); 0 where the idle value misses the target."""
    limit = target * (1.0 + 1e-9)
    rise = at_one - idle
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(rise > 0, (limit - idle) / rise, 1.0)
    share = np.where(np.isnan(share), 0.0, share)
    return np.where(idle <= limit, np.clip(share, 0.0, 1.0), 0.0)
