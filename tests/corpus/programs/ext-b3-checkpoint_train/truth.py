"""Truth figures for ext-b3-checkpoint_train (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps; the window of steps 2-39 and its busy share; the ranges over 100 ms (step 0 and
the four saving steps).
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
    "normal_step_gpu_ms": 18.5,
    "saves": 4,
    "save_s": 0.95,
    "save_pageable_d2h_ms": 452,
    "save_writev_ms": 148,
    "save_pct_of_steady_state": 81,
    "save_iterations": "4 of 39",
    "tell_first": "The checkpoint: an occasional cost (4 of 39 iterations) that outweighs all the rest; the other steps are busy."
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

def slow(sel: list, over_ms: float) -> dict:
    """The ranges longer than *over_ms*: name -> duration (ms)."""
    return {s.name: ms(s.ns) for s in sel if s.ns > over_ms * 1e6}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    st = steps_of(r, S)
    m["steps"] = len(st)
    m["steps_2_39"] = window(r, st[2:], 0)
    m["ranges_over_100ms"] = slow(st, 100)
    return {"program": "ext-b3-checkpoint_train", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
