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


class Labels:
    """Strings as codes into their distinct values (``categories``): code -1 is a
    missing value (None). Read-only: every method returns new arrays."""

    __slots__ = ("codes", "categories")

    def __init__(self, codes: np.ndarray, categories: np.ndarray | list[str]) -> None:
        self.codes = codes
        self.categories = np.asarray(categories, dtype=object)

    @classmethod
    def of(cls, values: Iterable[str | None] | np.ndarray) -> Labels:
        """Labels of plain strings (None: missing), categories in order of first
        appearance."""
        values = np.asarray(list(values) if not isinstance(values, np.ndarray) else values,
                            dtype=object)
        missing = np.array([v is None for v in values.tolist()], dtype=bool)
        present, categories = factorize(values[~missing].astype(str))
        codes = np.full(values.size, -1, dtype=np.int32)
        codes[~missing] = present
        return cls(codes, categories.astype(object))

    def __len__(self) -> int:
        return int(self.codes.size)

    def __getitem__(self, row: int) -> str | None:
        code = int(self.codes[row])
        return None if code < 0 else str(self.categories[code])

    def __iter__(self) -> Iterator[str | None]:
        return iter(self.strings().tolist())

    def take(self, rows: np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.categories)

    def strings(self) -> np.ndarray:
        """Each row's string as an object array (None where missing)."""
        table = np.append(self.categories, None)
        return table[self.codes]

    def matching(self, pattern: re.Pattern[str]) -> np.ndarray:
        """Boolean per row: does its string match *pattern* (``search``)? Tested once
        per distinct string; a missing value never matches."""
        hit = np.array([bool(pattern.search(c)) for c in self.categories.tolist()]
                       + [False], dtype=bool)
        return hit[self.codes]

    def isin(self, names: Iterable[str]) -> np.ndarray:
        """Boolean per row: is its string one of *names*?"""
        wanted = set(names)
        hit = np.array([c in wanted for c in self.categories.tolist()] + [False], dtype=bool)
        return hit[self.codes]

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


Column = np.ndarray | Labels


class Table(Mapping[str, Any]):
    """Named columns of one length (numpy arrays or Labels), in order."""

    __slots__ = ("_columns", "_length")

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

    @classmethod
    def empty_of(cls, columns: Mapping[str, str]) -> Table:
        """A table without rows, of the columns *columns* (name -> dtype; 'str': Labels)."""
        return cls({c: Labels(np.zeros(0, np.int32), []) if t == "str"
                    else np.zeros(0, dtype=t) for c, t in columns.items()}, 0)

    # Mapping: names -> columns, in order
    def __getitem__(self, name: str) -> Any:
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
        """The column *name*, which holds strings."""
        column = self._columns[name]
        if not isinstance(column, Labels):
            raise TypeError(f"column {name!r} holds {column.dtype}, not strings")
        return column

    def rows(self, at: np.ndarray) -> Table:
        """The rows at positions *at* (integers, in that order) or where a boolean
        mask is True."""
        at = np.asarray(at)
        if at.dtype == bool:
            if at.size != self._length:
                raise ValueError(f"mask of {at.size} rows for a table of {self._length}")
            at = np.flatnonzero(at)
        return Table({n: c.take(at) if isinstance(c, Labels) else c[at]
                      for n, c in self._columns.items()}, int(at.size))

    def with_columns(self, **columns: Column) -> Table:
        """This table with *columns* added or replaced (same length)."""
        return Table(self._columns | columns, self._length)

    def select(self, names: Iterable[str]) -> Table:
        return Table({n: self._columns[n] for n in names}, self._length)

    def records(self) -> Iterator[dict[str, Any]]:
        """Each row as a dict of Python values (for the few rows findings cite)."""
        plain = {n: (c.strings() if isinstance(c, Labels) else c).tolist()
                 for n, c in self._columns.items()}
        for i in range(self._length):
            yield {n: v[i] for n, v in plain.items()}

    def to_pandas(self) -> pd.DataFrame:
        """A DataFrame of the same columns (names as categoricals), sharing the arrays."""
        import pandas as pd

        return pd.DataFrame({n: c.to_pandas() if isinstance(c, Labels) else c
                             for n, c in self._columns.items()},
                            index=pd.RangeIndex(self._length), copy=False)

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
                columns[str(name)] = series.to_numpy(dtype=series.dtype.subtype)
            elif series.dtype.kind in "OSUT" or str(series.dtype) == "str":
                columns[str(name)] = series.to_numpy(dtype=object)
            else:
                columns[str(name)] = series.to_numpy()
        return cls(columns, len(frame))

    def __repr__(self) -> str:
        return f"Table({self._length} rows: {', '.join(self._columns)})"


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) with uniques in order of first appearance, as ``pd.factorize``
    gives them (for values without NaN or None): ``uniques[codes] == values``."""
    values = np.asarray(values)
    if not values.size:
        return np.zeros(0, dtype=np.intp), values[:0]
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.intp)
    rank[order] = np.arange(order.size)
    return rank[inverse.reshape(-1)], uniq[order]


def unique_in_order(values: np.ndarray) -> np.ndarray:
    """The distinct values in order of first appearance (``pd.unique``)."""
    return factorize(values)[1]


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
