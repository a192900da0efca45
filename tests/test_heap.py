"""`decide batch` keeps the C heap grown between decisions (`heap.py`): fewer page faults.

Page faults are counted, not timed: the same work faults the same pages on any machine.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from disagg_decider import heap
from tests.conftest import run_python

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="the top pad is glibc's",
)

_FAULTS = textwrap.dedent(
    """
    import resource, sys
    sys.path.insert(0, "benchmarks")
    from disagg_decider.decide import decide_many
    from disagg_decider.heap import keep_heap_grown
    from workload_mix import workload_mix
    if sys.argv[1] == "pad":
        assert keep_heap_grown()
    mix = workload_mix(96)
    decide_many(mix)  # tables and caches built, the heap grown
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    decide_many(mix)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _faults(mode: str) -> int:
    proc = run_python(_FAULTS, mode, timeout_s=600, unset=("MALLOC_TOP_PAD_",))
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


@glibc
def test_the_top_pad_stops_a_batch_faulting_its_arrays_in():
    plain, padded = _faults("plain"), _faults("pad")
    assert plain > 20 * 96  # tens of faults a decision without it
    assert padded * 5 < plain  # measured 140 against 5 a decision


@glibc
def test_a_users_own_setting_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_TOP_PAD_", "0")
    assert heap.keep_heap_grown() is False


_LARGE_ARRAYS = textwrap.dedent(
    """
    import resource
    import numpy as np
    from disagg_decider.heap import keep_heap_grown
    assert keep_heap_grown()
    np.ones(2**17).sum()  # 1 MiB: the heap grown once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        np.ones(2**17).sum()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _large_array_faults(unset: tuple[str, ...]) -> int:
    proc = run_python(_LARGE_ARRAYS, timeout_s=120, unset=unset)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


@glibc
def test_large_arrays_stay_in_the_heap_and_a_users_threshold_is_kept(monkeypatch):
    """A 1 MiB array allocated and freed 100 times: 256 pages faulted each time where the user
    keeps glibc's 128 KiB threshold (the value every mallopt call would freeze), next to none
    with the threshold `keep_heap_grown` sets."""
    in_heap = _large_array_faults(("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_"))
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    users_own = _large_array_faults(("MALLOC_TOP_PAD_",))
    assert users_own > 100 * 200
    assert in_heap < 100 * 10
