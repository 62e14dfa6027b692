"""Memory given back to the operating system between the big stages of an analysis.

glibc keeps the memory a program frees below the top of its heap, for reuse: the
batches of arrays a big report is worked through (a million rows, megabytes each, under
glibc's threshold for mapping memory apart) leave the heap holding free pages that
still count as the process's resident memory, a hundred megabytes and more. ``give_back``
returns them (glibc's malloc_trim); where there is no such call (macOS, musl, Windows)
it does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache


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
