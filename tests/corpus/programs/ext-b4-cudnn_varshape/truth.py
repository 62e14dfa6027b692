"""Truth figures for ext-b4-cudnn_varshape (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch4/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps; the ranges over 100 ms (step 0 and the three autotuning steps); the window of
steps 25-47 and its busy share; the lowest busy share of one step as the GPU ran it
(the work launched inside its range) among steps 2-47 but 8, 16, 24; the BatchNorm
backward kernel's block counts.
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
    "slow_steps": [
        8,
        16,
        24
    ],
    "slow_steps_ms": "517-702",
    "step8_gpu_ops": 270,
    "normal_gpu_ops": 34,
    "step8_device_syncs": 33,
    "step8_event_syncs": 30,
    "busy_pct_other_steps_from_2": ">= 96.9",
    "steps_25_47_busy_pct": 99.4,
    "bn_backward_kernel": "bn_bw_1C11_kernel_new",
    "bn_backward_blocks": 64,
    "sms": 132,
    "tell_first": "The steady state is busy. The slow steps 8, 16 and 24 are cuDNN autotuning on the first use of each input size (warm-up), not a recurring cost."
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

def slow(sel: list, over_ms: float) -> dict:
    """The ranges longer than *over_ms*: name -> duration (ms)."""
    return {s.name: ms(s.ns) for s in sel if s.ns > over_ms * 1e6}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    st = steps_of(r, S)
    m["steps"] = len(st)
    m["ranges_over_100ms"] = slow(st, 100)
    m["steps_25_47"] = window(r, st[25:], 0)
    other = [s for s in st[2:] if s.name not in ("step 8", "step 16", "step 24")]
    m["steps_2_47_but_8_16_24_gpu_busy_pct_min"] = min(
        gpu_window(r, [s], 0)["gpu_busy_pct"] for s in other)
    m["bn_bw_grids"] = [list(x) for x in r.q("select gridX * gridY * gridZ, count(*) from "
        "CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName "
        "where s.value like 'bn_bw_1C11_kernel_new%' group by 1")]
    return {"program": "ext-b4-cudnn_varshape", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
