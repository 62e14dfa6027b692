"""Truth figures for ext-b3-fsdp_train (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
per device: its process's steps, the window of steps 3-29 and its busy share, the NCCL
kernel time over the whole capture and in the window.
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
    "cpu_ms_per_step": 40,
    "gpu_compute_ms_per_step": 13,
    "nccl_kernel_ms": {
        "0": 156,
        "1": 838
    },
    "steps": "3-29",
    "busy_pct": {
        "0": 48,
        "1": 99
    },
    "gpu1_busy_in_nccl_pct": 88,
    "tell_first": "Host-bound: ~40 ms of CPU per step for ~13 ms of GPU compute; rank 0's host is the cause (GPU 0 48% busy in steps 3-29), GPU 1's long NCCL waits are the symptom (GPU 1 99% busy, 88% of it in NCCL kernels)."
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
    for d in (0, 1):
        st = steps_of(r, S, d)
        w = window(r, st[3:], d)
        w["steps"] = len(st)
        w["nccl_ms_capture"] = nccl_ms(r, d)
        lo, hi = st[3].start, max(s.end for s in st[3:])
        w["nccl_ms_in_window"] = nccl_ms(r, d, lo, hi)
        m[str(d)] = w
    return {"program": "ext-b3-fsdp_train", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
