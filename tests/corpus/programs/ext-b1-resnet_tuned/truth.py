"""Truth figures for ext-b1-resnet_tuned (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch1/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps, step 0's duration, the window of steps 1-23 and its busy share, the time
between steps (% of the window).
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
    "step0_s": 4.05,
    "step0_gpu_busy_pct": 2.3,
    "steps": "1-23",
    "window_ms": 1142,
    "busy_pct": 33.2,
    "batch_copy_ms_pinned": 0.6,
    "idle_inside_steps_pct": 42.4,
    "idle_between_steps_pct": 24.4,
    "kernels_per_step": 958,
    "tell_first": "Host-bound: the host's work per step sets the pace, not the GPU."
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
    st = steps_of(r, S)
    m["steps"] = len(st)
    m["step0_ms"] = ms(st[0].ns)
    m["steps_1_23"] = window(r, st[1:], 0)
    gaps = [(a.end, b.start) for a, b in zip(st[1:-1], st[2:])]
    lo, hi = st[1].start, st[-1].end
    m["between_steps_pct"] = pct(sum(b - a for a, b in gaps), hi - lo)
    return {"program": "ext-b1-resnet_tuned", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
