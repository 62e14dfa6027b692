"""Truth figures for ext-b1-compile (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch1/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
the `iter N` ranges, iter 0's duration, the window of iter 1-29 and its busy share,
the GPU's idle stretches over 1 s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch1"
README = {
    "no_gpu_work_before_first_call_s": 7.28,
    "file_opens": 3461,
    "stats": 5482,
    "iter0_s": 3.79,
    "iter_1_29_ms_median": 0.19,
    "iter_1_29_ms_range": [
        0.16,
        0.62
    ],
    "iter_1_29_busy_pct": 90.5,
    "tell_first": "The compilation is a one-time start-up cost; the steady state is fast and busy."
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
    st = steps_of(r, r"^iter \d+$")
    m["iterations"] = len(st)
    m["iter0_ms"] = ms(st[0].ns)
    m["iter_1_29"] = window(r, st[1:], 0)
    k = r.gpu_intervals(0)
    k = k[np.argsort(k[:, 0])]
    gaps = k[1:, 0] - np.maximum.accumulate(k[:-1, 1])
    m["gpu_idle_gaps_over_1s_ms"] = [ms(int(x)) for x in gaps if x > 1e9]
    return {"program": "ext-b1-compile", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
