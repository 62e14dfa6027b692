"""Start reading a report's biggest tables in the background, before the work that comes
before loading it.

A command like ``gpugap analyze`` spends its first few hundred milliseconds importing
pandas, the rules and the renderers. SQLite and the fast reader (gpugap.report.reader)
release the GIL while they work, so on a machine with two or more cores the GPU activity,
the API calls and the NVTX ranges can be read meanwhile, each table in its own threads;
the loader then takes the arrays instead of reading them again (``take``,
``take_nvtx``). Only .sqlite exports are prefetched, and any problem is left for the
loader to find and report: prefetching never changes what a command does, only when
the reading happens.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

from gpugap.report import reader
from gpugap.report import schema as S
from gpugap.report.columns import Read, big_reads, nvtx_reads, nvtx_rows
from gpugap.report.database import Database, read_parts, row_parts, sniff

_lock = threading.Lock()
_pending: dict[tuple, _Job] = {}
_started: set[tuple] = set()        # the files whose reads began (_file_key)
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


def _file_key(path: Path) -> tuple:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def _key(path: Path, sql: str) -> tuple:
    return (*_file_key(path), sql)


def start(path: str | os.PathLike[str]) -> None:
    """Begin reading the big tables of the export at *path*, if it is one."""
    try:
        _start(Path(path))
    except Exception:       # noqa: BLE001 - never fail here: the loader reports problems
        return


def _start(path: Path) -> None:
    if not path.is_file():
        return
    # Once per file: the command line starts it before its imports and again where it
    # knows the report (the same file: nothing to plan again).
    file = _file_key(path)
    with _lock:
        if file in _started:
            return
        _started.add(file)
    if sniff(path) != "sqlite":
        return
    db = Database(path)
    try:
        work = []
        big = [(read, rows) for read in big_reads(db)
               if (rows := reader.row_bound(db, read.table)) >= min_rows()]
        # The fast reader's import (ADBC) only for a report with a big table to read.
        if any(rows >= reader.FAST_MIN_ROWS for _, rows in big) and \
                reader.adbc_available():
            work = [(_sql(read), partial(read_parts, path, read.table, list(read.cols),
                                         read.where, row_parts(db, read.table, rows),
                                         fast_from=min_rows()))
                    for read, rows in big]
        # The NVTX ranges (a range per iteration or per kernel: tens of thousands; a
        # GIL trace's hand-overs: hundreds of thousands): planned and read in a thread
        # of their own (columns.nvtx_rows; sqlite3 lets the other threads run), found
        # there by the loader (take_nvtx) when it plans the same read.
        if S.NVTX.name in db.tables and reader.row_bound(db, S.NVTX.name) >= min_rows():
            work.append((_NVTX, partial(_read_nvtx, path)))
    finally:
        db.close()
    jobs = []
    for sql, read in work:
        key = _key(path, sql)
        job = _Job()
        with _lock:
            if key in _pending:
                continue
            _pending[key] = job
        jobs.append((job, read))
    if not jobs:
        return
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, _SWITCH_INTERVAL))
    remaining = [len(jobs)]

    def run(job: _Job, read: Callable[[], dict]) -> None:
        try:
            job.result = read()
        except Exception:   # noqa: BLE001 - the loader reads again and reports
            job.result = None
        finally:
            job.done.set()
            with _lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    sys.setswitchinterval(previous)

    for i, (job, read) in enumerate(jobs):
        threading.Thread(target=run, args=(job, read), daemon=True,
                         name=f"gpugap-prefetch-{i}").start()


def _before_fork() -> None:
    """Let the reads in flight finish before this process forks (a pool of report
    workers, gpugap.forkjoin): a thread inside SQLite or the fast reader at the fork
    leaves their locks held in the child, whose first read of a report then waits
    forever."""
    with _lock:
        jobs = list(_pending.values())
    for job in jobs:
        job.done.wait()


def _in_child() -> None:
    """A forked child has none of the reading threads: it reads for itself (its copy of
    a job would never finish), with a lock no thread of the parent can have held."""
    global _lock
    _lock = threading.Lock()
    _pending.clear()
    _started.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_in_child)


# The key of the NVTX job: its SQL is planned in its thread (the plan scans the table
# for nsys's own domains), so it is found by the table's name and checked by its SQL.
_NVTX = f"{S.NVTX.name}|rows"


def _read_nvtx(path: Path) -> dict | None:
    """The NVTX rows as the loader reads them (columns.nvtx_rows), with the SQL of their
    text read, which the loader's own plan must match; None without a usable table."""
    db = Database(path)
    try:
        plan = nvtx_reads(db)
    finally:
        db.close()
    if plan is None:
        return None
    ints, text = plan
    return {"sql": text[0], "rows": nvtx_rows(path, ints, text)}


def min_rows() -> int:
    """The fewest rows of a table read ahead."""
    return min(EARLY_MIN_ROWS, reader.FAST_MIN_ROWS)


def _sql(read) -> str:
    return f"{read.table}|{'|'.join(c.sql for c in read.cols)}|{read.where}"


def take(path: Path, read: Read) -> dict | None:
    """The prefetched result of this exact read of this file, or None."""
    return _take(path, _sql(read))


def take_nvtx(path: Path, sql: str) -> dict | None:
    """The prefetched NVTX rows of this file (columns.nvtx_rows) where their text was
    read by this exact query, or None."""
    done = _take(path, _NVTX)
    return done["rows"] if done is not None and done["sql"] == sql else None


def _take(path: Path, sql: str) -> dict | None:
    if not _pending:
        return None
    try:
        key = _key(path, sql)
    except OSError:
        return None
    with _lock:
        job = _pending.pop(key, None)
    if job is None:
        return None
    job.done.wait()
    return job.result
