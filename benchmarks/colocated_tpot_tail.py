"""Which requests miss the colocated TPOT target on mixed traffic, and why (issue 18a).

For each seeded mix of `benchmarks/conditional_vs_sim.py`, the verdict's colocated pools are
simulated at the calculator's colocated capacity, every iteration of every replica is logged
(by wrapping the simulator's scheduling calls; the simulator itself is unchanged), and each
steady request's decode is matched to the iterations it spanned. It prints the calculator's
p99 TPOT at that rate beside the simulated one, and for the requests over the target against
all requests: the median output, the share of their decode steps that carried prompt tokens,
and what those steps cost.

    python benchmarks/colocated_tpot_tail.py 58 30 20
    python benchmarks/colocated_tpot_tail.py 58 --chunk-tokens 1024
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "skill", ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from conditional_vs_sim import _with_chunks, workload  # noqa: E402
from disagg_decider.decide import decide  # noqa: E402
from disagg_decider.sim import colocated_replica as sim_replica  # noqa: E402
from disagg_decider.sim import metrics, run  # noqa: E402
from disagg_decider.sim.goodput import replay_at  # noqa: E402
from disagg_decider.workload import resolve, with_rate  # noqa: E402


class Log:
    """Runs of iterations per replica and each request's replica, from wrapped calls."""

    def __init__(self) -> None:
        self.runs: list[list] = []  # replica, start ms, iterations, first ms, slope, tokens
        self.replica_of: dict[int, int] = {}

    @contextmanager
    def installed(self):
        """The simulator's replica logs into this while inside; restored after."""
        cls = sim_replica.Replica
        plan, cut, arrive = cls.plan, cls._cut, cls.arrive
        log = self

        def logged_plan(replica, now):
            plan(replica, now)
            kind = replica.kind
            if kind == sim_replica.IDLE:
                return
            tokens = replica.tokens if kind == sim_replica.CHUNK else 0
            if kind == sim_replica.SINGLE:
                tokens = sum(take for _, take in replica.pieces)
            log.runs.append([replica.index, now, replica.k, replica.first, replica.slope, tokens])

        def logged_cut(replica, now):
            version = replica.version
            cut(replica, now)
            if replica.version != version:  # the run in flight was shortened
                for entry in reversed(log.runs):
                    if entry[0] == replica.index:
                        entry[2] = replica.k
                        break

        def logged_arrive(replica, rid, now):
            log.replica_of[rid] = replica.index
            arrive(replica, rid, now)

        cls.plan, cls._cut, cls.arrive = logged_plan, logged_cut, logged_arrive
        try:
            yield self
        finally:
            cls.plan, cls._cut, cls.arrive = plan, cut, arrive

    def iterations(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per replica: each iteration's start (ms), duration (ms) and prompt tokens."""
        out: dict[int, list] = {}
        for index, t0, k, first, slope, tokens in self.runs:
            ms = first + slope * np.arange(k)
            starts = t0 + np.concatenate([[0.0], np.cumsum(ms)[:-1]])
            out.setdefault(index, []).append((starts, ms, np.full(k, tokens)))
        return {
            i: tuple(np.concatenate(parts) for parts in zip(*v, strict=True))
            for i, v in out.items()
        }


def profile(seed: int, chunks: list[int] | None, requests: int) -> str:
    w = workload(seed)
    if chunks:
        w = _with_chunks(w, chunks)
    r, v = resolve(w), decide(w)
    rate = v.colocated.max_rate_per_s
    priced = decide(with_rate(w, rate * 0.999)).colocated.tpot_p99_ms
    reqs = replay_at(run.synthetic_requests(r, requests, seed=1), rate)
    with Log().installed() as log:
        out = run.simulate_mode(run.setup(r, v), "colocated", reqs)
    tpot = metrics.tpot_ms(out, reqs)
    per_replica = log.iterations()
    rows = []
    for rid in np.arange(len(reqs.prompt))[metrics.steady_window(len(reqs.prompt))]:
        if reqs.output[rid] <= 1 or not np.isfinite(tpot[rid]):
            continue
        starts, ms, tokens = per_replica[log.replica_of[rid]]
        during = (starts >= out.first_token_ms[rid] - 1e-9) & (starts < out.done_ms[rid] - 1e-9)
        carrying = during & (tokens > 0)
        rows.append(
            (
                tpot[rid],
                reqs.output[rid],
                carrying.sum() / max(during.sum(), 1),
                ms[carrying].sum(),
                carrying.sum(),
            )
        )
    a = np.array(rows)
    miss = a[:, 0] > w.slo.tpot_ms

    def describe(m: np.ndarray) -> str:
        chunk_ms = a[m, 3].sum() / max(a[m, 4].sum(), 1)
        return (
            f"median output {np.median(a[m, 1]):.0f}, chunk-step share {a[m, 2].mean():.2f}, "
            f"chunk step {chunk_ms:.1f} ms"
        )

    s = v.sizing
    return (
        f"{w.name}: {s.colocated_replicas} x TP{s.colocated_tp} chunk {s.colocated_chunk_tokens}"
        f" at {rate:.2f} req/s: p99 TPOT calc {priced:.1f} ms, sim "
        f"{np.percentile(a[:, 0], 99):.1f} ms, {miss.mean():.1%} over {w.slo.tpot_ms:.0f} ms\n"
        f"  over the target: {describe(miss) if miss.any() else '-'}\n"
        f"  all requests:    {describe(np.ones(len(a), bool))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", type=int, nargs="+", help="mix seeds (mix-N)")
    parser.add_argument("--chunk-tokens", type=int, nargs="+")
    parser.add_argument("--requests", type=int, default=4000)
    args = parser.parse_args()
    for seed in args.seeds:
        print(profile(seed, args.chunk_tokens, args.requests))
    pinned = f" --chunk-tokens {' '.join(map(str, args.chunk_tokens))}" if args.chunk_tokens else ""
    seeds = " ".join(map(str, args.seeds))
    print(f"(python benchmarks/colocated_tpot_tail.py {seeds}{pinned} --requests {args.requests})")


if __name__ == "__main__":
    main()
