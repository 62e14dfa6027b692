"""Truth figures for ext-b1-mlp_graph (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch1/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
the `infer` range and its busy share, the CUDA-graph executions (all, and inside
`infer`), their median duration, the kernel rows inside `infer`.
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
    "infer_ms": 34.0,
    "graph_replays": 200,
    "replay_us": 166,
    "busy_pct": 97.7,
    "kernels_in_infer": 0,
    "speedup_vs_eager": 10.7,
    "tell_first": "Healthy: the replays keep the GPU busy (10.7x faster than mlp_eager). Nothing to fix."
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
    st = steps_of(r, r"^infer$")
    m["infer"] = window(r, st, 0)
    lo, hi = st[0].start, st[0].end
    g = r.graph_launches(0)
    m["graph_executions"] = len(g)
    m["graph_executions_in_infer"] = sum(lo <= a < hi for a, *_ in g)
    m["graph_us_median"] = round(float(np.median([b - a for a, b, _ in g])) / 1e3, 1)
    m["kernels_in_infer"] = sum(lo <= a < hi for a, *_ in r.kernels(0))
    return {"program": "ext-b1-mlp_graph", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
