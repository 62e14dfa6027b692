"""gpugap.report.table: the analysis's pandas-free columns, checked against the loader's
DataFrames of real captures (the Table must hold exactly what the frame holds)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from gpugap.report.table import (
    Labels,
    Table,
    concat,
    distinct,
    factorize,
    first_rows,
    sorted_codes,
    unique_in_order,
)
from gpugap.report.trace import TABLE_NAMES
from tests.conftest import load_report

CAPTURES = ["captures/gemm", "captures/small-graph-node", "captures/ddp-overlap",
            "corpus:jax-host-input"]


@pytest.mark.parametrize("name", CAPTURES)
def test_every_table_holds_its_frames_values(name: str) -> None:
    trace = load_report(name)
    for table_name in TABLE_NAMES:
        frame = trace.osrt if table_name == "osrt" else getattr(trace, table_name)
        table = trace.table(table_name)
        assert table is trace.table(table_name)               # built once
        assert len(table) == len(frame) and table.columns == list(frame.columns)
        back = table.to_pandas()
        for column in frame.columns:
            want, got = frame[column], back[column]
            if isinstance(want.dtype, pd.CategoricalDtype):
                assert isinstance(table[column], Labels)
                assert want.astype(object).tolist() == got.astype(object).tolist()
            else:
                assert np.array_equal(want.to_numpy(), got.to_numpy()), (table_name, column)


def test_rows_labels_and_concat_on_a_real_capture() -> None:
    trace = load_report("captures/gemm")
    api, frame = trace.table("api"), trace.api
    sync = re.compile(r"Synchronize")
    mask = api.labels("name").matching(sync)
    assert mask.tolist() == frame["name"].astype(str).str.contains(sync).tolist()
    assert mask.any()
    picked = api.rows(mask)
    assert picked["start"].tolist() == frame.loc[mask, "start"].tolist()
    assert list(picked.labels("name")) == frame.loc[mask, "name"].astype(str).tolist()
    first = next(picked.records())
    assert first["name"] == picked.labels("name")[0] and first["start"] == picked["start"][0]
    names = sorted(set(api.labels("name")) - {None})
    assert api.labels("name").isin(names[:1]).sum() == (frame["name"] == names[0]).sum()
    both = concat([api.rows(np.arange(3)), picked])
    assert len(both) == 3 + len(picked)
    assert list(both.labels("name")) == (list(api.rows(np.arange(3)).labels("name"))
                                         + list(picked.labels("name")))


def test_labels_of_strings_keep_appearance_order_and_missing_values() -> None:
    # Hand-built: a missing name is rarer in a real export than any test can rely on.
    labels = Labels.of(["b", None, "a", "b"])
    assert labels.categories.tolist() == ["b", "a"]
    assert labels.codes.tolist() == [0, -1, 1, 0]
    assert list(labels) == ["b", None, "a", "b"]
    assert labels.code_of("a") == 1 and labels.code_of("zzz") == -2
    assert labels.matching(re.compile("a|b")).tolist() == [True, False, True, True]


def test_a_table_refuses_columns_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        Table({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(ValueError, match="mask of 1 rows"):
        Table({"a": np.zeros(2)}).rows(np.array([True]))
    with pytest.raises(KeyError, match="no table"):
        load_report("captures/gemm").table("nope")
    assert Table.empty_of({"start": "int64", "name": "str"}).empty


@pytest.mark.parametrize("name", ["captures/gemm", "captures/ddp-overlap"])
def test_factorize_is_pandas_order_of_appearance(name: str) -> None:
    api = load_report(name).api
    for column in ("gtid", "corr", "start"):
        values = api[column].to_numpy()
        codes, uniques = factorize(values)
        want_codes, want_uniques = pd.factorize(values)
        assert codes.tolist() == want_codes.tolist()
        assert uniques.tolist() == want_uniques.tolist()
        assert unique_in_order(values).tolist() == pd.unique(values).tolist()
    names = api["name"].astype(str).to_numpy(dtype=object)
    assert factorize(names)[1].tolist() == pd.factorize(names)[1].tolist()


def test_distinct_is_numpy_unique() -> None:
    rng = np.random.default_rng(5)
    for values in (np.zeros(0, np.int32), np.full(9, 3, np.int32),
                   rng.integers(-4, 9, 50).astype(np.int32), rng.integers(0, 2**40, 50),
                   np.array([2.5, 1.0, 2.5])):
        got, want = distinct(values), np.unique(values)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("name", ["captures/gemm", "captures/ddp-overlap"])
def test_sorted_codes_are_numpy_unique(name: str) -> None:
    """sorted_codes and first_rows give np.unique's answers: on a real report's
    columns (dense thread ids and correlation ids, sparse start times) and on values
    spread wider than their count (a grid key, 64-bit times)."""
    api = load_report(name).api
    rng = np.random.default_rng(7)
    columns = [api[c].to_numpy() for c in ("gtid", "corr", "start")] + [
        rng.integers(0, 5, 300) * 1_000_003 ** 2, rng.integers(-3, 9, 40).astype(np.int8),
        np.zeros(0, np.int64), np.array([2.5, 1.0, 2.5])]
    for values in columns:
        uniq, inverse = sorted_codes(values)
        want, want_first, want_inverse = np.unique(values, return_index=True,
                                                   return_inverse=True)
        assert uniq.dtype == want.dtype and uniq.tolist() == want.tolist()
        assert inverse.tolist() == want_inverse.reshape(-1).tolist()
        assert first_rows(inverse, uniq.size).tolist() == want_first.tolist()
