"""gpugap.quantiles gives numpy's medians and percentiles, number for number."""

from __future__ import annotations

import numpy as np
import pytest

from gpugap.quantiles import column_quantiles, median


@pytest.mark.parametrize("seed", range(20))
def test_column_quantiles_are_numpy_median_and_percentile(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 400))
    columns = [rng.integers(0, 3, rows) * 1_000_000,            # few values: mostly zeros
               rng.integers(-10**12, 10**12, rows),             # wide int64
               rng.normal(0, 1e6, rows),                         # floats
               np.full(rows, 7)]
    table = np.stack(columns, axis=1)
    for q in (90, 10, 50, 99, 0, 100, 37.5):
        median, percentile = column_quantiles(table, q)
        assert median.tolist() == np.median(table, axis=0).tolist()
        assert percentile.tolist() == np.percentile(table, q, axis=0).tolist()
    ints = table[:, :2].astype(np.int64)
    median, p90 = column_quantiles(ints, 90)
    assert median.tolist() == np.median(ints, axis=0).tolist()
    assert p90.tolist() == np.percentile(ints, 90, axis=0).tolist()


@pytest.mark.parametrize("seed", range(20))
def test_median_is_numpy_median(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 500))
    for values in (rng.integers(0, 3, n), rng.integers(-5, 5, n).astype(np.int8),
                   rng.integers(0, 10**12, n), np.repeat(rng.integers(0, 4, 4), n),
                   rng.normal(0, 1, n), rng.integers(0, 2**16, n).astype(np.uint16)):
        got, want = median(values), np.median(values)
        assert got == want and type(got) is np.float64
