"""Truth figures for ext-b4-triton_rowloop (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch4/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
steps; the window of steps 2-11 and its busy share; kernels a step; norm_row's grids.
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
    "steps": "2-11",
    "ms_per_step": 140,
    "launches_per_step": 4096,
    "busy_pct": 3.8,
    "tell_first": "Launch-bound: one launch per row."
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
    m["steps_2_11"] = window(r, st[2:], 0)
    lo, hi = st[2].start, st[-1].end
    m["kernels_per_step"] = round(sum(lo <= a < hi for a, *_ in r.kernels(0)) / (len(st) - 2), 1)
    m["norm_row_grids"] = [list(x) for x in r.q("select gridX, count(*) from CUPTI_ACTIVITY_KIND_KERNEL "
        "k join StringIds s on s.id = k.shortName where s.value = 'norm_row' group by 1")]
    return {"program": "ext-b4-triton_rowloop", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
