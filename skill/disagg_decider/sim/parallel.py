"""Run independent simulations in worker processes (`decide simulate|sweep --jobs N`).

Each simulation is a pure function of its inputs (engines, pools, a seeded request batch), so
running them in other processes changes nothing but the wall time: results come back in the
order submitted and equal what the same calls return in this process. `jobs=1` runs them here,
one after the other, as before `--jobs` existed. The processes are the shared pool
(`disagg_decider.pool`) that `decide batch` uses too.
"""

from __future__ import annotations

from disagg_decider.pool import cpu_count, run_all

__all__ = ["default_jobs", "run_all"]


def default_jobs() -> int:
    """Two processes (one per serving mode), or one on a one-CPU machine."""
    return min(2, cpu_count())
