"""What gpugap reads from an nsys export, as reader columns and SQL: built from the
declarations of gpugap.report.schema (each column's nsys names, fill, default, dtype).

Kept apart from the loader and free of pandas, so that reading can begin before pandas is
imported (gpugap.report.prefetch); the loader builds its frames from the same reads.
Every table and column is optional: a missing column reads as its declared default.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gpugap.lazy import LazyNumpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())

from gpugap.report import schema as S
from gpugap.report.database import Database, quote_id
from gpugap.report.reader import Col, row_bound
from gpugap.report.validate import MAX_NAME

# Serialized GlobalId: (hw/vm << 48) | (pid << 24) | tid. The high bits vary by version,
# so decode pid/tid by masking, never by position of the high byte.
PID_SHIFT, ID_MASK = 24, 0xFFFFFF

KERNELS = S.KERNEL.name
MEMCPYS = S.MEMCPY.name
MEMSETS = S.MEMSET.name
SYNCS = S.SYNC.name
GRAPHS = S.GRAPH.name
EVENTS = S.EVENT.name
API_TABLES = (S.RUNTIME.name, S.DRIVER.name)
SCHEMA, REQUIRED = S.SCHEMA, S.REQUIRED
TIME_FILL, ID_FILL = S.TIME_FILL, S.ID_FILL


def usable(db: Database, table: str) -> bool:
    """Whether *table* is there with every column gpugap cannot do without."""
    return table in db.tables and db.has(table, *REQUIRED.get(table, ()))


def check_schema(db: Database) -> list[str]:
    """Presence and declared type of every column gpugap reads, once per report: one
    line per table that lacks a required column (it is skipped) and per column declared
    with a type other than the one it must hold (its values are still checked one by
    one as they are read)."""
    lines = []
    for table, columns in SCHEMA.items():
        if table not in db.tables:
            continue
        have = db.columns(table)
        missing = [c for c in REQUIRED.get(table, ()) if c not in have]
        if missing:
            lines.append(f"{table} lacks column(s) {', '.join(missing)}: table ignored")
            continue
        wrong = []
        for c, kind in columns.items():
            declared = db.declared_type(table, c).upper() if c in have else ""
            if not declared:
                continue            # no declared type: values are checked as read
            if (kind == "int") != ("INT" in declared):
                wrong.append(f"{c} {declared or 'untyped'}")
        if wrong:
            lines.append(f"{table} declares {', '.join(wrong)}, not the type gpugap "
                         "expects: values of another type are treated as missing")
    return lines


def int_sql(expr: str, fill: int) -> str:
    """SQL: *expr* when it is an integer, else *fill* (NULL, text, BLOB, REAL)."""
    return f"CASE WHEN typeof({expr}) = 'integer' THEN {expr} ELSE {int(fill)} END"


# A text's length in bytes (its value read as a BLOB) is stored; in characters SQLite
# counts them through the string. No more bytes than MAX_NAME means no more characters:
# only a longer text is counted (or cut), so most names pass untouched and uncopied.
def _bytes(expr: str) -> str:
    return f"length(CAST({expr} AS BLOB))"


def text_sql(expr: str) -> str:
    """SQL: *expr* cut to MAX_NAME characters when it is text, else NULL."""
    return (f"CASE WHEN typeof({expr}) = 'text' THEN CASE WHEN {_bytes(expr)} <= {MAX_NAME} "
            f"THEN {expr} ELSE substr({expr}, 1, {MAX_NAME}) END END")


def text_flags_sql(expr: str) -> str:
    """SQL: 1 when *expr* is neither text nor NULL (a BLOB, a number), 2 when it is text
    longer than MAX_NAME characters, else 0."""
    return (f"(CASE typeof({expr}) WHEN 'text' THEN (CASE WHEN {_bytes(expr)} > {MAX_NAME} "
            f"AND length({expr}) > {MAX_NAME} THEN 2 ELSE 0 END) WHEN 'null' THEN 0 "
            "ELSE 1 END)")


class Read(NamedTuple):
    """One read of a table: its columns and the rows (SQL), as the read-ahead plans it
    and the loader runs it."""

    table: str
    cols: tuple[Col, ...]
    where: str = ""

    def run(self, db: Database) -> dict:
        return db.read(self.table, list(self.cols), self.where)


def column(db: Database, table: str, *candidates: str, default: str = "NULL") -> str:
    """The first of *candidates* that *table* has, quoted, else *default* (SQL)."""
    have = db.columns(table)
    for c in candidates:
        if c in have:
            return quote_id(c)
    return default


def col(db: Database, table: S.Table, c: S.Column) -> Col:
    """The reader column of *c*: the first of its names that *table* has (else its
    default), read as its fill where NULL or not an integer, in at least its dtype."""
    if c.kind == "pid":
        # The process id, decoded in SQL: the serialized id itself is not needed.
        gpid = column(db, table.name, *c.candidates, default=str(c.default or 0))
        return Col(c.name, f"((ifnull({gpid}, 0) >> {PID_SHIFT}) & {ID_MASK})",
                   dtype=c.dtype)
    default = "NULL" if c.default is None else str(int(c.default))
    return Col(c.read_as, column(db, table.name, *c.candidates, default=default),
               fill=c.fill, dtype=c.dtype)


def int_expr(db: Database, table: S.Table, c: S.Column) -> str:
    """SQL for an integer column of a small table read through sqlite3: its values that
    are not integers read as its fill; its default (else fill) without the column."""
    found = column(db, table.name, *c.candidates, default="")
    if not found:
        return str(c.fill if c.default is None else c.default)
    return int_sql(found, c.fill)


def select_sql(db: Database, table: S.Table, names: tuple[str, ...] | None = None,
               where: str = "", flags: bool = True) -> tuple[str, list[str]]:
    """A SELECT of *table*'s declared columns (those called *names*, in that order;
    default all it reads) for sqlite3, and the names of its result columns: integers
    as int_expr, text cut (text_sql), with its flags (``<name>_flag``, text_flags_sql)
    after it when *flags*."""
    cols = table.read() if names is None else tuple(table.column(n) for n in names)
    exprs, out = [], []
    for c in cols:
        if c.kind == "text":
            found = column(db, table.name, *c.candidates)
            exprs.append(text_sql(found))
            out.append(c.name)
            if flags:
                exprs.append(text_flags_sql(found))
                out.append(f"{c.name}_flag")
        else:
            exprs.append(int_expr(db, table, c))
            out.append(c.read_as)
    sql = f'SELECT {", ".join(exprs)} FROM {quote_id(table.name)}'
    return sql + (f" WHERE {where}" if where else ""), out


def table_read(db: Database, table: S.Table, names: tuple[str, ...] | None = None,
               where: str = "") -> Read:
    """The read of *table*'s declared columns (those called *names*, default all)."""
    cols = table.read() if names is None else tuple(table.column(n) for n in names)
    return Read(table.name, tuple(col(db, table, c) for c in cols), where)


def gpu_read(db: Database, table: S.Table) -> Read | None:
    """GPU activity rows: start, end, device, context, stream, corr, pid, then the
    table's own columns (None when the table is not usable). Times and ids read as
    TIME_FILL / ID_FILL when NULL or not integers: the loader drops or repairs those
    rows (validate.py)."""
    return table_read(db, table) if usable(db, table.name) else None


def kernel_read(db: Database) -> Read | None:
    return gpu_read(db, S.KERNEL)


def memcpy_read(db: Database) -> Read | None:
    return gpu_read(db, S.MEMCPY)


def memset_read(db: Database) -> Read | None:
    return gpu_read(db, S.MEMSET)


def graph_read(db: Database) -> Read | None:
    return gpu_read(db, S.GRAPH)


def sync_read(db: Database) -> Read | None:
    return gpu_read(db, S.SYNC)


def event_link_reads(db: Database) -> tuple[Read | None, Read | None]:
    """The event records (pid, device, context, event, sync) and the stream-wait syncs
    (start, end, pid, context, sync_type_id, event, sync) that tell one GPU's stream
    waited for another's event: small tables, read whole (None where a table or a
    needed column is missing)."""
    records = waits = None
    if db.has(EVENTS, *S.EVENT.required):
        records = table_read(db, S.EVENT, ("pid", "device", "context", "event", "sync"))
    if usable(db, SYNCS) and db.has(SYNCS, "eventId", "eventSyncId", "contextId"):
        waits = table_read(db, S.SYNC, ("start", "end", "pid", "context", "sync_type",
                                        "event", "sync"))
    return records, waits


def api_reads(db: Database) -> list[Read]:
    """The CUDA API tables (runtime and driver calls; the driver table exists only in
    old exports): start, end, driver (0/1), gtid, corr, name_id."""
    driver_class = enum_id(db, "ENUM_NSYS_EVENT_CLASS", "TRACE_PROCESS_EVENT_CUDA_DRIVER")
    out = []
    for table in (S.RUNTIME, S.DRIVER):
        if not usable(db, table.name):
            continue
        cols = []
        for c in S.RUNTIME.read():
            if c.name != "driver":
                cols.append(col(db, table, c))
                continue
            cls = column(db, table.name, *c.candidates, default=str(c.default))
            driver = ("1" if table is S.DRIVER
                      else f"(ifnull({cls}, 0) = {int(driver_class)})")
            cols.append(Col("driver", driver, dtype=c.dtype))
        out.append(Read(table.name, tuple(cols)))
    return out


def enum_id(db: Database, table: str, name: str) -> int:
    """The id of enum member *name* in the report's own *table*, else nsys 2025.3's
    (gpugap.report.schema.ENUMS)."""
    found = db.enum_id(table, name, S.enum_fallback(table, name))
    return S.enum_fallback(table, name) if found is None else found


def nvtx_kinds(db: Database) -> tuple[dict[int, str], int]:
    """The NVTX event types read, by id in this report: the ranges and marks (id ->
    kind label) and the row that names a domain."""
    ev = "ENUM_NSYS_EVENT_TYPE"
    kinds = {enum_id(db, ev, name): label for name, label in S.NVTX_KINDS.items()}
    return kinds, enum_id(db, ev, S.NVTX_DOMAIN_CREATE)


NVTX_INTS = ("start", "end", "type", "text_id", "domain_id", "gtid")


# nsys's own NVTX domains of a file, by its identity (path, size, modification time):
# the read-ahead, the loader and the host evidence each ask; one scan answers them.
_NSYS_DOMAINS: dict[tuple, dict[tuple[int, int], str]] = {}


def nsys_domains(db: Database) -> dict[tuple[int, int], str]:
    """nsys's own NVTX domains (S.INSTRUMENTATION_DOMAINS: the GIL trace, Python
    samples; gpugap.report.host reads them): (pid, domain id) -> name, from the rows
    that create them. One scan of NVTX_EVENTS per file, page by page (Database's
    *mapped*), remembered; {} when the table lacks a needed column."""
    try:
        st = os.stat(db.path)
        key = (os.path.realpath(db.path), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _NSYS_DOMAINS:
        return _NSYS_DOMAINS[key]
    t = S.NVTX
    names = {c: column(db, t.name, *t.column(c).candidates, default="")
             for c in ("text", "text_id", "domain_id", "gtid", "type")}
    found: dict[tuple[int, int], str] = {}
    if usable(db, t.name) and all(names[c] for c in ("domain_id", "type")) and (
            names["text"] or names["text_id"]):
        create = enum_id(db, "ENUM_NSYS_EVENT_TYPE", S.NVTX_DOMAIN_CREATE)
        gtid = f"ifnull({names['gtid']}, 0)" if names["gtid"] else "0"
        own = Database(db.path, mapped=False)
        try:
            rows = own.rows(f"SELECT ({gtid} >> {PID_SHIFT}) & {ID_MASK}, "
                            f"{names['domain_id']}, {names['text'] or 'NULL'}, "
                            f"{names['text_id'] or 'NULL'} FROM {quote_id(t.name)} "
                            f"WHERE {names['type']} = {int(create)}")
            ids = sorted({r[3] for r in rows if isinstance(r[3], int)})
            registered = dict(own.rows(
                f"SELECT id, value FROM {quote_id(S.STRINGS.name)} WHERE id IN "
                f"({', '.join(map(str, ids))})")) if ids and S.STRINGS.name in own.tables \
                else {}
        finally:
            own.close()
        for pid, domain, text, text_id in rows:
            name = text if isinstance(text, str) else registered.get(text_id)
            if name in S.INSTRUMENTATION_DOMAINS and isinstance(pid, int) \
                    and isinstance(domain, int):
                found[(pid, domain)] = name
    if key is not None:
        _NSYS_DOMAINS[key] = found
    return found


def nsys_domain_test(db: Database, pairs: Iterable[tuple[int, int]]) -> str:
    """SQL true for an NVTX row of one of the (pid, domain id) *pairs* ('0' for none):
    the domain ids compared first, the process only for a row of such a domain (a plain
    comparison, which most rows of a program's own domains fail). The domains are
    grouped by the processes that have them (every Python process of a capture has the
    same few): the test is a short OR of `domain IN (...) AND pid IN (...)`, not a CASE
    per domain, for it runs on every row of the table (a row per GIL hand-over)."""
    t = S.NVTX
    domain, gtid = (column(db, t.name, *t.column(c).candidates, default="")
                    for c in ("domain_id", "gtid"))
    by_domain: dict[int, set[int]] = {}
    for pid, d in pairs:
        by_domain.setdefault(int(d), set()).add(int(pid))
    if not (by_domain and domain):
        return "0"
    by_processes: dict[tuple[int, ...], list[int]] = {}
    for d, pids in sorted(by_domain.items()):
        by_processes.setdefault(tuple(sorted(pids)), []).append(d)
    pid = f"((ifnull({gtid or 0}, 0) >> {PID_SHIFT}) & {ID_MASK})"
    tests = [f"({domain} IN ({', '.join(map(str, ds))}) AND "
             f"{pid} IN ({', '.join(map(str, pids))}))"
             for pids, ds in sorted(by_processes.items())]
    return f"({' OR '.join(tests)})"


def nvtx_reads(db: Database) -> tuple[Read | None, tuple[str, list[str]]] | None:
    """The NVTX ranges, marks and domain names, in two reads of the same rows: their
    integer columns and rowid (a Read: the fast reader's, for many), and their text with
    its flags and rowid (a SELECT for sqlite3, which reads text, and its result columns),
    in rowid order. A table without rowids (WITHOUT ROWID) is read in one SELECT of
    every column (the Read: None). None without a usable NVTX table."""
    if not usable(db, S.NVTX.name):
        return None
    kinds, domain_create = nvtx_kinds(db)
    event_type = quote_id(S.NVTX.column("type").nsys)
    where = f'{event_type} IN ({", ".join(str(k) for k in kinds)}, {domain_create})'
    own = nsys_domains(db)
    if own:
        # nsys's rows left out first: they are most of the table where they are at all.
        where = f"NOT {nsys_domain_test(db, own)} AND {where}"
    if not db.has_rowid(S.NVTX.name):
        return None, select_sql(db, S.NVTX, where=where)
    ints = table_read(db, S.NVTX, NVTX_INTS, where)
    sql, names = select_sql(db, S.NVTX, ("text",), where=where)
    return (Read(ints.table, (*ints.cols, Col("rowid", "rowid")), where),
            (sql.replace("SELECT ", "SELECT rowid, ", 1) + " ORDER BY rowid", ["rowid", *names]))


# The program's NVTX rows are looked up by rowid, not scanned for again, when they are
# at most this many and under 1/NVTX_LOOKUP_FRACTION of the table (nvtx_rows).
NVTX_LOOKUP_MAX = 20_000
NVTX_LOOKUP_FRACTION = 8


def nvtx_rows(path: Path, ints: Read | None, text: tuple[str, list[str]]) -> dict:
    """The NVTX rows of :func:`nvtx_reads`: their text, then their integer columns, row
    for row (by rowid). The integers are looked up by rowid when the text read found a
    small part of the table (where nsys's GIL trace and Python samples fill it, a second
    scan costs more than the lookups), else read in one scan (by the fast reader for
    many). Page by page, not mapped: the table is scanned whole for the program's own
    rows, and beside a GIL trace those are a few of its pages; mapped, every page would
    stay in memory while the report is read (36 MB of a 168 MB capture)."""
    db = Database(path, mapped=False)
    try:
        texts = db.frame(*text)
        if ints is None:
            return texts
        found = np.asarray(texts["rowid"], dtype=np.int64)
        if found.size <= NVTX_LOOKUP_MAX and \
                found.size * NVTX_LOOKUP_FRACTION <= row_bound(db, ints.table):
            data = db.read_rowids(ints.table, list(ints.cols), found.tolist())
        else:
            data = ints.run(db)
    finally:
        db.close()
    rowid = data.pop("rowid")
    if rowid.size > 1 and not bool((rowid[1:] > rowid[:-1]).all()):
        order = np.argsort(rowid, kind="stable")
        data = {name: values[order] for name, values in data.items()}
    return data | {name: texts[name] for name in text[1] if name != "rowid"}


def big_reads(db: Database) -> list[Read]:
    """The reads worth starting early: the tables with one row per GPU operation or API
    call (the read-ahead starts those holding enough rows)."""
    return [r for r in [kernel_read(db), *api_reads(db), memcpy_read(db), memset_read(db),
                        graph_read(db), sync_read(db)] if r is not None]
