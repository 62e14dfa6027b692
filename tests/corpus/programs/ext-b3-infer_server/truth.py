"""Truth figures for ext-b3-infer_server (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
requests; the window of requests 1-149 and its busy share; the share of it inside the
request ranges and the GPU's busy share there; the OS waits (semaphore, condition
variable) starting in the window.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch3"
README = {
    "request_ms_launch_bound": 2.4,
    "between_requests": "sem_wait in queue.get",
    "tell_first": "Each request is launch-bound; between requests the server waits for work (sem_wait in queue.get), which is idle time, not CPU work."
}

def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK

def steps_of(r: Report, pattern: str, device: int | None = None) -> list:
    """NVTX ranges matching *pattern*; given *device*, only those of the processes whose
    kernels ran on it (a capture of several processes holds each one's ranges)."""
    st = r.ranges(pattern)
    if device is None:
        return st
    pids = {pid_of(g) for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
            if r.has(t) for (g,) in r.q(f"select distinct globalPid from {t} where deviceId = ?",
                                        device)}
    return [s for s in st if pid_of(s.gtid) in pids]

def window(r: Report, sel: list, device: int) -> dict:
    """The host window of the ranges *sel* (first start to last end) and the device's busy
    share in it (the union of kernels, copies, memsets and graph executions)."""
    lo, hi = sel[0].start, max(s.end for s in sel)
    return {"ranges": len(sel), "window_ms": ms(hi - lo), "ms_per_range": ms((hi - lo) / len(sel)),
            "range_ms_median": ms(float(np.median([s.ns for s in sel]))),
            "busy_pct": pct(r.busy_ns(lo, hi, device), hi - lo)}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    st = steps_of(r, r"^request \d+$")
    m["requests"] = len(st)
    m["requests_1_149"] = window(r, st[1:], 0)
    lo, hi = st[1].start, st[-1].end
    inside = sum(s.ns for s in st[1:])
    m["inside_requests_pct"] = pct(inside, hi - lo)
    m["inside_requests_gpu_busy_pct"] = pct(sum(r.busy_ns(s.start, s.end, 0) for s in st[1:]), inside)
    w = r.osrt_calls(r"^(sem_wait|sem_timedwait|pthread_cond_wait|pthread_cond_timedwait)$", lo, hi)
    m["waits_between_requests"] = {k: {"calls": n, "pct": pct(t, hi - lo)}
                                   for k, (n, t) in sorted(r.call_time_by_name(w).items())}
    return {"program": "ext-b3-infer_server", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
