"""Numbers as people read them: durations and sizes with their unit (rules' messages and
every renderer use the same)."""

from __future__ import annotations

# A value this close below a unit rounds to 1 of it at 3 significant digits.
_ROUNDS_UP = 0.9995


def _significant(value: float) -> str:
    """3 significant digits, never an exponent: '1.23', '456', '1,010' (a value of 1000
    or more is whole, with thousands separated)."""
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def fmt_ns(ns: float) -> str:
    """A duration in ns as '1.23 ms', '456 us', '789 ns', '1,010 s' (3 significant
    digits, whole seconds past a thousand)."""
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale * _ROUNDS_UP:          # 999.6 ms is '1 s', not '1,000 ms'
            return f"{_significant(ns / scale)} {unit}"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float) -> str:
    """A size in bytes as '1.5 GiB', '64 KiB', '12 B', '1,200 GiB' (3 significant
    digits, whole GiB past a thousand)."""
    n = float(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale * _ROUNDS_UP:
            return f"{_significant(n / scale)} {unit}"
    return f"{n:.0f} B"
