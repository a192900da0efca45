"""The rate-matched basis of `decide frontier`, as TensorRT-LLM's disaggregated-serving study
computes it.

A generation (decode) instance is fed by as many context (prefill) instances as its request
rate needs, fractionally: gen rate / ctx rate of them. Throughput per GPU is then

    output tokens/s of the gen instance / (ctx GPUs x gen rate / ctx rate + gen GPUs)

with no queueing and no whole replicas. The instances are the static basis's (calc/static.py:
a prefill replica running one prompt at a time, a decode replica at the largest batch whose
mean step meets the TPOT target), so the physics is the verdict's; only the accounting differs.
Colocated is the static basis's best replica per GPU, also without rounding to the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from disagg_decider.errors import UserError
from disagg_decider.workload import Resolved


def rate_matched_tokens_per_gpu(
    gen_output_tokens_per_s: float,
    ctx_gpus: float,
    gen_rate_per_s: float,
    ctx_rate_per_s: float,
    gen_gpus: float,
) -> float:
    """NVIDIA's rate-matched throughput per GPU (TensorRT-LLM tech blog on disaggregated
    serving): one gen instance's output tokens/s over its GPUs plus the fractional ctx GPUs
    that keep it fed (gen rate / ctx rate instances of ctx_gpus each)."""
    return gen_output_tokens_per_s / (ctx_gpus * gen_rate_per_s / ctx_rate_per_s + gen_gpus)


def rate_matched_rows(r: Resolved, xs: Sequence[float], target: float):
    """The frontier's rows on the rate-matched basis, and notes on what they assume."""
    from disagg_decider.calc.replicas.lengths import Lengths
    from disagg_decider.calc.static import colocated_best, disaggregated_best
    from disagg_decider.frontier_rows import (
        RATE_MATCHED_BUDGET_GPUS,
        ModePoint,
        Row,
        best_mode,
        missed,
        over_next,
    )

    w = r.workload
    if w.cluster.heterogeneous:
        raise UserError(
            "--basis rate-matched prices one GPU type; this workload's cluster has two "
            "(prefill_gpu/decode_gpu): use --basis p99-under-load"
        )
    lengths = Lengths.of(r.workload)
    out_tokens = float(np.ravel(lengths.output_mean)[0])
    rows = []
    for u in xs:
        at = _at(r, 1e3 / u)
        big = _at(r, 1e3 / u, gpus=max(w.cluster.gpus, RATE_MATCHED_BUDGET_GPUS))
        c = colocated_best(at, lengths)
        d = disaggregated_best(big, lengths)
        base = {"tokens_per_s_per_user": u, "tpot_target_ms": 1e3 / u}
        colo = missed(u)
        if c is not None:
            colo = ModePoint(
                **base,
                tokens_per_s_per_gpu=c["rate_per_gpu"] * out_tokens,
                tpot_ms=c["tpot_ms"],
                ttft_ms=c["ttft_ms"],
                layout=f"TP{c['tp']}, batch {c['batch']:g}, chunk {c['chunk']}",
                details={"tp": c["tp"], "chunk_tokens": c["chunk"], "batch": c["batch"]},
            )
        split = missed(u)
        if d is not None:
            ratio = d["d_rate"] / d["p_rate"]  # ctx instances per gen instance
            per_gpu = rate_matched_tokens_per_gpu(
                d["d_rate"] * out_tokens, d["p_tp"], d["d_rate"], d["p_rate"], d["d_tp"]
            )
            split = ModePoint(
                **base,
                tokens_per_s_per_gpu=per_gpu,
                tpot_ms=d["tpot_ms"],
                ttft_ms=d["ttft_ms"],
                layout=(
                    f"{ratio:.2f} x ctx TP{d['p_tp']} : 1 x gen TP{d['d_tp']} batch {d['batch']:g}"
                ),
                details={
                    "prefill_tp": d["p_tp"],
                    "decode_tp": d["d_tp"],
                    "ctx_per_gen": ratio,
                    "ctx_rate_per_s": d["p_rate"],
                    "gen_rate_per_s": d["d_rate"],
                    "batch": d["batch"],
                },
            )
        points = {"colocated": colo, "disaggregated": split}
        winner = best_mode(points)
        rows.append(
            Row(
                tokens_per_s_per_user=u,
                tpot_target_ms=1e3 / u,
                is_target=abs(u - target) < 1e-9 * target,
                modes=points,
                winner=winner,
                winner_over_next=over_next(points, winner),
            )
        )
    notes = [
        "rate-matched: no queueing; a prefill instance runs one prompt at a time; the ctx:gen "
        "ratio is fractional and the pair is the one serving most per GPU (whole replicas "
        "are not rounded, the cluster's size does not bound it)",
        "the conditional layout is priced on the p99-under-load basis only",
    ]
    return rows, notes


def _at(r: Resolved, tpot_ms: float, gpus: int | None = None) -> Resolved:
    w = r.workload
    update: dict[str, Any] = {"slo": w.slo.model_copy(update={"tpot_ms": float(tpot_ms)})}
    if gpus is not None:
        update["cluster"] = w.cluster.model_copy(update={"gpus": int(gpus)})
    return dataclasses.replace(r, workload=w.model_copy(update=update))
