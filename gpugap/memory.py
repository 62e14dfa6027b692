"""Memory given back to the operating system between the big stages of an analysis.

glibc keeps the memory a program frees below the top of its heap, for reuse: the
batches of arrays a big report is worked through (a million rows, megabytes each, under
glibc's threshold for mapping memory apart) leave the heap holding free pages that
still count as the process's resident memory, a hundred megabytes and more. ``give_back``
returns them (glibc's malloc_trim); where there is no such call (macOS, musl, Windows)
it does nothing. ``joined`` gives back the parts it joins as it goes; ``isin`` tests
big arrays a piece at a time.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache

import numpy as np
from numpy.typing import ArrayLike


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim      # the C library already loaded
    except (AttributeError, OSError, TypeError):
        return None


def give_back() -> None:
    """Return the C heap's free pages to the operating system (glibc), else nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


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


def joined(parts: list[np.ndarray], dtype=np.int64) -> np.ndarray:
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
