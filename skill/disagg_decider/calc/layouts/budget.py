"""The cost budget of one decision: a safety net on how many replicas a priced pool may have.

What grows with the input. Prompt and output lengths, the request rate and the chunk sizes
are array values; they change no array's shape, so a 10M-token prompt costs what a 400-token
one does. The cluster once grew the cost too: Erlang C for a pool of c replicas came from a
table of rows 1..c (O(c^2) time: 1,024 GPUs took 24 CPU-s and 1.1 GB, 4,096 minutes), and the
conditional layout's search tried every split of the cluster. Now neither does: pools beyond
the table's 64 rows compute Erlang C where asked at a cost independent of c
(`calc/queues/erlang.py`), the conditional search narrows brackets of splits
(`calc/layouts/split_grid.py`) and sizes its pools from a split that carries the rate
(`calc/modes/conditional_sizing.py`). The RAG example costs about as much on 100,000 GPUs as on 16
(`benchmarks/cluster_scale.py`, README "Performance").

So the budget below is only a safety net: `MAX_POOL_REPLICAS` equals the largest cluster the
schema accepts (`workload.MAX_GPUS`), so no valid workload meets it today. Were the schema's
limit raised, a larger cluster would be coarsened: its roles searched only on layouts of at
least `min_replica_gpus` GPUs, so no pool has more replicas, and the verdict would say so in
`warnings`; where no layout the cluster allows is that large, or a pinned layout is smaller,
the workload is refused up front with the limit named.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from disagg_decider.errors import UserError
from disagg_decider.workload import MAX_GPUS

MAX_POOL_REPLICAS = MAX_GPUS  # one GPU per replica on the largest valid cluster


def min_replica_gpus(cluster_gpus: int) -> int:
    """The smallest replica (GPUs) whose pools on this cluster stay within the budget."""
    return max(1, -(-int(cluster_gpus) // MAX_POOL_REPLICAS))


def _refusal(gpus: int, floor: int, widest: int) -> UserError:
    return UserError(
        f"cluster.gpus: {gpus:,} GPUs is beyond one decision's cost budget: pools of at most "
        f"{MAX_POOL_REPLICAS} replicas are priced, which needs replicas of "
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
                "budget of one decision, calc/layouts/budget.py); smaller replicas might do better"
            )
    return free & large, warnings
