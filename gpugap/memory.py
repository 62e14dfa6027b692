"""Memory given back to the operating system between the big stages of an analysis.

glibc keeps the memory a program frees below the top of its heap, for reuse: the
batches of arrays a big report is worked through (a million rows, megabytes each, under
glibc's threshold for mapping memory apart) leave the heap holding free pages that
still count as the process's resident memory, a hundred megabytes and more. ``give_back``
returns them (glibc's malloc_trim); where there is no such call (macOS, musl, Windows)
it does nothing. ``joined`` gives back the parts it joins as it goes; ``isin`` tests
big arrays a piece at a time.

Every page given back costs a page fault (the kernel's zeroing of a fresh page) when a
later stage touches it again, and so does every array above glibc's mapping threshold,
mapped apart and unmapped when freed: on a report of 200k kernels, 120k faults, a fifth
of the run's CPU. ``hold_freed`` (for a command on a report that fits in memory many
times over) keeps freed memory in the heap for reuse instead, and ``give_back`` then
does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from gpugap.lazy import LazyNumpy

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike
else:
    np = LazyNumpy(globals())       # the command line holds memory before numpy's import


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim      # the C library already loaded
    except (AttributeError, OSError, TypeError):
        return None


_held = False
# glibc's mallopt parameters (malloc.h) and what hold_freed sets them to: arrays up to
# 256 MB from the heap, a heap that grows 64 MB at a time and is trimmed only past 1 GB
# free at its top.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_HOLD = ((_M_MMAP_THRESHOLD, 256 << 20), (_M_TOP_PAD, 64 << 20),
         (_M_TRIM_THRESHOLD, 1 << 30))


def give_back() -> None:
    """Return the C heap's free pages to the operating system (glibc), else nothing;
    nothing either while freed memory is held for reuse (hold_freed)."""
    if _held:
        return
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def give_back_before_fork() -> None:
    """Return the C heap's free pages to the operating system before a fork, even while
    freed memory is held for reuse (hold_freed): after the fork both processes map the
    held pages, and each page either writes is first copied (a fault that copies it);
    given back, it is a fresh page to whichever allocates it, which numpy maps in huge
    pages for its big arrays (a million-kernel report's forked stages: 40,000 faults
    fewer, a fifth of its wall time)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def hold_freed() -> bool:
    """Keep what the process frees in the C heap, for its next allocations, from now on
    (glibc; False where there is no mallopt). A process-wide setting, for a command
    whose data are small next to the machine's memory: the command line sets it for a
    report under gpugap.cli.HOLD_MAX_BYTES; the library never does."""
    global _held
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):
        return False
    _held = all(mallopt(param, value) == 1 for param, value in _HOLD)
    return _held


ISIN_CHUNK = 1 << 20          # values tested at a time by isin
GIVE_BACK_BYTES = 16 << 20    # joined: the parts' memory given back every this many bytes


def isin(values: np.ndarray, test: ArrayLike) -> np.ndarray:
    """np.isin(values, test), ISIN_CHUNK values at a time: for integers numpy looks the
    values up in a table after widening them all to 8 bytes (a copy of 190 MB for the
    24M API calls of a 10M-kernel report)."""
    values = np.asarray(values)
    test = np.asarray(test)
    out = np.empty(values.shape, dtype=bool)
    for i in range(0, values.size, ISIN_CHUNK):
        out[i:i + ISIN_CHUNK] = np.isin(values[i:i + ISIN_CHUNK], test)
    return out


def joined(parts: list[np.ndarray], dtype="int64") -> np.ndarray:
    """np.concatenate, emptying *parts* as they are copied. Parts too small for glibc to
    map apart stay in its heap once freed: they are given back to the system every
    GIVE_BACK_BYTES copied, so the peak is about one copy of them, not two."""
    out = np.empty(sum(p.size for p in parts), dtype=dtype)
    at = freed = 0
    parts.reverse()                            # popped from the end: in order, O(1) each
    while parts:
        part = parts.pop()
        out[at:at + part.size] = part
        at += part.size
        freed += part.nbytes
        del part
        if freed >= GIVE_BACK_BYTES:
            give_back()
            freed = 0
    return out
