"""Physical ranges of the simulator's flags and caps on the work they imply.

Checked up front, before a workload is read or a request drawn: a flag outside its range is a
user error (exit 2) naming the flag, the range and why. Click's own `min=`/`max=` let NaN
through (every comparison with NaN is false), so every float here is checked for finiteness.

What a simulation costs: memory grows with the requests (about 23 bytes each, plus the
outcome arrays: `--requests 1e8` reached 2.3 GB) and time with requests x replicas (the
routers scan replicas; 2,000 requests on 65,536 colocated replicas took 6.8 CPU-s, on a
million the setup alone ran past a minute). The caps sit far above any run the README shows
(20,000 requests on the verdict's pools, sized for the workload's rate).
"""

from __future__ import annotations

import math

from disagg_decider.errors import UserError
from disagg_decider.workload import MAX_RATE_PER_S, MAX_TOKENS, MIN_RATE_PER_S

MAX_REQUESTS = 1_000_000  # one simulated run
MAX_REPLICAS = 4096  # one simulated pool (--colocated-gpus / --prefill-gpus / --decode-gpus)
MAX_WORK = 100_000_000  # requests x replicas of all pools of one run
MAX_CV = 100.0  # burstiness; the Azure 2023 code trace, the burstiest published, has 13.2
MAX_BUSY_THRESHOLD = 1000.0  # --prefill-busy-threshold, a fraction of a worker's token budget
MAX_SEED = 2**63 - 1
MAX_JOBS = 256
MAX_SWEEP_REQUESTS = 200_000  # per simulated run of a sweep (each point runs a bisection)
MAX_SWEEP_WORK = 2_000_000  # --steps x --requests


def finite_in(flag: str, value: float, low: float, high: float, why: str = "") -> float:
    """`value` if finite and within [low, high]; else a `UserError` naming the flag."""
    if not (math.isfinite(value) and low <= value <= high):
        raise UserError(f"{flag} {value!r}: expected a finite number from {low:g} to {high:g}{why}")
    return value


def check_requests(flag: str, count: int, most: int = MAX_REQUESTS, least: int = 1) -> int:
    if not least <= count <= most:
        raise UserError(
            f"{flag} {count}: expected {least} to {most:,} requests (the simulator's memory "
            "and time grow with them)"
        )
    return count


def check_simulate_flags(
    requests: int, rate: float | None, cv: float, seed: int, jobs: int | None, busy: float
) -> None:
    """`decide simulate`'s numeric flags, before anything is loaded."""
    check_requests("--requests", requests)
    if rate is not None:
        finite_in("--rate", rate, MIN_RATE_PER_S, MAX_RATE_PER_S, " requests per second")
    finite_in("--cv", cv, 1e-3, MAX_CV, " (1 is Poisson; the Azure code trace has 13.2)")
    _common(seed, jobs, busy)


def check_sweep_flags(steps: int, requests: int, seed: int, jobs: int | None, busy: float) -> None:
    """`decide sweep`'s numeric flags, before anything is loaded."""
    check_requests("--requests", requests, MAX_SWEEP_REQUESTS, least=100)
    if steps * requests > MAX_SWEEP_WORK:
        raise UserError(
            f"--steps {steps} x --requests {requests:,} = {steps * requests:,} simulated "
            f"requests per mode and bisection step; at most {MAX_SWEEP_WORK:,} (fewer steps "
            "or requests)"
        )
    _common(seed, jobs, busy)


def _common(seed: int, jobs: int | None, busy: float) -> None:
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"--seed {seed}: expected 0 to {MAX_SEED:,} (2^63 - 1)")
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise UserError(f"--jobs {jobs}: expected 1 to {MAX_JOBS} worker processes")
    finite_in("--prefill-busy-threshold", busy, 0.0, MAX_BUSY_THRESHOLD)


def prompt_range(text: str) -> tuple[float, float]:
    """`--prompt-tokens LOW:HIGH`: finite, 1 <= LOW < HIGH <= the longest prompt a workload
    may state."""
    lo, sep, hi = text.partition(":")
    try:
        a, b = float(lo), float(hi)
    except ValueError:
        a = b = math.nan
    ok = sep and math.isfinite(a) and math.isfinite(b) and 1 <= a < b <= MAX_TOKENS
    if not ok:
        raise UserError(
            f"--prompt-tokens {text[:80]!r}: expected LOW:HIGH with 1 <= LOW < HIGH <= "
            f"{MAX_TOKENS:,}, e.g. 256:32768"
        )
    return a, b


def check_work(requests: int, replicas: int) -> None:
    """Requests x replicas of one run (all pools), once the pools are known."""
    if requests * replicas > MAX_WORK:
        raise UserError(
            f"{requests:,} requests on {replicas:,} replicas is {requests * replicas:,} "
            f"request-replicas; one simulation runs at most {MAX_WORK:,} (fewer --requests, "
            "or smaller --colocated-gpus / --prefill-gpus / --decode-gpus)"
        )
