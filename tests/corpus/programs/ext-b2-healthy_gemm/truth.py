"""Truth figures for ext-b2-healthy_gemm (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch2/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps; steps 1-39 as the GPU ran them (the work launched inside them) and its busy
share.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch2"
README = {
    "steps": "1-39 on the GPU",
    "gpu_window_ms": 57.8,
    "busy_pct": 99.6,
    "step0_module_load_ms": 6.7,
    "step0_gpu_wait_ms": 11,
    "tell_first": "Healthy, compute-bound. Nothing to fix; the step-0 wait is start-up."
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


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    st = steps_of(r, S)
    m["steps"] = len(st)
    m["steps_1_39"] = gpu_window(r, st[1:], 0)
    del m["steps_1_39"]["gpu_window"]
    return {"program": "ext-b2-healthy_gemm", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
