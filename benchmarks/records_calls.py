"""Python-level calls of a decision outside the search and the conditional layout, per decision.

Run from the repository root (or give another checkout's root, to compare two versions):

    python benchmarks/records_calls.py [--root PATH] [--workloads 256]

Issue 27's third region: everything in a decision after the layout search and outside the
conditional layout's search: each mode's records at the workload's rate (`mode_records`,
`rate_layout`), the per-request figures, the report-only p99 solve, the limits, the verdict
(`decide._verdict`: rules, plan, summary, steps) and its provenance labels. Counted: every
call while `decide` or `decide_many` runs, except while `search.search` (the block's search and
the crossover rows'), `search.members_of`, `conditional.evaluate_many_later` or the function it
returns is on the stack. Counts come from `sys.setprofile` (Python and C calls, as cProfile
counts them), so they are the same on every run of one numpy version; the names exist in
every version since issue 27, so two checkouts compare.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

# Calls made while one of these is on the stack belong to the other two regions.
ELSEWHERE = (
    ("search.py", "search"),
    ("search.py", "members_of"),
    ("conditional.py", "evaluate_many_later"),
    ("conditional.py", "layouts"),
)


def records_calls(fn: Callable[[], object]) -> int:
    """Calls made while `fn` runs, none of `ELSEWHERE` on the stack."""
    count, depth, stack = 0, 0, []

    def profile(frame, event, arg) -> None:
        nonlocal count, depth
        if event in ("call", "c_call") and not depth:
            count += 1
        if event == "call":
            elsewhere = (Path(frame.f_code.co_filename).name, frame.f_code.co_name) in ELSEWHERE
            depth += elsewhere
            stack.append(elsewhere)
        elif event == "return" and stack:
            depth -= stack.pop()

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def main() -> None:
    from decide_calls import show, warmed

    root, decide, decide_many, mix, examples = warmed(__doc__.splitlines()[0])
    what = "calls per decision outside the search and conditional"
    show(root, records_calls, decide, decide_many, mix, examples, what)


if __name__ == "__main__":
    main()
