"""Truth figures for ext-ddp-straggler_rank1 (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures ddp-ranks/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps; the window of steps 3-15 and its busy share and NCCL kernel time (host window);
the NCCL kernel time over the capture and inside steps 0-2's ranges.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of ddp-ranks"
README = {
    "steps": "3-15",
    "ms_per_step": 33.8,
    "nccl_ms_per_step": 2.27,
    "busy_pct": 99.6,
    "nccl_ms": {
        "rank0": 171,
        "rank1": 37
    },
    "rank0_extra_nccl_startup_ms": 134,
    "rank0_startup_wait_ms": {
        "step0": 85,
        "step2": 49
    },
    "rank1_host_sleep_ms_per_step": 25,
    "tell_first": "Rank 1's 25 ms host sleep costs nothing while it stays shorter than the GPU's step; nothing needs fixing in the steady state."
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

def nccl_ms(r: Report, device: int, lo: int | None = None, hi: int | None = None) -> float:
    """Time of the device's NCCL kernels (names starting nccl), clipped to [lo, hi)."""
    rows = [(a, b) for a, b, n, *_ in r.kernels(device) if n.lower().startswith("nccl")]
    if not rows:
        return 0.0
    a = np.array(rows, dtype=np.int64)
    if lo is not None:
        a = np.clip(a, lo, hi)
    return ms(int((a[:, 1] - a[:, 0]).sum()))


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    d = 1
    st = steps_of(r, S, d)
    m["steps"] = len(st)
    m["devices"] = r.devices()
    w = window(r, st[3:], d)
    lo, hi = st[3].start, max(s.end for s in st[3:])
    w["nccl_ms_in_window"] = nccl_ms(r, d, lo, hi)
    m["steps_3_15"] = w
    m["nccl_ms_capture"] = nccl_ms(r, d)
    m["nccl_ms_by_step_0_2"] = [nccl_ms(r, d, s.start, s.end) for s in st[:3]]
    return {"program": "ext-ddp-straggler_rank1", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
