"""gpugap.report.prefetch: reading a report's big tables ahead in threads never changes
what a command does, and never leaves a forked process (a pool of report workers) stuck
on a lock a reading thread held at the fork. A real report, real threads, a real fork."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from gpugap.report import prefetch, reader
from gpugap.report.loader import load

CAPTURE = Path(__file__).parent / "data" / "captures" / "decode.sqlite"


def _exit_code(pid: int, within_s: float) -> int | None:
    """The child's exit code, or None (and the child killed) if it ran past *within_s*."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_waits_for_the_reads_in_flight_and_the_child_reads_for_itself(
        tmp_path, monkeypatch):
    # Read ahead from 4096 rows (the committed captures are small); a copy: a file of
    # its own, so that no earlier test has read it ahead already.
    monkeypatch.setattr(reader, "FAST_MIN_ROWS", prefetch.EARLY_MIN_ROWS)
    path = tmp_path / "decode.sqlite"
    shutil.copyfile(CAPTURE, path)
    prefetch.start(path)
    jobs = list(prefetch._pending.values())
    assert jobs, "the capture is big enough to be read ahead"
    pid = os.fork()
    if pid == 0:                                    # the child: no reader of its own
        code = 3 if prefetch._pending else 0
        try:
            code = code or (0 if len(load(path).kernels) else 5)
        except BaseException:                        # noqa: BLE001 - told by exit code
            code = 4
        os._exit(code)
    # The parent forked only once every read in flight had finished.
    assert all(job.done.is_set() for job in jobs)
    assert _exit_code(pid, within_s=120) == 0
    # and its own prefetched reads are still there for its loader.
    assert len(load(path).kernels) > 0


def test_nvtx_rows_looked_up_by_rowid_equal_a_scan(monkeypatch):
    # columns.nvtx_rows reads the program's NVTX text by a scan, then their integers by
    # rowid lookups where they are a small part of the table (a GIL trace fills it), in
    # chunks of ROWID_CHUNK: the same arrays as the scan of every row.
    from gpugap.report import columns, database
    from gpugap.report.database import Database

    path = CAPTURE.parent / "sync-item.sqlite"
    db = Database(path)
    try:
        ints, text = columns.nvtx_reads(db)
    finally:
        db.close()
    monkeypatch.setattr(columns, "NVTX_LOOKUP_MAX", -1)              # always scan
    scanned = columns.nvtx_rows(path, ints, text)
    monkeypatch.setattr(columns, "NVTX_LOOKUP_MAX", 10**9)           # always look up
    monkeypatch.setattr(columns, "NVTX_LOOKUP_FRACTION", 0)
    monkeypatch.setattr(database, "ROWID_CHUNK", 7)                  # many chunks
    looked_up = columns.nvtx_rows(path, ints, text)
    assert len(scanned["start"]) > 100
    assert scanned.keys() == looked_up.keys()
    for name in scanned:
        assert list(scanned[name]) == list(looked_up[name]), name
