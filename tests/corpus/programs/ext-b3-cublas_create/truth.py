"""Truth figures for ext-b3-cublas_create (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch3/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
batches; the window of batches 2-24 and its busy share; the allocation, device-sync
and module calls in it; the cuBLAS domain's cublasCreate ranges.
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
    "module_loads_pct_of_batch": 48,
    "malloc_free_devicesync_pct_of_batch": 30,
    "handle_churn_pct_of_batch": 79,
    "tell_first": "One problem, ~79% of each batch: a cuBLAS handle created and destroyed around every GEMM."
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

def api_share(r: Report, pattern: str, sel: list) -> dict:
    """CUDA calls matching *pattern* that start in the ranges' window: per name, the count
    and the share of the window their duration covers."""
    lo, hi = sel[0].start, max(s.end for s in sel)
    return {k: {"calls": n, "pct": pct(t, hi - lo)}
            for k, (n, t) in sorted(r.call_time_by_name(r.api_calls(pattern, lo, hi)).items())}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    st = steps_of(r, r"^batch \d+$")
    m["batches"] = len(st)
    m["batches_2_24"] = window(r, st[2:], 0)
    m["batches_2_24_calls"] = api_share(r, r"^(cudaMalloc|cudaFree|cudaDeviceSynchronize|cuModuleLoad\w*|cuLibraryLoad\w*|cuModuleUnload|cuLibraryUnload)$", st[2:])
    m["cublasCreate_ranges"] = len(r.ranges(r"^cublasCreate", domain="cuBLAS"))
    return {"program": "ext-b3-cublas_create", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
