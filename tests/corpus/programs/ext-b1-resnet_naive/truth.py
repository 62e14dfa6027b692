"""Truth figures for ext-b1-resnet_naive (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch1/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps (NVTX `step N`), step 0's duration, the window of steps 1-23 (its busy share),
the time between one step's end and the next one's start (% of that window; the GPU's
busy share during it; the median gap).
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
    "step0_s": 14.46,
    "step0_gpu_busy_pct": 0.7,
    "steps": "1-23",
    "window_ms": 1161,
    "busy_pct": 36.3,
    "gpu_work_ms_per_step": 18.3,
    "kernels_per_step": 958,
    "idle_between_steps_pct": 35.8,
    "between_step_gaps_ms": {
        "min": 3,
        "max": 81,
        "median": 6
    },
    "idle_inside_steps_pct": 27.8,
    "batch_copy_mb": 19.7,
    "batch_copy_ms": 2.5,
    "tell_first": "Input-bound, then host-bound: the GPU waits for the host, most of all for the next batch."
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
    # idle between steps: the gaps between one step range's end and the next one's start
    gaps = [(a.end, b.start) for a, b in zip(st[1:-1], st[2:])]
    lo, hi = st[1].start, st[-1].end
    gap_ns = sum(b - a for a, b in gaps)
    m["between_steps_pct"] = pct(gap_ns, hi - lo)
    m["between_steps_gpu_busy_pct"] = pct(sum(r.busy_ns(a, b, 0) for a, b in gaps), gap_ns)
    m["between_step_gap_ms_median"] = ms(float(np.median([b - a for a, b in gaps])))
    return {"program": "ext-b1-resnet_naive", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
