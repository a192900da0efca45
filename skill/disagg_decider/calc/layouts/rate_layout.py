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
`alternatives` names the members whose proposal differs from their best layout (only those are
priced again, in the same call as the best layouts: `compare._modes_at_rate`); `presented`
keeps a proposal only where, sized and priced as the best layout is
(`mode_records.colocated_results`, `disaggregated_results`), it carries the rate on fewer GPUs
than the best one does, and then with the best one's goodput (the whole cluster's, what the
modes are compared on). So the presented pools never take more GPUs than before, and always
meet the targets at the rate.
"""

from __future__ import annotations

import numpy as np

from disagg_decider.calc.layouts.search import Found

# The whole-cluster figures a presented colocated layout keeps from the best one (a split's
# are the cluster's best already: `mode_records.disaggregated_results` reads them per row).
CLUSTER_FIELDS = ("max_rate_per_s", "goodput_per_gpu")


def fewest_gpus_layout(found: Found, rows: np.ndarray, rate_per_s: np.ndarray) -> np.ndarray | None:
    """`found.colo_best_t` with each workload's own row (`rows`) set to the allowed layout
    whose replicas for the rate take the fewest GPUs by the search's per-replica rates (ties:
    the best layout, then the most goodput on the cluster); None where no row changes."""
    per_replica = found.colo_rate[rows]  # (W, T) one replica with the cluster behind it
    gpus = found.layouts["gpus"].astype(float)  # (T,) GPUs per replica
    allowed = found.rows.allowed["colocated"][rows] & (per_replica > 0)
    # Divided where allowed only, as read (no np.errstate: a context costs more than this).
    replicas = np.ceil(rate_per_s[:, None] / np.where(allowed, per_replica, 1.0) - 1e-9)
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
    # Divided where allowed only, as read: a pair that serves has a prefill pool and decode
    # replicas that carry something, on one prefill replica at least (no np.errstate).
    per_prefill = found.prefill_rate[rows] / np.where(allowed, found.best_x[rows], 1.0)
    x = np.maximum(np.ceil(rate / np.where(allowed, per_prefill, 1.0) - 1e-9), 1.0)
    y = np.maximum(np.ceil(rate / np.where(allowed, found.decode_rate[rows], 1.0) - 1e-9), 1.0)
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


def alternatives(
    best: np.ndarray, fewest: np.ndarray | None, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(the members whose proposal differs from their best layout, those proposals): `best`
    per member ((W,) layouts or (W, 2) pairs), `fewest` what `fewest_gpus_layout` or
    `fewest_gpus_pair` gave (None, or every row's). Only these are priced a second time."""
    if fewest is None:
        return np.zeros(0, dtype=int), best[:0]
    proposal = fewest[rows]
    differ = proposal != best
    members = np.flatnonzero(differ.any(axis=1) if differ.ndim > 1 else differ)
    return members, proposal[members]


def presented(columns: dict[str, np.ndarray], members: np.ndarray) -> np.ndarray:
    """Which entry each member presents: its best layout's (entry k) or, where it carries the
    rate on fewer GPUs, its proposal's (entry W + m for `members[m]`, as `alternatives`
    orders them); `columns` are the entries' records' fields (fits_cluster, gpus)."""
    n = len(columns["gpus"]) - len(members)
    pick = np.arange(n)
    if not len(members):
        return pick
    fits, gpus = columns["fits_cluster"], columns["gpus"]
    proposed = n + np.arange(len(members))
    use = fits[proposed] & fits[members] & (gpus[proposed] < gpus[members])
    pick[members[use]] = proposed[use]
    return pick
