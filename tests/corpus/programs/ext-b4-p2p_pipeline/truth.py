"""Truth figures for ext-b4-p2p_pipeline (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch4/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
per device: its process's steps, the ranges over 100 ms, the window of steps 3-24 and
its busy share.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch4"
README = {
    "steady_step_ms": "2.5-3.3",
    "rank0_step2_ms": 159.5,
    "rank1_step0_ms": 3015,
    "busy_pct": {
        "0": 27,
        "1": 46
    },
    "gpu1_recv_wait_pct": 20,
    "gpu1_nccl_pct_steps_16_20": "67-73",
    "tell_first": "Both ranks are launch-bound in the steady state (GPU 0 ~27% busy, GPU 1 ~46% including its waits in the receive); when rank 1 waits, it waits for rank 0's sends. Rank 0's 160 ms wait in step 2 is start-up (rank 1 started 3 s late), not a steady-state cost."
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
    for d in (0, 1):
        st = steps_of(r, S, d)
        w = window(r, st[3:], d)
        w["steps"] = len(st)
        w["ranges_over_100ms"] = slow(st, 100)
        m[str(d)] = w
    return {"program": "ext-b4-p2p_pipeline", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
