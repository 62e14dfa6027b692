"""Truth figures for pub-cuda-conjugategradient (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

NVIDIA's conjugateGradient sample (cuBLAS + cuSPARSE, legacy default stream).
Iterations: the CG loop's iterations, each starting with ``copy_kernel`` (k = 1,
cublasScopy) or ``scal_kernel_val`` (k > 1, cublasSscal) (``iterations``); each runs
~10 kernels, one memset and two 4-byte device-to-host copies (the two cublasSdot results
into host variables, each followed by cudaStreamSynchronize), then
cudaDeviceSynchronize and a printf. Before the loop: one SpMV, axpy and dot (set-up).
An iteration runs from its first kernel's start to the next one's; the last one ends
at its second dot's copy.

Steady window: iterations 3.. (``steady_iterations``; the first two load cuBLAS's
scal/copy modules lazily: ``module_loads_per_iteration``), from iteration 3's first
kernel to the end of the last 4-byte copy. Figures of it:
  * ``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets), ``gpu_idle_pct``;
  * ``sync_wait_pct``: the idle stretches that begin where a 4-byte D2H copy ends (within
    2 us) up to the next GPU activity (the host returns from the dot's sync, records an
    event, launches the next kernel; after the second dot also cudaDeviceSynchronize and
    printf), % of the window; ``sync_gap_us_median``;
  * ``launch_gap_pct``: the other idle stretches (between kernels launched back to back:
    each kernel of ~2-17 us finishes before the host's next launch call of ~6-10 us);
    ``launch_gap_us_median``;
  * ``kernel_us_median``, ``launch_call_us_median``, ``kernels_per_iteration``;
  * ``d2h_dst`` (host memory kind of the dot results), ``min_grid_blocks`` (the 1-block
    reduce of each dot, the 4-block CSR partition);
  * ``calls_in_window``: allocation and module-load calls starting in it.
Program figures: ``gpu_span_ms`` (first to last GPU activity), ``module_load_ms`` (all
cuLibraryLoadData calls: cuBLAS/cuSPARSE kernels loaded lazily at first use),
``pageable_h2d`` (the set-up uploads), ``loop_ms`` (iteration 1's start to the end).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, ms, pct, union  # noqa: E402

SKIP = 2
TOUCH_NS = 2_000
LOAD = r"^(cuLibraryLoad\w*|cuModuleLoad\w*)$"


def main(path: str) -> dict:
    r = Report(path)
    ks = r.kernels()
    starts = [k[0] for k in ks if k[2] in ("copy_kernel", "scal_kernel_val")]
    cps = r.memcpys()
    d2h4 = [m for m in cps if m["kind"] == "Device-to-Host" and m["bytes"] == 4]
    end = max(m["end"] for m in d2h4)
    bounds = starts + [end]
    loads = r.api_calls(LOAD)
    per_it_loads = [sum(1 for a, *_ in loads if bounds[i - 1] <= a < bounds[i]) if i else
                    sum(1 for a, *_ in loads if starts[0] - 2_000_000 <= a < bounds[0])
                    for i in range(len(starts))]
    lo, hi = bounds[SKIP], end
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    d2h_ends = np.array(sorted(m["end"] for m in d2h4), dtype=np.int64)
    sync, other = [], []
    for a, b in r.idle_gaps(lo, hi).tolist():
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, "right")) - 1
        (sync if k >= 0 and a - d2h_ends[k] <= TOUCH_NS else other).append(b - a)
    in_win = [k for k in ks if lo <= k[0] < hi]
    launches = [c for c in r.launch_calls() if lo - 20_000 <= c[0] < hi]
    u = union(r.gpu_intervals())
    return {
        "iterations": len(starts),
        "steady_iterations": len(starts) - SKIP,
        "module_loads_per_iteration": per_it_loads,
        "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "sync_wait_pct": pct(sum(sync), win),
        "sync_gaps": len(sync),
        "sync_gap_us_median": round(float(np.median(sync)) / 1e3, 1),
        "launch_gap_pct": pct(sum(other), win),
        "launch_gaps": len(other),
        "launch_gap_us_median": round(float(np.median(other)) / 1e3, 1),
        "kernel_us_median": round(float(np.median([b - a for a, b, *_ in in_win])) / 1e3, 1),
        "launch_call_us_median": round(float(np.median([b - a for a, b, *_ in launches])) / 1e3, 1),
        "kernels_per_iteration": round(len(in_win) / (len(starts) - SKIP), 1),
        "d2h_dst": sorted({m["dst"] for m in d2h4}),
        "min_grid_blocks": r.q("select min(gridX * gridY * gridZ) from CUPTI_ACTIVITY_KIND_KERNEL")[0][0],
        "calls_in_window": {
            "allocation": len(r.api_calls(r"^(cudaMalloc\w*|cudaFree\w*)$", lo, hi)),
            "module_load": len(r.api_calls(LOAD, lo, hi))},
        "gpu_span_ms": ms(int(u[-1, 1]) - int(u[0, 0])),
        "module_load_ms": ms(sum(b - a for a, b, *_ in loads)),
        "pageable_h2d": sum(1 for m in cps if m["kind"] == "Host-to-Device" and m["src"] == "Pageable"),
        "loop_ms": ms(end - starts[0]),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
