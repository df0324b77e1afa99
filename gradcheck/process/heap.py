"""Large temporaries served from the heap while one computation repeats.

glibc's malloc serves a request over its mmap threshold (dynamic, at most 32 MiB) by a
fresh ``mmap``, and gives the pages back on ``free``: every full-size temporary of a
layer ([4096, 1024] in float64 is 32 MiB) then costs the kernel 8192 page faults, each
page zeroed, whatever NumPy writes there next. Finite differences evaluate one formula
dozens of times and the rounding model walks it once more: the same sizes allocated and
freed over and over, where that system time was about as large as the arithmetic's
(the bench's layer norm spent 5 s of a 12 s run in the kernel).

:func:`reused_allocations` raises the thresholds for the length of such a computation,
so the freed blocks stay in the heap for the next evaluation's temporaries, and gives
the memory back after (``malloc_trim``). The peak resident memory stays that of the
arrays alive at once: the repeated evaluations free what they allocate before they
allocate again. Elsewhere than Linux with glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from contextlib import contextmanager

# <malloc.h>'s mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: set back after: what glibc's dynamic thresholds reach once a process has freed one
#: large block (mallopt turns the dynamic adjustment off, so they are set as fixed)
_AFTER_MMAP, _AFTER_TRIM = 32 << 20, 64 << 20
#: while reusing: requests up to 1 GiB from the heap, nothing trimmed until the end
_REUSE_MMAP, _REUSE_TRIM = 1 << 30, 1 << 31

#: a formula with an array of this many elements or more (32 MiB in float64: over
#: glibc's largest mmap threshold) draws its points and runs its witnesses and bounds
#: with their temporaries served from the heap; smaller ones are served so anyway
HEAP_ELEMENTS = 1 << 22

_libc: list = []   # the C library once loaded, or None where this does nothing
_depth = [0]       # nested blocks: only the outermost one sets and restores


def _glibc():
    if not _libc:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL(None)
                lib.mallopt, lib.malloc_trim  # noqa: B018  (glibc's, not musl's)
            except (OSError, AttributeError):
                lib = None
        _libc.append(lib)
    return _libc[0]


@contextmanager
def reused_allocations():
    """Inside the block, freed memory is kept in the heap and reused; given back to
    the system after."""
    lib = _glibc()
    outermost = lib is not None and not _depth[0]   # (only it sets and restores)
    _depth[0] += 1
    if outermost:
        lib.mallopt(_M_MMAP_THRESHOLD, _REUSE_MMAP)
        lib.mallopt(_M_TRIM_THRESHOLD, _REUSE_TRIM)
    try:
        yield
    finally:
        _depth[0] -= 1
        if outermost:
            lib.mallopt(_M_MMAP_THRESHOLD, _AFTER_MMAP)
            lib.mallopt(_M_TRIM_THRESHOLD, _AFTER_TRIM)
            lib.malloc_trim(0)
