"""Truth figures for ext-b2-eval_cpu_copy (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch2/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
batches; the window of batches 1-19 and its busy share; the logits' device-to-host
copies in it (count, destination memory, median duration).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch2"
README = {
    "batches": "1-19",
    "ms_per_batch": 204,
    "cpu_copy_ms": 82.6,
    "cpu_copy_pct": 40.5,
    "copy_itself_ms": 77,
    "numpy_ms": 120,
    "numpy_pct": 58.9,
    "model_kernels_ms": 4,
    "model_kernels_pct": 2,
    "tell_first": "Host-bound: the host post-processes in numpy (~59%) after a synchronous pageable copy (~40%); the two are separate costs."
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
    st = steps_of(r, r"^batch \d+$")
    m["batches"] = len(st)
    m["batches_1_19"] = window(r, st[1:], 0)
    lo, hi = st[1].start, st[-1].end
    d2h = [c for c in r.memcpys(0) if c["kind"] == "Device-to-Host" and lo <= c["start"] < hi
           and c["bytes"] > 100e6]
    m["logits_d2h"] = {"copies": len(d2h), "dst": sorted({c["dst"] for c in d2h}),
                       "ms_median": ms(float(np.median([c["end"] - c["start"] for c in d2h])))}
    return {"program": "ext-b2-eval_cpu_copy", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
