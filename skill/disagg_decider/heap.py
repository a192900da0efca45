"""The C heap of a process that decides batches: kept grown between decisions (glibc only).

A batched decision allocates and frees numpy arrays of a few hundred kB to a few MB, many per
search. glibc serves those from the heap's top and gives the top back to the system whenever
its free part passes the trim threshold, so the next search faults the same pages in again:
120-140 minor page faults per decision, 7-10% of a batch's CPU time in the kernel. A top pad
of 64 MiB (`mallopt(M_TOP_PAD)`, as the `MALLOC_TOP_PAD_` variable sets it) makes each growth
take that much more and keeps it, so a long batch stops faulting (about 5 faults a decision).
Its cost is at most the pad in resident memory per process.

Setting any of glibc's malloc options also freezes its mmap threshold, which otherwise slides up
to 32 MiB as large blocks are freed, at 128 KiB: every array of 128 KiB or more is then mapped
and unmapped per allocation and faults all its pages in each time (a 2,000-workload batch: about
113,000 faults against 31,000, twice the system time). So the threshold is set to that same
32 MiB ceiling, where it would have slid to, and a batch's arrays stay in the heap.

`decide batch` sets it before it forks its workers (they inherit it). A library call never
does: the setting is the whole process's, so it is the front end's choice. Where the user has
set `MALLOC_TOP_PAD_` themselves, or the C library is not glibc, nothing is changed; where they
have set `MALLOC_MMAP_THRESHOLD_`, their threshold is kept.
"""

from __future__ import annotations

import ctypes
import os
import sys

TOP_PAD_BYTES = 64 * 2**20
MMAP_THRESHOLD_BYTES = 32 * 2**20  # the ceiling of glibc's sliding threshold on 64-bit
_M_TOP_PAD = -2  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def keep_heap_grown(
    pad_bytes: int = TOP_PAD_BYTES, mmap_threshold_bytes: int = MMAP_THRESHOLD_BYTES
) -> bool:
    """Set glibc's top pad and mmap threshold for this process (and the processes it forks);
    whether the pad was set."""
    if not sys.platform.startswith("linux") or "MALLOC_TOP_PAD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and other C libraries: no such call
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold_bytes))
    return mallopt(_M_TOP_PAD, int(pad_bytes)) == 1
