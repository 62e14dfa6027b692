"""Truth figures for ext-b1-ddp_overlap (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch1/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
per device: its process's `step N` ranges; the host window of steps 1-11 and its busy
share; the same steps as the GPU ran them (work launched inside them) and its busy
share; the NCCL kernel time clipped to the GPU window.
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
    "steps": "1-11",
    "busy_pct": {
        "0": "98-99",
        "1": "98-99"
    },
    "ms_per_step": 34,
    "nccl_overlapped_by_compute_pct": {
        "0": 83.0,
        "1": 75.7
    },
    "exposed_nccl_pct": "1-2",
    "tell_first": "Healthy: the communication overlaps backward. Nothing to fix."
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

def gpu_window(r: Report, sel: list, device: int) -> dict:
    """The ranges *sel* as the GPU ran them: from the first to the last GPU work launched by
    a CUDA call of the same process starting inside them (matched by correlationId), and
    the device's busy share of that window."""
    lo, hi = sel[0].start, max(s.end for s in sel)
    pid = pid_of(sel[0].gtid)
    corr = {c for a, c, g in r.q("select start, correlationId, globalTid from "
                                 "CUPTI_ACTIVITY_KIND_RUNTIME")
            if lo <= a < hi and pid_of(g) == pid}
    rows = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if r.has(t):
            rows += [(a, b) for a, b, c, g in r.q(
                f"select start, end, correlationId, globalPid from {t} where deviceId = ?",
                device) if c in corr and pid_of(g) == pid]
    glo, ghi = min(a for a, _ in rows), max(b for _, b in rows)
    return {"gpu_window": [glo, ghi], "gpu_window_ms": ms(ghi - glo), "gpu_busy_pct": pct(r.busy_ns(glo, ghi, device),
                                                                ghi - glo)}

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
        w = window(r, st[1:], d)
        w.update(gpu_window(r, st[1:], d))
        w["nccl_ms_in_gpu_window"] = nccl_ms(r, d, *w.pop("gpu_window"))
        w["steps"] = len(st)
        m[str(d)] = w
    return {"program": "ext-b1-ddp_overlap", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
