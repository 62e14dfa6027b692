"""Truth figures for triton-softmax, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the NVTX ranges ``iter`` (push/pop, default domain), one per iteration.
Steady window: from the start of the 3rd range to the end of the last (the GPU trails
the host by a few us at most: no sync in the loop, tiny kernels). Launch-bound share:
the GPU idle time of the window (nothing else in the loop holds the GPU: the truth also
counts sync calls and allocations in the window to show they are absent), as %.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, pct, window_of  # noqa: E402


def main(path: str) -> dict:
    r = Report(path)
    its = r.ranges(r"^iter$")
    out: dict = {"iterations": len(its)}
    if len(its) < 5:
        return out
    lo, hi = window_of(its, 2)
    # Let the window run to the end of the GPU work launched in the last range.
    dev = r.devices()[0] if r.devices() else None
    ks = r.kernels(dev)
    # (only kernels launched inside the last range: the check after the loop launches
    # softmax again after a synchronize, which must stay out of the window)
    launched = {row[0] for row in r.q(
        "select correlationId from CUPTI_ACTIVITY_KIND_RUNTIME where start >= ? and "
        "start <= ?", its[-1].start, its[-1].end)} if r.has("CUPTI_ACTIVITY_KIND_RUNTIME") \
        else set()
    tail = [b for a, b, _n, _s, c in ks if c in launched and a >= its[-1].start]
    hi = max([hi] + tail)
    win = hi - lo
    busy = r.busy_ns(lo, hi, dev)
    in_win = [k for k in ks if lo <= k[0] < hi]
    names: dict[str, int] = {}
    for k in in_win:
        names[k[2]] = names.get(k[2], 0) + 1
    steady = len(its) - 2
    launches = r.api_calls(r"(LaunchKernel|cuLaunch)", lo, hi)
    syncs = r.api_calls(r"(Synchronize|Memcpy)", lo, hi)
    allocs = r.api_calls(r"(cudaMalloc|cuMemAlloc|cudaFree|cuMemFree)", lo, hi)
    modules = r.api_calls(r"^(cuModuleLoad|cuLibraryLoad)")
    host_us = np.array([x.ns for x in its[2:]], dtype=np.int64) / 1e3
    out |= {
        "steady_iterations": steady,
        "steady_window_ms": round(win / 1e6, 3),
        "us_per_iteration": round(win / steady / 1e3, 2),
        "host_range_us_median": round(float(np.median(host_us)), 2),
        "gpu_busy_us_per_iteration": round(busy / steady / 1e3, 2),
        "kernels_per_iteration": round(len(in_win) / steady, 2),
        "kernel_names": names,
        "launch_calls_per_iteration": round(len(launches) / steady, 2),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "sync_calls_in_window": len(syncs),
        "alloc_calls_in_window": len(allocs),
        "first_iteration_ms": round(its[0].ns / 1e6, 3),
        "median_iteration_us": round(float(np.median([x.ns for x in its])) / 1e3, 2),
        "module_loads_total": len(modules),
        "module_loads_in_first_iteration": sum(1 for a, *_ in modules
                                               if its[0].start <= a <= its[0].end),
    }
    out["launch_bound_share_pct"] = out["gpu_idle_pct"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
