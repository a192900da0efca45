"""The cost budget of one decision: how many replicas a pool the search prices may have.

What grows with the input. Prompt and output lengths, the request rate and the chunk sizes
are array values; they change no array's shape, so a 10M-token prompt costs what a 400-token
one does (measured: 0.6 CPU-s per cold process either way). What grows is the cluster: the
search prices every layout's pool as one queue of `cluster.gpus // replica GPUs` servers, and
Erlang C for c servers on the load grid (`calc/erlang.py`) is a table of rows 1..c, each
O(c x 4,097), built once per process: O(c^2) time, O(c x 4,097) memory. Measured on the
2-core CI box, one cold `decide` (llama-3.1-8b on H100, TP1 allowed, imports included):
c = 64 (the shipped examples and the 800-workload golden mix never exceed 64) 0.5 CPU-s;
128, 1.2 CPU-s; 256, 2.2 CPU-s and 210 MB; 1,024, 24 CPU-s and 1.1 GB; 4,096, minutes.
`benchmarks/decision_budget.py` reproduces these figures.

The budget: pools of at most `MAX_POOL_REPLICAS` replicas, four times the largest the golden
mix prices (a few CPU-seconds, once per process). A larger cluster is coarsened: its roles
are searched only on layouts of at least `min_replica_gpus` GPUs, so no pool has more
replicas, and the verdict says so in `warnings`. Where no layout the cluster allows is that
large, or a pinned layout is smaller, the workload is refused up front with the limit named.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from disagg_decider.errors import UserError

MAX_POOL_REPLICAS = 256


def min_replica_gpus(cluster_gpus: int) -> int:
    """The smallest replica (GPUs) whose pools on this cluster stay within the budget."""
    return max(1, -(-int(cluster_gpus) // MAX_POOL_REPLICAS))


def _refusal(gpus: int, floor: int, widest: int) -> UserError:
    return UserError(
        f"cluster.gpus: {gpus:,} GPUs is beyond one decision's cost budget: pools of at most "
        f"{MAX_POOL_REPLICAS} replicas are priced (a few CPU-seconds), which needs replicas of "
        f"at least {floor} GPUs here, and the largest layout this model and cluster allow has "
        f"{widest}; give cluster.gpus <= {widest * MAX_POOL_REPLICAS:,} (decide for a share "
        "of the cluster and repeat the pools)"
    )


def restrict(
    members: Sequence, layout_gpus: np.ndarray, free: np.ndarray, pinned: Sequence[dict]
) -> tuple[np.ndarray, list[list[str]]]:
    """`free` (W, T) narrowed to the layouts within each member's budget, with a warning per
    coarsened member; raises `UserError` where nothing within it is left or a pin is below it.

    `pinned` is each member's role -> pinned layout (or None). A member whose whole cluster
    fits the budget at one GPU per replica is left exactly as it was.
    """
    floors = np.array([min_replica_gpus(r.workload.cluster.gpus) for r in members])
    large = layout_gpus[None, :] >= floors[:, None]
    warnings: list[list[str]] = [[] for _ in members]
    for k in np.flatnonzero(floors > 1):
        gpus, floor = members[k].workload.cluster.gpus, int(floors[k])
        for role, pin in pinned[k].items():
            if pin is not None and pin.gpus < floor:
                raise UserError(
                    f"parallelism.{role}: the pinned layout {pin.label} ({pin.gpus} GPUs per "
                    f"replica) on cluster.gpus {gpus:,} makes pools of more than "
                    f"{MAX_POOL_REPLICAS} replicas, the cost budget of one decision; pin at "
                    f"least {floor} GPUs per replica, or give cluster.gpus <= "
                    f"{pin.gpus * MAX_POOL_REPLICAS:,}"
                )
        unpinned = any(pin is None for pin in pinned[k].values())
        if unpinned and not (free[k] & large[k]).any():
            widest = int(layout_gpus[free[k]].max()) if free[k].any() else 1
            raise _refusal(gpus, floor, widest)
        if unpinned and (free[k] & ~large[k]).any():
            warnings[k].append(
                f"cluster.gpus {gpus:,}: searched only layouts of at least {floor} GPUs per "
                f"replica, so no pool has more than {MAX_POOL_REPLICAS} replicas (the cost "
                "budget of one decision, calc/budget.py); smaller replicas might do better"
            )
    return free & large, warnings
