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

from gpugap.report import reader
from gpugap.report.columns import Read, big_reads
from gpugap.report.database import Database, read_parts, row_parts, sniff

_lock = threading.Lock()
_pending: dict[tuple, _Job] = {}
# While readers run beside a thread that holds the GIL (imports), a short switch interval
# lets them take their batches promptly.
_SWITCH_INTERVAL = 0.0005
# Tables of at least this many rows are read ahead, through the fast reader (ADBC) once
# it is imported for the biggest: a sync or copy table of ten thousand rows takes a
# tenth of the time it takes sqlite3, in a thread.
EARLY_MIN_ROWS = 4096


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
    if not path.is_file() or sniff(path) != "sqlite":
        return
    db = Database(path)
    try:
        big = [(read, rows) for read in big_reads(db)
               if (rows := reader.row_bound(db, read.table)) >= min_rows()]
        # The fast reader's import (ADBC) only for a report with a big table to read.
        if (not any(rows >= reader.FAST_MIN_ROWS for _, rows in big)
                or not reader.adbc_available()):
            return
        jobs = []
        for read, rows in big:
            key = _key(path, _sql(read))
            job = _Job()
            with _lock:
                if key in _pending:
                    continue
                _pending[key] = job
            jobs.append((read, job, row_parts(db, read.table, rows)))
    finally:
        db.close()
    if not jobs:
        return
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, _SWITCH_INTERVAL))
    remaining = [len(jobs)]

    def work(read, job: _Job, parts: list[tuple[str, int | None]]) -> None:
        try:
            job.result = read_parts(path, read.table, list(read.cols), read.where, parts,
                                    fast_from=min_rows())
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


def min_rows() -> int:
    """The fewest rows of a table read ahead."""
    return min(EARLY_MIN_ROWS, reader.FAST_MIN_ROWS)


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
