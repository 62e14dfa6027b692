"""Columns of numpy arrays: how the analysis reads a report's events, without pandas.

A :class:`Table` is an ordered set of named columns of one length: numpy arrays, or
:class:`Labels` for names (kernel, API, NVTX names: a few distinct strings over millions
of rows, held as integer codes into the distinct ones, as pandas' categoricals are).
Selecting rows (``rows``) gives a new Table; a column is the array itself, so
``table["start"]`` is an int64 ndarray, never a copy.

Why not pandas: importing it costs more than analysing a small report (0.5-0.6 s of
CPU on a 2-core VM, docs/performance.md), and its per-call overheads add up over the
rules' few hundred calls. The analysis core reads Tables; users keep DataFrames
(``Table.to_pandas``, ``Trace.kernels`` and friends), built when asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def code_dtype(categories: int) -> np.dtype:
    """The narrowest integer type for codes into *categories* strings (and -1), as
    pandas' categoricals choose it: int8 below 127, so that ``codes + 1`` still fits.
    A 10-million-kernel report's three name columns take 30 MB, not 120."""
    for dtype, top in ((np.int8, 127), (np.int16, 32767)):
        if categories < top:
            return np.dtype(dtype)
    return np.dtype(np.int32)


class Labels:
    """Strings as codes into their distinct values (``categories``): code -1 is a
    missing value (None); codes of the narrowest type (``code_dtype``). Read-only: every
    method returns new arrays."""

    __slots__ = ("codes", "categories")

    def __init__(self, codes: np.ndarray, categories: np.ndarray | list[str]) -> None:
        self.codes = codes
        self.categories = np.asarray(categories, dtype=object)

    @classmethod
    def of(cls, values: Iterable[str | None] | np.ndarray) -> Labels:
        """Labels of plain strings (None or NaN: missing; anything else as ``str``),
        categories in order of first appearance."""
        values = values.tolist() if isinstance(values, np.ndarray) else list(values)
        # A dict hashes each string once, O(n) as pandas' factorize; sorting them
        # (np.unique) compares Python strings, 3-5x slower on a report's NVTX ranges.
        distinct = dict.fromkeys(values)
        if all(type(v) is str for v in distinct):
            # Only strings (names, domains): the dicts built and read by C loops, not a
            # Python step per row (twice as fast).
            number = {v: i for i, v in enumerate(distinct)}
            codes = np.fromiter(map(number.__getitem__, values), dtype=np.int32,
                                count=len(values))
            return cls(codes.astype(code_dtype(len(number))), list(number))
        index: dict[str, int] = {}
        codes = np.fromiter((-1 if v is None or v != v
                             else index.setdefault(v if isinstance(v, str) else str(v),
                                                   len(index))
                             for v in values), dtype=np.int32, count=len(values))
        return cls(codes.astype(code_dtype(len(index))), list(index))

    def __len__(self) -> int:
        return int(self.codes.size)

    def __getitem__(self, row: int) -> str | None:
        code = int(self.codes[row])
        return None if code < 0 else str(self.categories[code])

    def __iter__(self) -> Iterator[str | None]:
        return iter(self.strings().tolist())

    def take(self, rows: np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.categories)

    def tolist(self) -> list[str | None]:
        return self.strings().tolist()

    def strings(self) -> np.ndarray:
        """Each row's string as an object array (None where missing)."""
        table = np.append(self.categories, None)
        return np.take(table, self.codes)     # (take: faster than indexing by int8 codes)

    def matching(self, pattern: re.Pattern[str]) -> np.ndarray:
        """Boolean per row: does its string match *pattern* (``search``)? Tested once
        per distinct string; a missing value never matches."""
        hit = np.array([bool(pattern.search(c)) for c in self.categories.tolist()]
                       + [False], dtype=bool)
        return np.take(hit, self.codes)

    def isin(self, names: Iterable[str]) -> np.ndarray:
        """Boolean per row: is its string one of *names*?"""
        wanted = set(names)
        hit = np.array([c in wanted for c in self.categories.tolist()] + [False], dtype=bool)
        return np.take(hit, self.codes)

    def code_of(self, name: str) -> int:
        """The code of *name*, -2 when no row holds it (never equal to a code)."""
        found = np.flatnonzero(self.categories == name)
        return int(found[0]) if found.size else -2

    def to_pandas(self) -> pd.Categorical:
        import pandas as pd

        return pd.Categorical.from_codes(self.codes, categories=self.categories,
                                         validate=False)

    def __repr__(self) -> str:
        return f"Labels({len(self)} rows, {self.categories.size} distinct)"


class SparseInts:
    """An integer column that mostly holds one value (``fill``): only the other values
    are stored, with their positions (increasing). A 10-million-kernel report of a few
    CUDA graph kernels keeps a few of its graph node ids, not 80 MB of -1."""

    __slots__ = ("length", "positions", "values", "fill")

    def __init__(self, length: int, positions: np.ndarray, values: np.ndarray,
                 fill: int) -> None:
        self.length, self.positions, self.values, self.fill = length, positions, values, fill

    @classmethod
    def of(cls, dense: np.ndarray, fill: int) -> SparseInts:
        positions = np.flatnonzero(dense != fill)
        return cls(int(dense.size), positions, dense[positions], fill)

    def __len__(self) -> int:
        return self.length

    def dense(self) -> np.ndarray:
        out = np.full(self.length, self.fill, dtype=self.values.dtype)
        out[self.positions] = self.values
        return out

    def take(self, rows: np.ndarray) -> SparseInts:
        return SparseInts.of(self.dense()[rows], self.fill)

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.arrays.SparseArray(self.dense(), fill_value=self.fill)


Column = np.ndarray | Labels | SparseInts


def as_labels(column: Labels | np.ndarray) -> Labels:
    """A column of names as Labels: as it is, or plain strings labelled (Labels.of)."""
    return column if isinstance(column, Labels) else Labels.of(column)


class Table(Mapping[str, Any]):
    """Named columns of one length (numpy arrays or Labels), in order."""

    __slots__ = ("_columns", "_length", "_labels")

    def __init__(self, columns: Mapping[str, Column], length: int | None = None) -> None:
        self._columns: dict[str, Column] = dict(columns)
        sizes = {len(c) for c in self._columns.values()}
        if length is None:
            if len(sizes) > 1:
                raise ValueError(f"columns of different lengths: {sorted(sizes)}")
            length = sizes.pop() if sizes else 0
        elif sizes - {length}:
            raise ValueError(f"columns of {sorted(sizes)} rows in a table of {length}")
        self._length = int(length)
        self._labels: dict[str, Labels] = {}       # object columns read as Labels

    @classmethod
    def empty_of(cls, columns: Mapping[str, str]) -> Table:
        """A table without rows, of the columns *columns* (name -> dtype; 'str': an
        object column)."""
        return cls({c: np.zeros(0, dtype=object if t == "str" else t)
                    for c, t in columns.items()}, 0)

    # Mapping: names -> columns, in order
    def __getitem__(self, name: str) -> Any:
        """The column *name*: a numpy array, or Labels for strings (a sparse column
        comes densified: ``column`` gives it as stored)."""
        column = self._columns[name]
        return column.dense() if isinstance(column, SparseInts) else column

    def column(self, name: str) -> Column:
        """The column *name* as stored (SparseInts stays sparse)."""
        return self._columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        """Rows (as a DataFrame's len), not columns."""
        return self._length

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def empty(self) -> bool:
        return self._length == 0

    def labels(self, name: str) -> Labels:
        """The column *name*, which holds strings, as Labels (a column of str objects
        is labelled on first use)."""
        column = self._columns[name]
        if isinstance(column, Labels):
            return column
        if column.dtype != object:
            raise TypeError(f"column {name!r} holds {column.dtype}, not strings")
        found = self._labels.get(name)
        if found is None:
            found = self._labels[name] = Labels.of(column)
        return found

    def rows(self, at: np.ndarray) -> Table:
        """The rows at positions *at* (integers, in that order) or where a boolean
        mask is True."""
        at = np.asarray(at)
        if at.dtype == bool:
            if at.size != self._length:
                raise ValueError(f"mask of {at.size} rows for a table of {self._length}")
            at = np.flatnonzero(at)
        return Table({n: c[at] if isinstance(c, np.ndarray) else c.take(at)
                      for n, c in self._columns.items()}, int(at.size))

    def with_columns(self, **columns: Column) -> Table:
        """This table with *columns* added or replaced (same length)."""
        return Table(self._columns | columns, self._length)

    def select(self, names: Iterable[str]) -> Table:
        return Table({n: self._columns[n] for n in names}, self._length)

    def records(self) -> Iterator[dict[str, Any]]:
        """Each row as a dict of Python values (for the few rows findings cite)."""
        plain = {n: (c.strings() if isinstance(c, Labels) else self[n]).tolist()
                 for n, c in self._columns.items()}
        for i in range(self._length):
            yield {n: v[i] for n, v in plain.items()}

    def to_pandas(self) -> pd.DataFrame:
        """A DataFrame of the same columns (names as categoricals), sharing the arrays."""
        import pandas as pd

        index = pd.RangeIndex(self._length)
        return pd.DataFrame({n: (c if c.dtype != object  # object stays object (not str)
                                 else pd.Series(c, index=index, dtype=object, copy=False))
                             if isinstance(c, np.ndarray) else c.to_pandas()
                             for n, c in self._columns.items()}, index=index, copy=False)

    @classmethod
    def from_pandas(cls, frame: pd.DataFrame) -> Table:
        """The columns of *frame* as arrays (views where pandas holds them as such):
        categoricals as Labels, strings (object) as object arrays, sparse columns
        densified."""
        import pandas as pd

        columns: dict[str, Column] = {}
        for name in frame.columns:
            series = frame[name]
            if isinstance(series.dtype, pd.CategoricalDtype):
                columns[str(name)] = Labels(series.array.codes,
                                            np.asarray(series.cat.categories, dtype=object))
            elif isinstance(series.dtype, pd.SparseDtype):
                columns[str(name)] = SparseInts(
                    len(series), series.array.sp_index.indices.astype(np.int64),
                    series.array.sp_values, int(series.dtype.fill_value))
            elif series.dtype.kind in "OSUT" or str(series.dtype) == "str":
                columns[str(name)] = series.to_numpy(dtype=object)
            else:
                columns[str(name)] = series.to_numpy()
        return cls(columns, len(frame))

    def __repr__(self) -> str:
        return f"Table({self._length} rows: {', '.join(self._columns)})"


# factorize numbers integers through an array over their range where it is no longer
# than their count, or than this (a few devices, phases or ranges): no sort, O(n) as
# pandas' hashing (a sort takes ten times as long on a million kernels) ...
DENSE_RANGE = 1 << 16
# ... and looks for each value's first row in this many rows first, then in twice as
# many, until it has found them all: values recur early (a million kernels in a few
# groups), so the search seldom reads far, and never more than twice the rows there are.
_FIRST_ROWS = 1 << 12


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) with uniques in order of first appearance, as ``pd.factorize``
    gives them (for values without NaN or None): ``uniques[codes] == values``."""
    values = np.asarray(values)
    if not values.size:
        return np.zeros(0, dtype=np.intp), values[:0]
    # Runs of equal values (a process's kernels, a graph launch's, one after another)
    # are numbered as their first values are: what follows sees one value per run.
    change = values[1:] != values[:-1]
    if np.count_nonzero(change) * 2 < values.size:
        starts = np.flatnonzero(np.r_[True, change])
        codes, uniques = _factorize_distinct(values[starts])
        return np.repeat(codes, np.diff(np.r_[starts, values.size])), uniques
    return _factorize_distinct(values)


def _factorize_distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """factorize of values (at least one) without looking for runs."""
    if values.dtype.kind in "iu":
        lo, hi = int(values.min()), int(values.max())
        if hi - lo + 1 <= max(values.size, DENSE_RANGE):
            return _factorize_dense(values, lo, hi - lo + 1)
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.intp)
    rank[order] = np.arange(order.size)
    return rank[inverse.reshape(-1)], uniq[order]


def _factorize_dense(values: np.ndarray, lo: int, span: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """factorize of integers in [lo, lo + span), through an array over the range."""
    offset = np.subtract(values, lo, dtype=np.int64)
    n_distinct = int(np.count_nonzero(np.bincount(offset, minlength=span)))
    first = np.full(span, values.size, dtype=np.intp)     # each value's first row
    searched = 0
    while searched < values.size:
        stop = min(values.size, max(2 * searched, _FIRST_ROWS))
        np.minimum.at(first, offset[searched:stop], np.arange(searched, stop))
        searched = stop
        if np.count_nonzero(first < values.size) == n_distinct:
            break
    present = np.flatnonzero(first < values.size)
    in_order = present[np.argsort(first[present])]        # first rows differ: no ties
    code_of = np.empty(span, dtype=np.intp)
    code_of[in_order] = np.arange(in_order.size)
    return code_of[offset], (in_order + lo).astype(values.dtype)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (``np.unique``); integers of a small range (devices,
    streams) counted over it instead of sorted, and one value (one device) read from
    their min and max."""
    values = np.asarray(values)
    if not values.size or values.dtype.kind not in "iu":
        return np.unique(values)
    lo, hi = int(values.min()), int(values.max())
    if lo == hi:
        return values[:1].copy()
    if hi - lo < DENSE_RANGE:
        return (np.flatnonzero(np.bincount(values - lo)) + lo).astype(values.dtype)
    return np.unique(values)


def sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values sorted, each value's index among them, int64): what
    ``np.unique(values, return_inverse=True)`` gives for 1-D values, without sorting
    them all. Integers of a range no longer than their count (or DENSE_RANGE) are
    counted over it; others hashed (numpy's ``unique_values``), only the distinct ones
    sorted, each value then found among them. (A report's keys, kernels by name and
    grid, string ids, take a few hundred values among a million.)"""
    x = np.asarray(values).reshape(-1)
    if not x.size:
        return x.copy(), np.zeros(0, dtype=np.int64)
    if x.dtype.kind not in "iu":
        uniq, inverse = np.unique(x, return_inverse=True)
        return uniq, inverse.reshape(-1).astype(np.int64)
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < max(x.size, DENSE_RANGE):
        offset = np.subtract(x, lo, dtype=np.int64)
        present = np.bincount(offset, minlength=hi - lo + 1) > 0
        return ((np.flatnonzero(present) + lo).astype(x.dtype),
                (np.cumsum(present) - 1)[offset])
    unique_values = getattr(np, "unique_values", np.unique)     # numpy < 2: sorted
    uniq = np.sort(unique_values(x))
    return uniq, np.searchsorted(uniq, x).astype(np.int64)


def first_rows(codes: np.ndarray, count: int) -> np.ndarray:
    """For each of *count* codes (each occurring in *codes*), the index of its first
    row: ``np.unique``'s ``return_index`` of the values the codes stand for."""
    first = np.full(count, codes.size, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(codes.size, dtype=np.int64))
    return first


def descending(values: np.ndarray) -> np.ndarray:
    """The order that sorts *values* (numbers or bools, no NaN) largest first, as pandas'
    ``sort_values(ascending=False)`` gives it, ties included (its nargsort: a quicksort
    of the reversed values, reversed)."""
    backwards = np.arange(values.size)[::-1]
    return backwards[values[::-1].argsort(kind="quicksort")][::-1]


def unique_in_order(values: np.ndarray) -> np.ndarray:
    """The distinct values in order of first appearance (``pd.unique``)."""
    return factorize(values)[1]


def inner_join(left: list[np.ndarray], right: list[np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of rows (left row, right row) whose keys are equal (keys: a list of
    integer columns on each side), as an inner ``pd.merge`` orders them: by left row,
    then right row."""
    n = left[0].size
    both = np.concatenate([np.stack([np.asarray(k, dtype=np.int64) for k in left], axis=1),
                           np.stack([np.asarray(k, dtype=np.int64) for k in right], axis=1)])
    if not both.size:
        z = np.zeros(0, dtype=np.intp)
        return z, z
    _, code = np.unique(both, axis=0, return_inverse=True)
    code = code.reshape(-1)
    left_code, right_code = code[:n], code[n:]
    order = np.argsort(right_code, kind="stable")
    grouped = right_code[order]
    lo = np.searchsorted(grouped, left_code, side="left")
    counts = np.searchsorted(grouped, left_code, side="right") - lo
    left_rows = np.repeat(np.arange(n), counts)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return left_rows, order[np.repeat(lo, counts) + within]


def concat(tables: list[Table]) -> Table:
    """Rows of *tables* one after another (same columns; Labels merged by string)."""
    if not tables:
        raise ValueError("nothing to concatenate")
    if len(tables) == 1:
        return tables[0]
    out: dict[str, Column] = {}
    for name in tables[0].columns:
        parts = [t[name] for t in tables]
        if isinstance(parts[0], Labels):
            out[name] = _concat_labels(parts)
        elif any(isinstance(p, Labels) for p in parts):
            out[name] = _concat_labels([p if isinstance(p, Labels) else Labels.of(p)
                                        for p in parts])
        else:
            out[name] = np.concatenate(parts)
    return Table(out, sum(len(t) for t in tables))


def _concat_labels(parts: list[Labels]) -> Labels:
    categories: list[str] = []
    index: dict[str, int] = {}
    codes = []
    for part in parts:
        remap = np.empty(part.categories.size + 1, dtype=np.int32)
        for i, c in enumerate(part.categories.tolist()):
            remap[i] = index.setdefault(c, len(index))
            if remap[i] == len(categories):
                categories.append(c)
        remap[-1] = -1
        codes.append(remap[part.codes])
    return Labels(np.concatenate(codes), categories)
