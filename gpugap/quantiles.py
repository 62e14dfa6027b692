"""np.median and np.percentile (its default, linear method) of an array's columns, by
one sort of them; np.median of integers of a small range, by counting them.

numpy finds a quantile by partitioning, and its partition is slow on a column of a few
distinct values (an iteration's time in each bucket: mostly zeros): 5 ms for 45,000
iterations of two values, where sorting them takes 0.2 ms. A sort, then numpy's own
formulas at the indexes they pick, give the same numbers (tests/test_quantiles.py holds
them to it).
"""

from __future__ import annotations

import numpy as np

# Integers whose range is no wider than their count, or than this, are counted.
COUNTED_RANGE = 1 << 16


def median(values: np.ndarray) -> np.float64:
    """np.median of 1-D values: integers of a range no wider than their count (or
    COUNTED_RANGE) by a count of each value, which no pattern in them slows (numpy's
    partition took 4 ms on 45,000 iterations' counts of a few values in a pattern)."""
    x = np.asarray(values).reshape(-1)
    if x.size and x.dtype.kind in "iu":
        lo, hi = int(x.min()), int(x.max())
        if hi - lo < max(x.size, COUNTED_RANGE):
            below = np.cumsum(np.bincount(np.subtract(x, lo, dtype=np.int64)))
            n = x.size
            a = int(np.searchsorted(below, (n - 1) // 2, side="right")) + lo
            b = int(np.searchsorted(below, n // 2, side="right")) + lo
            return np.float64((float(a) + float(b)) / 2.0)
    return np.float64(np.median(x))


def column_quantiles(table: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(np.median(table, axis=0), np.percentile(table, q, axis=0)) of a 2-D array of
    numbers (no NaN) with at least one row."""
    ordered = np.sort(table, axis=0)
    return median_of_sorted(ordered), percentile_of_sorted(ordered, q)


def median_of_sorted(ordered: np.ndarray) -> np.ndarray:
    """np.median along axis 0 of an array sorted along it: the middle value, or the mean
    of the two middle ones, as float64."""
    n = ordered.shape[0]
    lo, hi = ordered[(n - 1) // 2], ordered[n // 2]
    return (lo.astype(np.float64) + hi.astype(np.float64)) / 2.0


def percentile_of_sorted(ordered: np.ndarray, q: float) -> np.ndarray:
    """np.percentile(..., q, axis=0) of an array sorted along axis 0, numpy's linear
    method: the value at (n - 1) * q / 100 between its neighbours, interpolated as
    numpy's _lerp does (from the upper one when the fraction is at least a half)."""
    n = ordered.shape[0]
    virtual = (n - 1) * np.true_divide(q, 100)
    below = int(np.floor(virtual))
    above = min(below + 1, n - 1)
    t = virtual - below
    a, b = ordered[below], ordered[above]
    diff = np.subtract(b, a)
    if t >= 0.5:
        return np.subtract(b, diff * (1 - t)).astype(np.float64)
    return np.add(a, diff * t).astype(np.float64)
