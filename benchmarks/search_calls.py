"""Python-level calls inside the layout search and the colocated replicas, per decision.

Run from the repository root (or give another checkout's root, to compare two versions):

    python benchmarks/search_calls.py [--root PATH] [--workloads 256]

`decide_calls.py` counts a whole decision; this splits out the regions of issue 27's search
work, inclusively (every call made while the function is on the stack, nested calls of the
same function counted once): `search.search`, `colocated_best.best_points` (from the search and
from the conditional layout's callers), `colocated.evaluate`, `compare._crossovers`, and the
whole `_analyze_block` for scale; and their union (search, best_points, _crossovers), each
call counted once. Counts come from `sys.setprofile` (Python and C calls, as
cProfile counts them), so they are the same on every run of one numpy version.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REGIONS = (
    ("compare.py", "_analyze_block"),
    ("search.py", "search"),
    ("colocated_best.py", "best_points"),
    ("colocated.py", "evaluate"),
    ("compare.py", "_crossovers"),
)


# The search's region of issue 27: a call counts once if any of these is on the stack.
UNION = (
    ("search.py", "search"),
    ("colocated_best.py", "best_points"),
    ("compare.py", "_crossovers"),
)


def region_calls(fn: Callable[[], object]) -> tuple[Counter, Counter]:
    """(calls inside each region, times each region was entered) while `fn` runs; the key
    "union" counts the calls made while any of `UNION` runs."""
    inside, entered, active, stack = Counter(), Counter(), Counter(), []

    def profile(frame, event, arg) -> None:
        if event in ("call", "c_call"):
            for key, depth in active.items():
                if depth:
                    inside[key] += 1
            if any(active[key] for key in UNION):
                inside["union"] += 1
        if event == "call":
            key = (Path(frame.f_code.co_filename).name, frame.f_code.co_name)
            key = key if key in REGIONS else None
            if key is not None:
                entered[key] += 1
                active[key] += 1
            stack.append(key)
        elif event == "return" and stack:
            key = stack.pop()
            if key is not None:
                active[key] -= 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return inside, entered


def show(title: str, counts: tuple[Counter, Counter], per: int = 1) -> None:
    inside, entered = counts
    print(title)
    for key in REGIONS:
        name = f"{key[0]}:{key[1]}"
        print(f"  {name:<28} {inside[key] / per:>9,.0f} calls  ({entered[key] / per:.2f} entries)")
    print(f"  {'search + best_points + _crossovers':<34} {inside['union'] / per:>9,.0f} calls")


def main() -> None:
    from decide_calls import warmed

    root, decide, decide_many, mix, examples = warmed(__doc__.splitlines()[0])
    print(f"{root}")
    show(
        f"batched, per decision ({len(mix)} workloads)",
        region_calls(lambda: decide_many(mix)),
        len(mix),
    )
    for name, w in examples.items():
        show(name, region_calls(lambda w=w: decide(w)))


if __name__ == "__main__":
    main()
