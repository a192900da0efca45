"""How an arrival picks its replica: the router policy, explicit.

- `least-work` (default): the replica that will be free soonest (prefill pools; Dynamo's KV
  router and llm-d's load-aware scorers route on queued work) or, for colocated replicas, the
  one with the fewest requests in flight (join-shortest-queue). The calculator prices such a
  pool as one M/G/c queue (`calc.queues.queueing`).
- `round-robin`: replicas in turn, blind to load.
- `random`: a uniformly random replica (seeded), which makes each replica an independent
  M/G/1 queue at rate / c: what the calculator would have to assume without a router.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Router = Literal["least-work", "round-robin", "random"]
ROUTERS: tuple[str, ...] = ("least-work", "round-robin", "random")


class Picker:
    """Picks a replica index per arrival; `least` is called only for `least-work`."""

    def __init__(self, router: str, replicas: int, seed: int = 0) -> None:
        if router not in ROUTERS:
            raise ValueError(f"router {router!r}: expected one of {', '.join(ROUTERS)}")
        self.router = router
        self.replicas = replicas
        self.turn = -1
        self.rng = np.random.default_rng(seed)
        self.draws: list[int] = []

    def pick(self, least) -> int:
        if self.router == "least-work" or self.replicas == 1:
            return least()
        if self.router == "round-robin":
            self.turn = (self.turn + 1) % self.replicas
            return self.turn
        if not self.draws:
            self.draws = self.rng.integers(0, self.replicas, 4096).tolist()
        return self.draws.pop()


def pooled_waits(
    arrival_ms: np.ndarray, service_ms: np.ndarray, servers: int, router: str = "least-work"
) -> np.ndarray:
    """Waiting times of a pool of FCFS servers fed by `router`: the disaggregated simulator's
    prefill pool on its own (tests compare `calc.queues.queueing` with it)."""
    free = [0.0] * servers
    picker = Picker(router, servers)
    waits = np.empty(len(arrival_ms))
    for i, (now, s) in enumerate(zip(arrival_ms.tolist(), service_ms.tolist(), strict=True)):
        p = picker.pick(lambda: min(range(servers), key=free.__getitem__))
        start = max(now, free[p])
        waits[i] = start - now
        free[p] = start + s
    return waits
