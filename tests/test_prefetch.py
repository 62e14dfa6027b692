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
