"""Request classes from a trace: natural breaks in log prompt length.

Mixed traffic (chat turns beside RAG or agent prompts) shows as separate modes in the log of
the prompt length. The prompts are split by optimal one-dimensional k-means on log tokens
(Jenks natural breaks: the split that minimises the within-class sum of squares, found exactly
by dynamic programming over the sorted values, Wang & Song, "Ckmeans.1d.dp", R Journal 2011).
Large traces are first cut into `MAX_BINS` runs of equal count; a class boundary then falls
between runs, and the sums of squares stay exact for those runs.

Choosing k (`auto`): the largest k in 1..`MAX_AUTO_CLASSES` whose adjacent classes are all
separated by Ashman's D >= `MIN_ASHMAN_D` (D = sqrt(2) |m1 - m2| / sqrt(s1^2 + s2^2) on log
prompt length; Ashman, Bird & Zepf, AJ 108, 1994) and hold at least `MIN_CLASS_SHARE` of the
requests each. Splitting one normal or uniform mode at its natural break gives D of 2.7 or 3.5
(the halves' spreads are truncated), so D >= 4 keeps a unimodal trace as one class; chat
(~400 tokens) beside RAG (~16K) at a log spread of 0.5 gives D ~ 10.

Each class carries its share of requests, prompt and output p50/p99 and, where the trace
records block hashes (Mooncake `hash_ids`), its prefix-cache hit rate: the class's hit tokens
over its prompt tokens, with hits counted over the whole trace in arrival order
(`sim.trace._prefix_hit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.sim.trace import Trace

MAX_BINS = 512
MAX_AUTO_CLASSES = 4
MAX_CLASSES = 8  # an explicit --classes N
MIN_ASHMAN_D = 4.0
MIN_CLASS_SHARE = 0.01


@dataclass(frozen=True)
class TraceClass:
    share: float
    requests: int
    prompt_p50: float
    prompt_p99: float
    output_p50: float
    output_p99: float
    prefix_cache_hit_rate: float | None  # None: the trace has no block hashes
    prompt_range: tuple[int, int]  # shortest and longest prompt in the class


@dataclass(frozen=True)
class Clustering:
    classes: list[TraceClass]
    chosen_by: str  # "auto" or "fixed"
    ashman_d: list[float]  # between adjacent classes, len(classes) - 1
    criterion: str  # how k was chosen, in words

    def as_dict(self) -> dict:
        return {
            "chosen_by": self.chosen_by,
            "criterion": self.criterion,
            "ashman_d": [round(d, 3) for d in self.ashman_d],
            "classes": [c.__dict__ | {"prompt_range": list(c.prompt_range)} for c in self.classes],
        }


def _runs(x_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut sorted values into at most MAX_BINS runs of (about) equal count, never splitting a
    value across runs. Returns each run's end index (exclusive), count, sum and sum of squares."""
    n = x_sorted.size
    cuts = np.unique(np.linspace(0, n, min(n, MAX_BINS) + 1).round().astype(int))
    # move every cut to the first index of its value, so equal values share a run
    cuts = np.unique(np.searchsorted(x_sorted, x_sorted[np.minimum(cuts, n - 1)], side="left"))
    ends = np.append(cuts[cuts > 0], n)
    ends = np.unique(ends)
    starts = np.concatenate(([0], ends[:-1]))
    c1 = np.concatenate(([0.0], np.cumsum(x_sorted)))
    c2 = np.concatenate(([0.0], np.cumsum(x_sorted**2)))
    return ends, ends - starts, c1[ends] - c1[starts], c2[ends] - c2[starts]


def _breaks(counts, sums, squares, k: int) -> list[int]:
    """Optimal k-segment split of the runs (minimum total within-segment sum of squares);
    the run indices where segments 2..k start."""
    m = counts.size
    w = np.concatenate(([0.0], np.cumsum(counts)))
    s1 = np.concatenate(([0.0], np.cumsum(sums)))
    s2 = np.concatenate(([0.0], np.cumsum(squares)))

    def sse(i: np.ndarray, j: int) -> np.ndarray:  # runs i..j-1
        n = w[j] - w[i]
        t = s1[j] - s1[i]
        return s2[j] - s2[i] - t * t / np.maximum(n, 1e-300)

    cost = np.full((k + 1, m + 1), np.inf)
    arg = np.zeros((k + 1, m + 1), dtype=int)
    cost[0, 0] = 0.0
    for q in range(1, k + 1):
        for j in range(q, m + 1):
            i = np.arange(q - 1, j)
            total = cost[q - 1, i] + sse(i, j)
            best = int(np.argmin(total))
            cost[q, j] = total[best]
            arg[q, j] = i[best]
    starts, j = [], m
    for q in range(k, 1, -1):
        j = arg[q, j]
        starts.append(j)
    return sorted(starts)


def _labels(log_prompt: np.ndarray, x_sorted: np.ndarray, ends: np.ndarray, starts) -> np.ndarray:
    """Class of each request: the segment its log prompt length falls in."""
    edges = [x_sorted[ends[s - 1] - 1] for s in starts]  # last value of the segment below
    return np.searchsorted(np.asarray(edges), log_prompt, side="right")


def _ashman(a: np.ndarray, b: np.ndarray) -> float:
    spread = float(np.sqrt(a.var() + b.var()))
    gap = abs(float(a.mean() - b.mean()))
    return float("inf") if spread == 0 else float(np.sqrt(2.0) * gap / spread)


def _split(trace: Trace, log_prompt, x_sorted, runs, k: int):
    ends, counts, sums, squares = runs
    starts = _breaks(counts, sums, squares, k) if k > 1 else []
    labels = _labels(log_prompt, x_sorted, ends, starts)
    groups = [log_prompt[labels == c] for c in range(k)]
    d = [_ashman(groups[c], groups[c + 1]) for c in range(k - 1)]
    return labels, d


def _describe(trace: Trace, labels: np.ndarray, k: int, hashed: bool) -> list[TraceClass]:
    n = len(trace)
    out = []
    for c in range(k):
        mask = labels == c
        prompt, output = trace.prompt[mask], trace.output[mask]
        p50, p99 = np.percentile(prompt, [50, 99])
        o50, o99 = np.percentile(output, [50, 99])
        tokens = float(prompt.sum())
        hit = float(trace.cached[mask].sum()) / tokens if hashed and tokens else None
        out.append(
            TraceClass(
                share=float(mask.sum()) / n,
                requests=int(mask.sum()),
                prompt_p50=float(p50),
                prompt_p99=float(p99),
                output_p50=float(o50),
                output_p99=float(o99),
                prefix_cache_hit_rate=None if hit is None else hit,
                prompt_range=(int(prompt.min()), int(prompt.max())),
            )
        )
    return out


def cluster(trace: Trace, classes: int | None = None) -> Clustering:
    """Classes of `trace` by natural breaks in log prompt length; `classes` None chooses k."""
    log_prompt = np.log(np.maximum(trace.prompt, 1).astype(float))
    x_sorted = np.sort(log_prompt)
    distinct = int(np.unique(x_sorted).size)
    runs = _runs(x_sorted)
    hashed = trace.has_hash_ids
    if classes is not None:
        k = max(1, min(classes, distinct))
        labels, d = _split(trace, log_prompt, x_sorted, runs, k)
        why = (
            f"{k} classes as asked (natural breaks in log prompt length)"
            if k == classes
            else f"{k} classes: the trace has only {distinct} distinct prompt lengths"
        )
        return Clustering(_describe(trace, labels, k, hashed), "fixed", d, why)
    best = (1, np.zeros(len(trace), dtype=int), [])
    for k in range(2, min(MAX_AUTO_CLASSES, distinct) + 1):
        labels, d = _split(trace, log_prompt, x_sorted, runs, k)
        shares = np.bincount(labels, minlength=k) / len(trace)
        if min(d) >= MIN_ASHMAN_D and shares.min() >= MIN_CLASS_SHARE:
            best = (k, labels, d)
    k, labels, d = best
    why = (
        f"k = {k}: the largest k in 1..{MAX_AUTO_CLASSES} whose adjacent classes are separated by "
        f"Ashman's D >= {MIN_ASHMAN_D:g} in log prompt length and hold >= "
        f"{MIN_CLASS_SHARE:.0%} of requests each"
    )
    return Clustering(_describe(trace, labels, k, hashed), "auto", d, why)


def _shares(classes: list[TraceClass]) -> list[float]:
    """Shares rounded to 4 places that still sum to 1 (the workload checks the sum)."""
    rounded = [round(c.share, 4) for c in classes[:-1]]
    return [*rounded, round(1.0 - sum(rounded), 4)]


def traffic_fragment(clustering: Clustering, rate_per_s: float) -> dict:
    """A workload's `traffic` block with the classes (valid for `workload.Traffic`)."""

    def pct(p50: float, p99: float) -> dict[str, int]:
        lo = max(round(p50), 1)
        return {"p50": lo, "p99": max(round(p99), lo)}

    rows = []
    for share, c in zip(_shares(clustering.classes), clustering.classes, strict=True):
        row = {
            "share": share,
            "prompt_tokens": pct(c.prompt_p50, c.prompt_p99),
            "output_tokens": pct(c.output_p50, c.output_p99),
        }
        if c.prefix_cache_hit_rate is not None:
            row["prefix_cache_hit_rate"] = round(min(c.prefix_cache_hit_rate, 0.99), 3)
        rows.append(row)
    return {"requests_per_second": round(max(rate_per_s, 1e-3), 4), "classes": rows}
