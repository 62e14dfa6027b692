"""Read-only access to an nsys SQLite export: validation, schema discovery, queries.

The file is opened with ``mode=ro&immutable=1``: SQLite neither writes nor locks it, so a
report on a read-only mount or owned by someone else reads the same, and stays
byte-identical. Tables and columns are discovered, never assumed: nsys exports lazily
(a table exists only when it has rows) and its schema changes between versions.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import struct
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from gpugap.lazy import LazyNumpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())

from gpugap.errors import ReportError
from gpugap.files import kind_of
from gpugap.report import compressed
from gpugap.report.reader import read_columns, read_rows, row_bound
from gpugap.report.validate import Problems, as_int, as_text, decode_text
from gpugap.text import one_line, short_path

SQLITE_MAGIC = b"SQLite format 3\x00"
# SQLite's unix VFS opens a database by its full path (symbolic links resolved, so a
# short symlink does not help) and gives up on one of 512 bytes or more (MAX_PATHNAME).
SQLITE_MAX_PATH = 512
# What reading a damaged file raises: SQLite's errors, and a UnicodeDecodeError when
# Python decodes an error message that quotes invalid UTF-8 (a malformed schema naming a
# table whose name is not UTF-8). Both mean "unreadable": one line, exit 2.
UNREADABLE = (sqlite3.DatabaseError, UnicodeDecodeError)
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"
# Interpreters whose first argument that is not an option is the program (python's
# options that take a value skip it: -X dev, -W error).
_INTERPRETERS = ("python", "pypy")
_VALUE_OPTIONS = ("-X", "-W", "-Q")


def sniff(path: Path) -> str:
    """'sqlite', 'nsys-rep', a compression ('xz', 'gzip', 'zstd':
    gpugap.report.compressed) or 'unknown' from the first bytes; ReportError if
    unreadable or not a regular file (a FIFO or a device is refused, never read: no
    hang)."""
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        raise ReportError(f"{path}: no such file; check the path") from None
    except OSError as exc:              # e.g. a name longer than the filesystem allows
        raise ReportError(f"{exc.strerror}: {short_path(path)}; check the path") from None
    if is_dir:
        raise ReportError(f"{path} is a directory; pass a .nsys-rep or .sqlite report file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror}); check its permissions") from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise ReportError(f"{path} is {kind_of(mode)}, not a report; pass a .nsys-rep "
                              "or .sqlite report file")
        try:
            head = fh.read(100)
        except OSError as exc:
            raise ReportError(f"{path}: cannot read ({exc.strerror}); check its "
                              "permissions") from None
    if not head:
        raise ReportError(f"{path} is empty; re-export the report "
                          "(nsys export --type sqlite REPORT.nsys-rep)")
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(NSYS_REP_MAGIC):
        return "nsys-rep"
    return compressed.kind_of(head) or "unknown"


def _reason(exc: BaseException) -> str:
    """An SQLite error on one line (messages about a malformed schema quote the schema's
    SQL, newlines included); a UnicodeDecodeError said in words."""
    if isinstance(exc, UnicodeDecodeError):
        return "an SQLite error about a name that is not valid UTF-8"
    return one_line(exc)


def quote_id(identifier: str) -> str:
    """An SQL identifier, quoted (so that a name is never read as a string literal)."""
    return '"' + identifier.replace('"', '""') + '"'


# A report under this size is read through memory its connections map (SQLite's
# mmap_size) rather than a read() call per page: a tenth of a table scan's time. The
# pages it maps count in the process's resident memory (as the file's, not its own), so
# a bigger report (a million kernels with their API and OS calls: 300 MB; ten million:
# 3 GB) is read page by page. It is opened immutable: nothing changes it. A table
# scanned whole for a few of its rows (NVTX_EVENTS beside nsys's GIL trace: 36 MB for a
# hundred ranges) is read page by page too (``mapped=False``): its pages would stay in
# the process's memory for nothing, and read() costs a scan no more than the map does.
MMAP_MAX_BYTES = 256 << 20


def _check_not_truncated(path: Path) -> int:
    """Compare the page count in the SQLite header with the file size: a cheap check
    that catches a copy that stopped half-way before any query fails obscurely. Returns
    the size."""
    with path.open("rb") as fh:
        header = fh.read(100)
        size = os.fstat(fh.fileno()).st_size
    if len(header) < 100:
        raise ReportError(f"{path} is truncated (shorter than an SQLite header); "
                          "copy or export the report again")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages, valid_for = (struct.unpack(">I", header[o:o + 4])[0]
                                          for o in (24, 28, 92))
    # Header bytes 18-19 are 2 in WAL mode. The report is opened immutable, which reads
    # the main file alone: pages still in the write-ahead log beside it would be missed.
    wal = path.with_name(path.name + "-wal")
    if header[18:20] == b"\x02\x02" and wal.is_file() and wal.stat().st_size > 32:
        raise ReportError(f"{path} is an SQLite database in WAL mode whose data is still "
                          f"in {wal.name} (not checkpointed); checkpoint a copy (sqlite3 "
                          "COPY 'PRAGMA wal_checkpoint(TRUNCATE)', with its -wal beside "
                          "it) or export the report again")
    # The in-header page count is trustworthy only when written by SQLite >= 3.7.0,
    # which also records the change counter it belongs to.
    if n_pages and change_counter == valid_for and size < n_pages * page_size:
        raise ReportError(f"{path} is truncated ({size} of {n_pages * page_size} bytes); "
                          "copy or export the report again")
    return size


def program_of(capture: dict[str, str]) -> str | None:
    """The program nsys launched (META_DATA_CAPTURE): its command's name and, for an
    interpreter, the script or module it ran ('python3 train.py', 'python3 -m pkg').
    Its other arguments are left out: ranks may be told apart by them (--local_rank=1,
    an output file per rank)."""
    command = capture.get("PROCESS_0:COMMAND")
    if not command:
        return None
    name = Path(command).name
    if not name.startswith(_INTERPRETERS):
        return name
    arguments = []
    i = 0
    while f"PROCESS_0:ARGUMENT_{i}" in capture:
        arguments.append(capture[f"PROCESS_0:ARGUMENT_{i}"])
        i += 1
    skip = False
    for j, argument in enumerate(arguments):
        if skip:
            skip = False
        elif argument in ("-m", "-c"):
            return f"{name} {argument} {arguments[j + 1] if j + 1 < len(arguments) else ''}"
        elif argument in _VALUE_OPTIONS:
            skip = True
        elif not argument.startswith("-"):
            return f"{name} {argument}"
    return name



class Database:
    """A validated, read-only nsys SQLite export; *mapped*: read through memory its
    connections map, where the report is small enough (MMAP_MAX_BYTES)."""

    def __init__(self, path: Path, *, mapped: bool = True) -> None:
        self.path = path
        kind = sniff(path)
        if kind != "sqlite":
            raise ReportError(f"{path} is not an SQLite file"
                              + (" (it is an .nsys-rep: give it the .nsys-rep extension)"
                                 if kind == "nsys-rep" else "")
                              + "; pass an nsys report (.nsys-rep) or its SQLite export")
        size = _check_not_truncated(path)
        self.mmap_bytes = size if mapped and size < MMAP_MAX_BYTES else 0
        self._on_close: list = []   # e.g. the fast reader's connections
        uri = f"file:{quote(self._openable_path(path))}?mode=ro&immutable=1"
        self.uri = uri
        self._columns: dict[str, tuple[str, ...]] = {}
        self._types: dict[str, dict[str, str]] = {}
        # Problems found while reading (gpugap.report.validate.Problems): the loader
        # turns them into ReportInfo.warnings.
        self.problems = Problems()
        try:
            self._open(uri)
        except BaseException:
            if hasattr(self, "conn"):
                self.conn.close()
            self._closed()          # e.g. the hard link made for a long path
            raise

    def _open(self, uri: str) -> None:
        try:
            self.conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self.conn.text_factory = decode_text
            if self.mmap_bytes:
                self.conn.execute(f"PRAGMA mmap_size = {self.mmap_bytes}")
            names = self.conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        except UNREADABLE as exc:
            raise ReportError(f"{self.path} is corrupt ({_reason(exc)}); copy or export "
                              "the report again") from None
        self.tables: frozenset[str] = frozenset(n for (n,) in names if isinstance(n, str))
        self._validate()

    def _openable_path(self, path: Path) -> str:
        """A path SQLite can open: the report's own, or, where its full path is too long
        for SQLite, a hard link to it in the temporary directory (same file, no copy;
        removed on close). Neither changes the report."""
        full = os.path.realpath(path)
        if len(os.fsencode(full)) < SQLITE_MAX_PATH:
            return full
        import tempfile  # here: only for paths too long for SQLite (start-up)

        link_dir = tempfile.mkdtemp(prefix="gpugap-report-")
        link = os.path.join(link_dir, "report.sqlite")
        try:
            os.link(full, link)
        except OSError:
            os.rmdir(link_dir)
            raise ReportError(
                f"SQLite cannot open a path of {len(os.fsencode(full))} bytes (its limit is "
                f"{SQLITE_MAX_PATH}) and the report could not be hard-linked to a shorter "
                f"one: move it to a shorter path, or link it (ln REPORT /tmp/r.sqlite) on "
                f"its own filesystem: {path}") from None

        def unlink() -> None:
            os.unlink(link)
            os.rmdir(link_dir)
        self._on_close.append(unlink)
        return link

    def _validate(self) -> None:
        if not self.tables:
            raise ReportError(f"{self.path} is an empty SQLite database, not an nsys export; "
                              "export the report with nsys export --type sqlite")
        kernel_cols = self.columns("CUPTI_ACTIVITY_KIND_KERNEL")
        if "_id_" in kernel_cols or "CUPTI_ACTIVITY_KIND_CDP_KERNEL" in self.tables:
            raise ReportError(f"{self.path} is an nvprof database, not an nsys export; "
                              "profile with nsys (nsys profile -t cuda,nvtx ...)")
        markers = {"StringIds", "META_DATA_EXPORT", "EXPORT_META_DATA", "ANALYSIS_DETAILS"}
        if "StringIds" not in self.tables or not (markers - {"StringIds"}) & self.tables:
            raise ReportError(f"{self.path} is an SQLite database but not an nsys export "
                              "(no StringIds/META_DATA_EXPORT tables); pass a report made "
                              "by nsys export --type sqlite")

    def close(self) -> None:
        self.conn.close()
        self._closed()

    def _closed(self) -> None:
        for callback in reversed(self._on_close):
            callback()
        self._on_close.clear()

    def on_close(self, callback) -> None:
        """Call *callback* when the database is closed."""
        self._on_close.append(callback)

    def has(self, table: str, *columns: str) -> bool:
        if table not in self.tables:
            return False
        have = self.columns(table)
        return all(c in have for c in columns)

    def has_rowid(self, table: str) -> bool:
        """Whether *table* has rowids (not a WITHOUT ROWID table, nor a view)."""
        try:
            self.conn.execute(f"SELECT rowid FROM {quote_id(table)} LIMIT 0")
        except sqlite3.Error:
            return False
        return True

    def columns(self, table: str) -> tuple[str, ...]:
        if table not in self._columns:
            if table not in self.tables:
                self._columns[table], self._types[table] = (), {}
            else:
                rows = self._execute("SELECT name, type FROM pragma_table_info(?)", (table,))
                names = [(n, as_text(t) or "") for n, t in rows if isinstance(n, str)]
                self._columns[table] = tuple(n for n, _ in names)
                self._types[table] = dict(names)
        return self._columns[table]

    def declared_type(self, table: str, column: str) -> str:
        """The column's declared type ('INTEGER', 'TEXT', ...; '' when none)."""
        self.columns(table)
        return self._types.get(table, {}).get(column, "")

    def _execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except UNREADABLE as exc:
            raise self.unreadable(exc) from None

    def unreadable(self, exc: BaseException) -> ReportError:
        return ReportError(f"{self.path} could not be read ({_reason(exc)}); it may be "
                           "corrupt: copy or export the report again")

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self._execute(sql, params)

    def frame(self, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
        """Run *sql* and return its result as numpy arrays named *columns* (integers
        int64, numbers with NULLs float64 with NaN, anything else object: see
        reader.read_rows)."""
        try:
            return read_rows(self, sql, columns)
        except UNREADABLE as exc:
            raise self.unreadable(exc) from None

    def read(self, table: str, columns: list, where: str = "") -> dict:
        """Columns of *table* as numpy arrays (see gpugap.report.reader.read_columns); a
        big table on every core (:func:`read_parts`)."""
        try:
            rows = row_bound(self, table)
            parts = row_parts(self, table, rows)
            if len(parts) > 1:
                return read_parts(self.path, table, columns, where, parts,
                                  mapped=bool(self.mmap_bytes))
            return read_columns(self, table, columns, where, rows)
        except UNREADABLE as exc:
            raise self.unreadable(exc) from None

    def read_rowids(self, table: str, columns: list, rowids: list[int]) -> dict:
        """Columns of the rows *rowids* of *table* (as :meth:`read`, in the order of
        their rowids): looked up through the table's B-tree, a few pages each, where a
        read of a few rows would otherwise scan the table."""
        try:
            ids = sorted(set(rowids))
            parts = [read_columns(self, table, columns, "rowid IN ("
                                  + ", ".join(map(str, ids[i:i + ROWID_CHUNK])) + ")",
                                  capacity=len(ids[i:i + ROWID_CHUNK]))
                     for i in range(0, max(len(ids), 1), ROWID_CHUNK)]
        except UNREADABLE as exc:
            raise self.unreadable(exc) from None
        return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}

    # --- metadata ----------------------------------------------------------------------
    # Small name/value tables, read row by row: every value is validated (as_text,
    # as_int) before use, as any of them can be NULL, a BLOB or of the wrong type.
    def _pairs(self, table: str) -> list[tuple[str, str | None]]:
        rows = self._execute(f"SELECT name, value FROM {quote_id(table)}")
        return [(k, as_text(v)) for k, v in ((as_text(k), v) for k, v in rows) if k]

    @cached_property
    def export_meta(self) -> dict[str, str]:
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if self.has(table, "name", "value"):
                return {k: v for k, v in self._pairs(table) if v is not None}
        return {}

    @cached_property
    def capture_meta(self) -> dict[str, str]:
        if not self.has("META_DATA_CAPTURE", "name", "value"):
            return {}
        out: dict[str, str] = {}
        for k, v in self._pairs("META_DATA_CAPTURE"):
            if v is not None:
                out[k] = v if k not in out else f"{out[k]},{v}"
        return out

    @cached_property
    def program(self) -> str | None:
        """The program nsys launched (:func:`program_of` of META_DATA_CAPTURE)."""
        return program_of(self.capture_meta)

    @cached_property
    def system_env(self) -> dict[str, str]:
        """TARGET_INFO_SYSTEM_ENV: name -> value (e.g. CudaDriverVersion -> '13000')."""
        if not self.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
            return {}
        return {k: v for k, v in self._pairs("TARGET_INFO_SYSTEM_ENV") if v is not None}

    @cached_property
    def session_start_utc_ns(self) -> int | None:
        """TARGET_INFO_SESSION_START_TIME.utcEpochNs: when the session began, in ns since
        the Unix epoch (the report's own timestamps count from there)."""
        if not self.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
            return None
        rows = self._execute('SELECT "utcEpochNs" FROM TARGET_INFO_SESSION_START_TIME')
        values = [v for v in (as_int(r[0], 0) for r in rows) if v is not None]
        return values[0] if values else None

    @cached_property
    def session_spans(self) -> list[tuple[int, int]]:
        """ANALYSIS_DETAILS's (startTime, stopTime) rows, in ns from the session's start,
        those that hold integers and stop no earlier than they start ([] without the
        table or its columns)."""
        if not self.has("ANALYSIS_DETAILS", "startTime", "stopTime"):
            return []
        read = [(as_int(a, 0), as_int(b, 0)) for a, b in
                self._execute('SELECT "startTime", "stopTime" FROM ANALYSIS_DETAILS')]
        return [(a, b) for a, b in read if a is not None and b is not None and b >= a]

    def enum(self, table: str) -> dict[int, str]:
        """id -> name of an ENUM_* table ({} if the table is missing). Rows whose id is
        not an integer are skipped (counted); a NULL or BLOB name becomes '<id>'."""
        if not self.has(table, "id", "name"):
            return {}
        label = "label" if "label" in self.columns(table) else "name"
        out: dict[int, str] = {}
        bad = 0
        for i, name, lbl in self._execute(f'SELECT "id", "name", "{label}" FROM '
                                          f"{quote_id(table)}"):
            key = as_int(i)
            if key is None:
                bad += 1
                continue
            text = lbl if isinstance(lbl, str) and lbl else name
            out.setdefault(key, text if isinstance(text, str) and text else f"<{key}>")
        self.problems.add(f"{table}:bad-id", bad, f"rows of {table} without an integer "
                          "id: ignored (their values show as <id>)")
        return out

    def enum_id(self, table: str, name: str, fallback: int | None) -> int | None:
        """The id of the enum member called *name* (its ``name`` column), so that code
        never depends on nsys's numbering; *fallback* when the table is missing (or its
        row holds no integer id)."""
        if not self.has(table, "id", "name"):
            return fallback
        rows = self._execute(f'SELECT "id" FROM {quote_id(table)} WHERE "name" = ?', (name,))
        ids = [v for v in (as_int(r[0], -(2**31), 2**31 - 1) for r in rows) if v is not None]
        return ids[0] if ids else fallback


# A big table is read in rowid ranges at once, one per core (SQLite and the reader use
# one core per connection, and release the GIL while they work): the kernels of a
# kernel-heavy report, the API calls, a scan of the OS runtime calls.
SPLIT_ROWS = 250_000
# Rowids per lookup query (Database.read_rowids): an IN list SQLite sorts once.
ROWID_CHUNK = 10_000
MAX_PARTS = 4


def row_parts(db: Database, table: str, rows: int) -> list[tuple[str, int | None]]:
    """Rowid ranges splitting *table* (at most *rows* rows) into one read per core (at
    most MAX_PARTS), each of at least SPLIT_ROWS rows, with the most rows each can hold;
    [("", None)] (the whole table) for a small one."""
    whole: list[tuple[str, int | None]] = [("", None)]
    n = min(os.cpu_count() or 1, MAX_PARTS, rows // SPLIT_ROWS)
    if n < 2:
        return whole
    # Two queries: SQLite answers a lone min() or max() of the rowid from the B-tree,
    # both in one query by scanning the table.
    (lo,), = db.rows(f"SELECT min(rowid) FROM {quote_id(table)}")
    (hi,), = db.rows(f"SELECT max(rowid) FROM {quote_id(table)}")
    if not (isinstance(lo, int) and isinstance(hi, int)) or hi - lo < n:
        return whole
    cuts = [lo - 1 + (hi - lo + 1) * i // n for i in range(n + 1)]
    cuts[-1] = hi
    inner = [(f"rowid > {cuts[i]} AND rowid <= {cuts[i + 1]}", cuts[i + 1] - cuts[i])
             for i in range(1, n - 1)]
    return [(f"rowid <= {cuts[1]}", cuts[1] - cuts[0]), *inner,
            (f"rowid > {cuts[n - 1]}", cuts[n] - cuts[n - 1])]


def read_parts(path: Path, table: str, columns: list, where: str,
               parts: list[tuple[str, int | None]], fast_from: int | None = None, *,
               mapped: bool = True) -> dict:
    """``read_columns`` of *table* in the export at *path*, its rowid ranges *parts*
    (SQL, at most how many rows; :func:`row_parts`) read at once, each by its own
    thread and connection into arrays of its own size, then put end to end in rowid
    order (the order of one scan of the table: the arrays equal a single read's, dtypes
    included, as concatenating narrowed integer arrays takes the widest). A part's
    error is raised here. *fast_from*: as read_columns's; *mapped*: as Database's."""
    results: list[dict | None] = [None] * len(parts)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            own = Database(path, mapped=mapped)     # one connection per thread
            try:
                rowids, capacity = parts[i]
                both = " AND ".join(f"({w})" for w in (where, rowids) if w)
                results[i] = read_columns(own, table, columns, both, capacity, fast_from)
            finally:
                own.close()
        except BaseException as exc:          # noqa: BLE001 - raised by the caller
            errors.append(exc)

    helpers = [threading.Thread(target=one, args=(i,), daemon=True,
                                name=f"gpugap-read-{table}-{i}")
               for i in range(1, len(parts))]
    for t in helpers:
        t.start()
    one(0)
    for t in helpers:
        t.join()
    if errors:
        raise errors[0]
    done = [r for r in results if r is not None]
    out = {}
    for name in list(done[0]):
        # Column by column, each part's array dropped once joined: the peak is the
        # parts plus one column, not twice the table.
        out[name] = np.concatenate([r.pop(name) for r in done])
    return out
