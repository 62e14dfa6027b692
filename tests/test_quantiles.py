"""gpugap.quantiles gives numpy's medians and percentiles, number for number."""

from __future__ import annotations

import numpy as np
import pytest

from gpugap.quantiles import column_quantiles


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
