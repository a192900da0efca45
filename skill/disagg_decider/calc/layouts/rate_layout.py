"""Which layouts to deploy at the workload's rate: the fewest GPUs that carry it.

The search ranks layouts by goodput per GPU on the whole cluster, and that ranking is what
the modes are compared on (their gain, the crossover). A team deploys for its own rate, where
the best layout per GPU is not always the one that needs the fewest GPUs: at 10 req/s an 8B
chat model's best layout per GPU may be TP2, one replica (2 GPUs), while one TP1 replica (1
GPU) carries the rate within the targets. Dynamo's profiler makes the same distinction (its
load-match mode picks the minimum GPUs that meet the SLA at a given request rate).

`fewest_gpus_layout` proposes, per workload, the colocated layout whose replicas for the rate,
read off the search's per-replica rates, take the fewest GPUs (`fewest_gpus_pair` the prefill
and decode layouts of a split, from the rates of each pair's pools on the cluster);
`presented` keeps a proposal only where, sized and priced as the best layout is
(`mode_records.colocated_results`, `disaggregated_results`), it carries the rate on fewer GPUs
than the best one does, and then with the best one's goodput (the whole cluster's, what the
modes are compared on). So the presented pools never take more GPUs than before, and always
meet the targets at the rate.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.calc.layouts.search import Found
from disagg_decider.calc.result import ColocatedResult

# The whole-cluster figures a presented layout keeps from the best one.
_CLUSTER_FIELDS = ("max_rate_per_s", "goodput_per_gpu")


def fewest_gpus_layout(found: Found, rows: np.ndarray, rate_per_s: np.ndarray) -> np.ndarray | None:
    """`found.colo_best_t` with each workload's own row (`rows`) set to the allowed layout
    whose replicas for the rate take the fewest GPUs by the search's per-replica rates (ties:
    the best layout, then the most goodput on the cluster); None where no row changes."""
    per_replica = found.colo_rate[rows]  # (W, T) one replica with the cluster behind it
    gpus = found.layouts["gpus"].astype(float)  # (T,) GPUs per replica
    allowed = found.rows.allowed["colocated"][rows] & (per_replica > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicas = np.ceil(rate_per_s[:, None] / per_replica - 1e-9)
    need = np.where(allowed, np.maximum(replicas, 1.0) * gpus, np.inf)
    best = found.colo_best_t[rows]
    everyone = np.arange(len(rows))
    fewest = need.min(axis=1)
    # Among the layouts with the fewest GPUs, the most goodput on the cluster.
    on_cluster = np.where(need == fewest[:, None], per_replica / gpus, -np.inf)
    proposal = np.argmax(on_cluster, axis=1)
    proposal = np.where(need[everyone, best] <= fewest, best, proposal)
    if np.array_equal(proposal, best):
        return None
    out = found.colo_best_t.copy()
    out[rows] = proposal
    return out


def presented(
    best: list[ColocatedResult], proposed: list[ColocatedResult]
) -> list[ColocatedResult]:
    """Per workload, the proposed layout where it carries the rate on fewer GPUs than the best
    one, with the best one's whole-cluster goodput; else the best one."""
    out = []
    for b, p in zip(best, proposed, strict=True):
        if p.fits_cluster and b.fits_cluster and p.gpus < b.gpus:
            out.append(p.model_copy(update={k: getattr(b, k) for k in _CLUSTER_FIELDS}))
        else:
            out.append(b)
    return out


def fewest_gpus_pair(found: Found, rows: np.ndarray, rate_per_s: np.ndarray) -> np.ndarray | None:
    """`found.best_pair` with each workload's own row set to the (prefill, decode) layouts whose
    pools for the rate take the fewest GPUs, estimated from each pair's cluster split (its
    prefill pool's rate per replica, its decode replica's rate; ties: the best pair, then the
    most goodput on the cluster); None where no row changes."""
    gpus = found.layouts["gpus"].astype(float)
    served = found.pair_served[rows]  # (W, Tp, Td) on the cluster
    allowed = found.rows.allowed["prefill"][rows][:, :, None]
    allowed = allowed & found.rows.allowed["decode"][rows][:, None, :] & (served > 0)
    rate = rate_per_s[:, None, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_prefill = found.prefill_rate[rows] / found.best_x[rows]
        x = np.maximum(np.ceil(rate / per_prefill - 1e-9), 1.0)
        y = np.maximum(np.ceil(rate / found.decode_rate[rows] - 1e-9), 1.0)
    need = np.where(allowed, x * gpus[None, :, None] + y * gpus[None, None, :], np.inf)
    flat_need = need.reshape(len(rows), -1)
    fewest = flat_need.min(axis=1)
    on_cluster = np.where(flat_need == fewest[:, None], served.reshape(len(rows), -1), -np.inf)
    proposal = np.stack(np.unravel_index(on_cluster.argmax(axis=1), served.shape[1:]), axis=1)
    best = found.best_pair[rows]
    everyone = np.arange(len(rows))
    keep = need[everyone, best[:, 0], best[:, 1]] <= fewest
    proposal = np.where(keep[:, None], best, proposal)
    if np.array_equal(proposal, best):
        return None
    out = found.best_pair.copy()
    out[rows] = proposal
    return out


def presented_split(best: tuple, proposed: tuple) -> tuple:
    """(records, columns, p99 TTFT function) of the split per workload: the proposed pools
    where they carry the rate on fewer GPUs than the best pair's (their goodput is the
    cluster's best already: `mode_records.disaggregated_results` reads it per workload), else the
    best pair's; the columns (which the per-request figures read) and TTFTs row by row alike."""
    records, columns, ttft = best
    p_records, p_columns, p_ttft = proposed
    use = np.array(
        [
            p.fits_cluster and b.fits_cluster and p.gpus < b.gpus
            for b, p in zip(records, p_records, strict=True)
        ]
    )
    if not use.any():
        return best
    merged = [p if u else b for b, p, u in zip(records, p_records, use, strict=True)]
    merged_columns = {k: np.where(use, p_columns[k], v) for k, v in columns.items()}
    return merged, merged_columns, lambda: np.where(use, p_ttft(), ttft())
