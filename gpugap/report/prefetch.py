"""Start reading a report's biggest tables in the background, before the work that comes
before loading it.

A command like ``gpugap analyze`` spends its first few hundred milliseconds importing
pandas, the rules and the renderers. SQLite and the fast reader (gpugap.report.reader)
release the GIL while they work, so on a machine with two or more cores the kernels and
the API calls can be read meanwhile, each table in its own thread; the loader then takes
the arrays instead of reading them again (``take``). Only .sqlite exports are prefetched,
and any problem is left for the loader to find and report: prefetching never changes
what a command does, only when the reading happens.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import numpy as np

from gpugap.report import reader
from gpugap.report.columns import Read, big_reads
from gpugap.report.database import Database, sniff

_lock = threading.Lock()
_pending: dict[tuple, _Job] = {}
# While readers run beside a thread that holds the GIL (imports), a short switch interval
# lets them take their batches promptly.
_SWITCH_INTERVAL = 0.0005
# A big table is read in rowid ranges at once, one per core (SQLite and the reader use
# one core per connection): the kernels of a kernel-heavy report are most of its reading.
SPLIT_ROWS = 250_000
MAX_PARTS = 4


class _Job:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: dict | None = None


def _key(path: Path, sql: str) -> tuple:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, sql)


def start(path: str | os.PathLike[str]) -> None:
    """Begin reading the big tables of the export at *path*, if it is one."""
    try:
        _start(Path(path))
    except Exception:       # noqa: BLE001 - never fail here: the loader reports problems
        return


def _start(path: Path) -> None:
    if not path.is_file() or sniff(path) != "sqlite" or not reader.adbc_available():
        return
    db = Database(path)
    try:
        jobs = []
        for read in big_reads(db):
            rows = reader.row_bound(db, read.table)
            if rows < reader.FAST_MIN_ROWS:
                continue
            key = _key(path, _sql(read))
            job = _Job()
            with _lock:
                if key in _pending:
                    continue
                _pending[key] = job
            jobs.append((read, job, _row_parts(db, read.table, rows)))
    finally:
        db.close()
    if not jobs:
        return
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, _SWITCH_INTERVAL))
    remaining = [len(jobs)]

    def work(read, job: _Job, parts: list[tuple[str, int | None]]) -> None:
        try:
            job.result = _read_parts(path, read, parts)
        except Exception:   # noqa: BLE001 - the loader reads again and reports
            job.result = None
        finally:
            job.done.set()
            with _lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    sys.setswitchinterval(previous)

    for read, job, parts in jobs:
        threading.Thread(target=work, args=(read, job, parts), daemon=True,
                         name=f"gpugap-prefetch-{read.table}").start()


def _read_parts(path: Path, read: Read, parts: list[tuple[str, int | None]]
                ) -> dict | None:
    """*read* of the export at *path*, its rowid ranges *parts* (SQL, at most how many
    rows) read at once, each by its own thread and connection into arrays of its own
    size, then put end to end in rowid order (the order of one scan of the table: the
    arrays equal a single read's, dtypes included, as concatenating narrowed integer
    arrays takes the widest)."""
    results: list[dict | None] = [None] * len(parts)

    def one(i: int) -> None:
        own = Database(path)              # one connection per thread
        try:
            rowids, capacity = parts[i]
            where = " AND ".join(f"({w})" for w in (read.where, rowids) if w)
            results[i] = reader.read_columns(own, read.table, list(read.cols), where,
                                             capacity)
        finally:
            own.close()

    helpers = [threading.Thread(target=one, args=(i,), daemon=True,
                                name=f"gpugap-prefetch-{read.table}-{i}")
               for i in range(1, len(parts))]
    for t in helpers:
        t.start()
    one(0)
    for t in helpers:
        t.join()
    if any(r is None for r in results):
        return None
    if len(results) == 1:
        return results[0]
    out = {}
    for name in list(results[0]):
        # Column by column, each part's array dropped once joined: the peak is the
        # parts plus one column, not twice the table.
        out[name] = np.concatenate([r.pop(name) for r in results])
    return out


def _row_parts(db: Database, table: str, rows: int) -> list[tuple[str, int | None]]:
    """Rowid ranges splitting *table* into one read per core (at most MAX_PARTS), each
    of at least SPLIT_ROWS rows, with the most rows each can hold; [("", None)] (the
    whole table) for a small one."""
    whole: list[tuple[str, int | None]] = [("", None)]
    n = min(os.cpu_count() or 1, MAX_PARTS, rows // SPLIT_ROWS)
    if n < 2:
        return whole
    # Two queries: SQLite answers a lone min() or max() of the rowid from the B-tree,
    # both in one query by scanning the table.
    (lo,), = db.rows(f'SELECT min(rowid) FROM "{table}"')
    (hi,), = db.rows(f'SELECT max(rowid) FROM "{table}"')
    if not (isinstance(lo, int) and isinstance(hi, int)) or hi - lo < n:
        return whole
    cuts = [lo - 1 + (hi - lo + 1) * i // n for i in range(n + 1)]
    cuts[-1] = hi
    inner = [(f"rowid > {cuts[i]} AND rowid <= {cuts[i + 1]}", cuts[i + 1] - cuts[i])
             for i in range(1, n - 1)]
    return [(f"rowid <= {cuts[1]}", cuts[1] - cuts[0]), *inner,
            (f"rowid > {cuts[n - 1]}", cuts[n] - cuts[n - 1])]


def _sql(read) -> str:
    return f"{read.table}|{'|'.join(c.sql for c in read.cols)}|{read.where}"


def take(path: Path, read: Read) -> dict | None:
    """The prefetched result of this exact read of this file, or None."""
    if not _pending:
        return None
    try:
        key = _key(path, _sql(read))
    except OSError:
        return None
    with _lock:
        job = _pending.pop(key, None)
    if job is None:
        return None
    job.done.wait()
    return job.result
