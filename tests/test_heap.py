"""`decide batch` keeps the C heap grown between decisions (`heap.py`): fewer page faults.

Page faults are counted, not timed: the same work faults the same pages on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from disagg_decider import heap
from tests.conftest import ROOT

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
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TOP_PAD_"}
    env["PYTHONPATH"] = f"{ROOT / 'skill'}{os.pathsep}{ROOT}"
    proc = subprocess.run(
        [sys.executable, "-c", _FAULTS, mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
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
