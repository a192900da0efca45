"""Report-only p99 TTFTs of one block, gathered and solved in one time bisection.

A verdict reports p99 TTFTs that no choice depends on: the colocated replicas' at the
workload's rate and the chosen conditional layout's two (the pooled long prompts, the local
short ones). The split's is priced with its KV link's wait too (`ingress_queue`), and its
sizing reads it, so it is not gathered here. Each is a `queueing.p99_of_sum_ms` bisection
(16 steps over the quantile nodes); for one decision numpy's fixed cost per step is most of
its cost, so `compare` gathers them (`add`) and solves them in one call (`solve`) once every
choice is made.

Exact: `p99_of_sum_ms` prices every entry on its own (element-wise operations, reductions only
along the node axis of fresh arrays), so an entry solved among others gets the bits it gets
alone; the inputs are only broadcast and laid out flat, never recomputed.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.queues.array_helpers import broadcast, broadcast_flat, broadcast_shape
from disagg_decider.calc.replicas import prefill


class Pending:
    """One gathered bisection: its answer, shaped as `p99_of_sum_ms` would return it, once
    `DeferredP99.solve` has run."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self._value: np.ndarray | None = None

    @property
    def value(self) -> np.ndarray:
        if self._value is None:
            raise RuntimeError("DeferredP99.solve() has not run")  # a bug, not a user error
        return self._value


class DeferredP99:
    """`queueing.p99_of_sum_ms` calls, answered together by `solve`."""

    def __init__(self) -> None:
        self._jobs: list[tuple[Pending, list[np.ndarray], np.ndarray]] = []

    def add(self, rate_per_ms, servers, mean_service_ms, scv, nodes_ms) -> Pending:
        """`p99_of_sum_ms(rate_per_ms, servers, mean_service_ms, scv, nodes_ms)`, later."""
        nodes = np.asarray(nodes_ms, dtype=float)
        values = [np.asarray(v, dtype=float) for v in (rate_per_ms, servers, mean_service_ms, scv)]
        shape = broadcast_shape(*(v.shape for v in values), nodes.shape[:-1])
        flat = [broadcast_flat(v, shape) for v in values]
        k = nodes.shape[-1]
        pending = Pending(shape)
        self._jobs.append((pending, flat, broadcast(nodes, (*shape, k)).reshape(-1, k)))
        return pending

    def add_pool(self, pool: prefill.Pool, servers, rate_per_s) -> Pending:
        """`pool.ttft_p99_ms(servers, rate_per_s)`, later (the same arguments it passes)."""
        rate_per_ms = np.asarray(rate_per_s) / 1e3
        return self.add(rate_per_ms, servers, pool.mean_ms, pool.scv, pool.nodes_ms)

    def solve(self) -> None:
        """Every gathered bisection in one call."""
        jobs, self._jobs = self._jobs, []
        if not jobs:
            return
        columns = [np.concatenate([flat[i] for _, flat, _ in jobs]) for i in range(4)]
        nodes = np.concatenate([n for _, _, n in jobs])
        solved = queueing.p99_of_sum_ms(*columns, nodes)
        start = 0
        for pending, flat, _ in jobs:
            stop = start + flat[0].size
            pending._value = solved[start:stop].reshape(pending.shape)
            start = stop
