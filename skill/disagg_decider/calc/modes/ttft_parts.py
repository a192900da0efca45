"""A conditional candidate's two parts' TTFT misses, and its rows taken by index.

`overall_ttft` prices a layout on the share of ALL requests that miss the TTFT target; each
part (the pooled long prompts, the short ones prefilled on the decode workers) reads its miss
off the same queueing primitives it is sized with. Split from `overall_ttft` so that module
holds the layouts and the bisections on them, and this one the per-part arithmetic they share
with the sizing (`conditional_sizing`) and the rows (`conditional_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from disagg_decider.calc.queues import queueing
from disagg_decider.calc.replicas.lengths import Lengths
from disagg_decider.calc.replicas.prefill import Pool


def take_rows(a, n: int, rows: np.ndarray):
    """A row field (leading axis n, or 1 for all rows; a scalar for all) at `rows`."""
    if type(a) is not np.ndarray:  # (`np.asarray` on an array returns it: one call saved)
        a = np.asarray(a)
    if not a.ndim:
        return a
    if a.shape[0] == n:  # the rows are the field's own: no broadcast to build
        return a[rows]
    return np.broadcast_to(a, (n, *a.shape[1:]))[rows]


def lengths_at_rows(lengths: Lengths, n: int, rows: np.ndarray) -> Lengths:
    """`lengths.map` of `take_rows`, a field with the rows' own leading axis indexed in place
    (what `take_rows` does with it) rather than through a call apiece."""
    return Lengths(
        **{
            k: v[rows]
            if type(v) is np.ndarray and v.ndim and v.shape[0] == n
            else take_rows(v, n, rows)
            for k, v in vars(lengths).items()
        }
    )


def pool_at_rows(pool: Pool, n: int, rows: np.ndarray) -> Pool:
    """A pooled part's service (`Pool`, fields as `take_rows` reads them) at `rows`."""
    return Pool(*(take_rows(getattr(pool, f), n, rows) for f in Pool.__dataclass_fields__))


@dataclass(frozen=True)
class Part:
    """One part's TTFT at a rate: the pooled wait (C, theta), S' at the z nodes, the map
    a + b x onto the reported TTFT, and (the decode workers) the TPOT."""

    c_wait: np.ndarray
    theta: np.ndarray
    nodes_ms: np.ndarray  # (N, K)
    a: np.ndarray
    b: np.ndarray
    tpot_ms: np.ndarray | None

    def columns(self) -> Part:
        """The part with its rows as columns (N, 1), for times (N, P)."""
        col = lambda a: None if a is None else np.asarray(a)[:, None]  # noqa: E731
        return Part(
            col(self.c_wait),
            col(self.theta),
            np.asarray(self.nodes_ms)[:, None, :],
            col(self.a),
            col(self.b),
            col(self.tpot_ms),
        )

    def miss(self, t_ms: np.ndarray) -> np.ndarray:
        """P(reported TTFT > t)."""
        # The queue's time that maps onto t: (t - a) / b where the map rises (b > 0), else
        # past every time where t reaches the flat map's value and none where it does not.
        x = np.where(t_ms >= self.a, np.inf, 0.0)
        np.divide(t_ms - self.a, self.b, out=x, where=self.b > 0)
        x = np.where(np.isnan(x), np.inf, x)
        tail = queueing.sum_exceed_probability(
            self.c_wait, self.theta, self.nodes_ms, np.minimum(x, 1e300)
        )
        return np.where(x == np.inf, 0.0, tail)  # (`np.isposinf` in one ufunc)


def both_miss(pooled: Part, local: Part, t_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(`pooled.miss(t)`, `local.miss(t)`) in one pass: the two parts' rows stacked (the
    pooled part's first) and read at once, then split.

    Each part's miss is element-wise in its rows (the tail sum reduces over each row's own
    nodes only, a contiguous last axis either way), so a row gets the same bits stacked as
    alone; one pass saves the fixed cost of the other (the parts have as many rows, which a
    decision's few candidates make small).
    """
    return stacked_miss(stack_parts(pooled, local), t_ms)


def stack_parts(pooled: Part, local: Part) -> Part:
    """Both parts' rows in one part, the pooled part's first (`both_miss`)."""
    p, q = pooled, local
    assert p.nodes_ms.shape == q.nodes_ms.shape
    # Both parts' fields have one row per candidate (N, ...) in the same shapes; named one by
    # one (the TPOT is the local part's alone), not read through getattr: fewer calls a pass.
    return Part(
        np.concatenate((p.c_wait, q.c_wait)),
        np.concatenate((p.theta, q.theta)),
        np.concatenate((p.nodes_ms, q.nodes_ms)),
        np.concatenate((p.a, q.a)),
        np.concatenate((p.b, q.b)),
        None,
    )


def stacked_miss(stacked: Part, t_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`both_miss` on parts already stacked (`stack_parts`): a caller that reads them at many
    times stacks them once."""
    t = np.asarray(t_ms, dtype=float)
    n = len(stacked.c_wait) // 2
    both = stacked.miss(np.concatenate((t, t)))
    return both[:n], both[n:]
