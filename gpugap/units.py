"""Numbers as people read them: durations and sizes with their unit (rules' messages and
every renderer use the same)."""

from __future__ import annotations


def fmt_ns(ns: float) -> str:
    """A duration in ns as '1.23 ms', '456 us', '789 ns' (3 significant digits)."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float) -> str:
    """A size in bytes as '1.5 GiB', '64 KiB', '12 B' (3 significant digits)."""
    n = float(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
