"""Moving query results out of SQLite into numpy columns: the loader's fast path.

``read_columns(db, table, columns, where)`` returns one numpy array per requested column.
Each column says what it holds (:class:`Col`), which fixes its dtype and what NULL
becomes, so both ways of reading give the same arrays:

- the fast path (big tables, when the ADBC SQLite driver is installed): the driver steps
  through the rows in C and hands over Arrow record batches of 64k rows; each batch's
  buffers are viewed as numpy arrays and copied straight into arrays preallocated from
  the table's row count bound (``row_bound``). No Python object per row or value, peak
  memory is the final arrays plus one batch, and the GIL is released while SQLite works
  (see below).
- the fallback (small tables, no driver, or values the driver refuses, such as text in
  an integer column): Python's sqlite3 ``fetchall`` into a DataFrame, converted per
  column the same way.

Integer columns other than times are stored in the narrowest integer type that holds
every value (at least ``Col.dtype``): stream ids fit int8/int16, grid sizes int32, and
so on. That halves the memory of a 10-million-kernel report; code doing arithmetic that
could overflow a narrow type converts to int64 first (the loader computes ``blocks``
and ``threads_per_block`` in int64).
"""

from __future__ import annotations

import ctypes
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from gpugap.lazy import LazyNumpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())


class Source(Protocol):
    """What reading needs of an open export (a gpugap.report.database.Database)."""

    path: Path
    conn: sqlite3.Connection
    mmap_bytes: int             # SQLite's mmap_size for its connections (database.py)

    @property
    def uri(self) -> str: ...

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]: ...

    def on_close(self, callback: Callable[[], None]) -> None: ...

# Below this many rows the sqlite3 path is as fast and needs no extra imports.
FAST_MIN_ROWS = 50_000
BATCH_ROWS = 65_536

_WIDER = ("int8", "int16", "int32", "int64")


class Col(NamedTuple):
    """One result column: its name, its SQL expression, and what it holds.

    kind: ``"int"`` (integers; NULL -> ``fill``; stored in the narrowest integer type of
    at least ``dtype`` that holds every value) or ``"float"`` (float64, NULL -> NaN).
    A NamedTuple, not a dataclass: the read-ahead starts before dataclasses and what it
    imports (inspect, ast: milliseconds) are loaded.
    """

    name: str
    sql: str
    kind: str = "int"
    dtype: str = "int64"
    fill: int = 0


def read_rows(db: Source, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
    """Any query (small tables, text columns) as numpy arrays, through sqlite3, each
    column typed by what it holds (as pandas would): integers int64; numbers with NULLs
    or REALs float64 (NULL: NaN); anything else (text, BLOB, all NULL) object. No rows:
    empty int64 columns."""
    rows = db.conn.execute(sql).fetchall()
    if not rows:
        return {c: np.zeros(0, dtype=np.int64) for c in columns}
    return {c: _typed(values) for c, values in zip(columns, zip(*rows, strict=True), strict=True)}


_NUMBERS = frozenset({int, float, type(None)})


def _typed(values: tuple) -> np.ndarray:
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:              # beyond int64: kept as Python ints
            return np.array(values, dtype=object)
    if kinds <= _NUMBERS and kinds != {type(None)}:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def read_columns(db: Source, table: str, columns: list[Col], where: str = "",
                 capacity: int | None = None, fast_from: int | None = None
                 ) -> dict[str, np.ndarray]:
    """``SELECT <columns> FROM table <where>`` as numpy arrays, one per column.

    Every value comes out as its column says, whatever the file holds: an integer
    column's NULLs *and* its values that are not integers (text, BLOB, REAL, infinity)
    become ``Col.fill``, a float column's become NaN. The fast path sees only integer
    and NULL batches (anything else makes it give up); the fallback asks SQLite to type
    each value (``typed_sql``). *capacity*: at most this many rows match *where* (a
    rowid range says so), else the table's row bound. *fast_from*: the fewest rows read
    by the fast path (default FAST_MIN_ROWS; lower where its driver is imported
    anyway: gpugap.report.prefetch)."""
    source = f"FROM {_quote(table)}" + (f" WHERE {where}" if where else "")
    if capacity is None:
        capacity = row_bound(db, table)
    if capacity >= (FAST_MIN_ROWS if fast_from is None else fast_from):
        sql = f"SELECT {', '.join(c.sql for c in columns)} {source}"
        fast = _read_adbc(db, sql, columns, capacity)
        if fast is not None:
            return fast
    return _read_sqlite3(db, typed_sql(columns, source), columns)


def typed_sql(columns: list[Col], source: str) -> str:
    """A SELECT in which each column yields only what it holds: an integer, or (int
    columns) its fill value / (float columns) NULL for anything else."""
    inner = ", ".join(f"{c.sql} AS c{i}" for i, c in enumerate(columns))
    outer = ", ".join(
        f"CASE WHEN typeof(c{i}) = 'integer' THEN c{i} "
        + (f"ELSE {int(c.fill)} END" if c.kind == "int" else "END")
        for i, c in enumerate(columns))
    return f"SELECT {outer} FROM (SELECT {inner} {source})"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


# row_bound trusts max(rowid) up to this many rows; above it, count(*) says.
TRUSTED_ROWID = 1 << 26
MIN_ROW_BYTES = 4          # no table row takes less room in an SQLite file


def row_bound(db: Source, table: str) -> int:
    """At least the number of rows of *table*, cheaply, and never absurdly more: its
    largest rowid (a walk down one side of the B-tree) when rowids are positive, as nsys
    writes them, capped by the rows the file could physically hold; count(*) (which
    reads every page) when rowids are not positive or the bound exceeds TRUSTED_ROWID
    rows (a planted rowid of 2^30 would otherwise reserve gigabytes per column)."""
    t = _quote(table)
    try:
        # Two queries: SQLite answers a lone min() or max() of the rowid from the tree.
        (lo,) = db.conn.execute(f"SELECT min(rowid) FROM {t}").fetchone()
        (hi,) = db.conn.execute(f"SELECT max(rowid) FROM {t}").fetchone()
    except sqlite3.DatabaseError:            # WITHOUT ROWID: count
        lo = None
    if isinstance(lo, int) and isinstance(hi, int) and lo >= 1:
        try:
            physical = max(db.path.stat().st_size // MIN_ROW_BYTES, 1)
        except OSError:
            physical = hi
        bound = min(hi, physical)
        if bound <= TRUSTED_ROWID:
            return int(bound)
    return int(db.rows(f"SELECT count(*) FROM {t}")[0][0])


# --- the fallback: sqlite3 -------------------------------------------------------------

def _read_sqlite3(db: Source, sql: str, columns: list[Col]) -> dict[str, np.ndarray]:
    read = read_rows(db, sql, [c.name for c in columns])
    out = {}
    for col in columns:
        values = read[col.name]
        if col.kind == "float":
            # typed_sql left integers and NULLs (NaN) only
            out[col.name] = values.astype(np.float64)
            continue
        # typed_sql made every value an integer: no NULL, no text, exact in int64.
        out[col.name] = narrow(values.astype(np.int64), np.dtype(col.dtype))
    return out


def narrow(values: np.ndarray, floor: np.dtype) -> np.ndarray:
    """values (int64) in the narrowest integer type of at least *floor* that holds them."""
    if values.size == 0:
        return values.astype(floor)
    return values.astype(_fitting(int(values.min()), int(values.max()), floor), copy=False)


def _fitting(lo: int, hi: int, floor: np.dtype) -> np.dtype:
    for name in _WIDER:
        dt = np.dtype(name)
        if dt.itemsize < floor.itemsize:
            continue
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return dt
    return np.dtype(np.int64)


# --- the fast path: ADBC SQLite driver, Arrow C stream read through ctypes --------------
#
# The driver (C, bundling SQLite) steps through the rows and fills Arrow record batches.
# The batches are taken through the Arrow C stream interface directly with ctypes, whose
# foreign calls release the GIL: while SQLite works, other Python threads run (the
# prefetch reads big tables while the CLI imports pandas; two tables read at once).

class _ArrowSchema(ctypes.Structure):
    pass


class _ArrowArray(ctypes.Structure):
    pass


class _ArrowArrayStream(ctypes.Structure):
    pass


_ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(_ArrowSchema))),
    ("dictionary", ctypes.POINTER(_ArrowSchema)),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowSchema))),
    ("private_data", ctypes.c_void_p)]
_ArrowArray._fields_ = [
    ("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(_ArrowArray))),
    ("dictionary", ctypes.POINTER(_ArrowArray)),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowArray))),
    ("private_data", ctypes.c_void_p)]
_ArrowArrayStream._fields_ = [
    ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_ArrowArrayStream),
                                    ctypes.POINTER(_ArrowSchema))),
    ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_ArrowArrayStream),
                                  ctypes.POINTER(_ArrowArray))),
    ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(_ArrowArrayStream))),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_ArrowArrayStream))),
    ("private_data", ctypes.c_void_p)]


class _Unsupported(Exception):
    """A batch the fast path does not convert (e.g. text or REAL in an integer column), or
    an error of the driver: the query is read again through sqlite3, which converts it
    like any other (or reports the file as unreadable)."""


_local = threading.local()


def _adbc_connection(db: Source):
    """One ADBC connection per database and thread (connections are not shared)."""
    import adbc_driver_manager
    import adbc_driver_sqlite

    key = id(db)
    conns = getattr(_local, "conns", None)
    if conns is None:
        conns = _local.conns = {}
    entry = conns.get(key)
    if entry is None or entry[0] is not db:
        database = adbc_driver_sqlite.connect(db.uri)
        entry = (db, database, adbc_driver_manager.AdbcConnection(database))
        conns[key] = entry
        db.on_close(lambda: _close_adbc(conns, key))
        if db.mmap_bytes:
            _map(entry[2], db.mmap_bytes)
    return entry[2]


def _map(connection, size: int) -> None:
    """SQLite's mmap_size on a fast-reader connection; where it fails, the file is read
    page by page as without it."""
    import adbc_driver_manager

    statement = adbc_driver_manager.AdbcStatement(connection)
    try:
        statement.set_sql_query(f"PRAGMA mmap_size = {int(size)}")
        handle, _ = statement.execute_query()
        handle.release()
    except adbc_driver_manager.Error:
        pass
    finally:
        statement.close()


def _close_adbc(conns: dict, key: int) -> None:
    entry = conns.pop(key, None)
    if entry is not None:
        entry[2].close()
        entry[1].close()


def adbc_available() -> bool:
    try:
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_sqlite  # noqa: F401
    except ImportError:
        return False
    return True


def _read_adbc(db: Source, sql: str, columns: list[Col], capacity: int
               ) -> dict[str, np.ndarray] | None:
    if not adbc_available():
        return None
    import adbc_driver_manager

    try:
        conn = _adbc_connection(db)
        statement = adbc_driver_manager.AdbcStatement(conn)
    except adbc_driver_manager.Error:
        return None
    read = None
    try:
        statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        statement.set_sql_query(sql)
        handle, _ = statement.execute_query()
        try:
            read = _fill(_ArrowArrayStream.from_address(handle.address), columns, capacity)
        finally:
            handle.release()
    except (adbc_driver_manager.Error, _Unsupported, UnicodeDecodeError):
        read = None
    finally:
        try:
            statement.close()
        except adbc_driver_manager.Error:
            # ADBC before 1.13 can say only here, finalizing the statement, that a page of
            # the file was unreadable ("database disk image is malformed"): the rows read
            # are not to be trusted, and the sqlite3 reader says what is wrong.
            read = None
    return read


def _fill(stream: _ArrowArrayStream, columns: list[Col], capacity: int
          ) -> dict[str, np.ndarray]:
    ref = ctypes.byref(stream)
    schema = _ArrowSchema()
    if stream.get_schema(ref, ctypes.byref(schema)) != 0:
        raise _Unsupported(_last_error(stream))
    try:
        if schema.n_children != len(columns):
            raise _Unsupported("unexpected number of columns")
        formats = [schema.children[i].contents.format.decode() for i in range(len(columns))]
    finally:
        schema.release(ctypes.byref(schema))
    out: list[np.ndarray] = []
    n = 0
    batch = _ArrowArray()
    while True:
        if stream.get_next(ref, ctypes.byref(batch)) != 0:      # the GIL is released here
            raise _Unsupported(_last_error(stream))
        if not batch.release:                                    # end of stream
            break
        try:
            if not out:
                # numpy's first use here: the read-ahead gets its first rows while the
                # main thread imports numpy (gpugap.lazy).
                out = _allocate(columns, capacity)
            length = batch.length
            if n + length > capacity:          # rows appeared since count(*): never for a file
                raise _Unsupported("more rows than counted")
            for i, col in enumerate(columns):
                values = _batch_values(batch.children[i].contents, formats[i], col)
                target = out[i]
                if col.kind == "int" and target.dtype != np.int64 and length:
                    lo, hi = int(values.min()), int(values.max())
                    info = np.iinfo(target.dtype)
                    if not (info.min <= lo and hi <= info.max):
                        # Wider: only the rows read so far are copied (the rest of the
                        # capacity, a bound, stays unwritten and takes no memory).
                        wider = np.empty(capacity, dtype=_fitting(lo, hi, target.dtype))
                        wider[:n] = target[:n]
                        out[i] = target = wider
                target[n:n + length] = values
            n += length
        finally:
            batch.release(ctypes.byref(batch))
    if not out:
        out = _allocate(columns, 0)
    result = {}
    for col, arr in zip(columns, out, strict=True):
        arr = arr[:n]
        if n < capacity // 2:              # filtered out most rows: give the memory back
            arr = arr.copy()
        result[col.name] = arr
    return result


def _allocate(columns: list[Col], capacity: int) -> list[np.ndarray]:
    return [np.empty(capacity, dtype=np.float64 if c.kind == "float" else np.dtype(c.dtype))
            for c in columns]


def _last_error(stream: _ArrowArrayStream) -> str:
    message = stream.get_last_error(ctypes.byref(stream))
    return message.decode(errors="replace") if message else "ADBC stream error"


def _buffer(array: _ArrowArray, index: int, dtype, count: int) -> np.ndarray | None:
    address = array.buffers[index]
    if not address or count <= 0:
        return None
    return np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)
                          ).from_address(address), dtype=dtype)


def _batch_values(child: _ArrowArray, fmt: str, col: Col) -> np.ndarray:
    """One column of one batch as a numpy array of its final kind (NULLs replaced)."""
    length, offset = child.length, child.offset
    float_kind = col.kind == "float"
    if fmt == "n" or child.null_count == length:       # all NULL
        return np.full(length, np.nan if float_kind else col.fill,
                       dtype=np.float64 if float_kind else np.int64)
    if fmt == "l":
        values = _buffer(child, 1, np.int64, offset + length)[offset:]
    elif fmt == "g" and float_kind:
        values = _buffer(child, 1, np.float64, offset + length)[offset:]
    else:
        raise _Unsupported(f"column {col.name}: arrow format {fmt}")
    if float_kind:
        values = values.astype(np.float64)
    if child.null_count != 0 and child.buffers[0]:    # -1: not counted; no bitmap: none
        bits = _buffer(child, 0, np.uint8, (offset + length + 7) // 8)
        valid = np.unpackbits(bits, count=offset + length, bitorder="little")[offset:]
        values = np.where(valid.view(bool), values, np.nan if float_kind else col.fill)
    return values
