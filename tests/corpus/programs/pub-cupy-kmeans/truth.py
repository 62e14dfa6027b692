"""Truth figures for pub-cupy-kmeans (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

CuPy's kmeans example (--use-custom-kernel --num 500000). Iterations: the k-means loop's
iterations, each starting with the user ElementwiseKernel ``var_kernel``
(``iterations``); an iteration runs from one var_kernel's start to the next one's, the
last one to the end of the last GPU activity. Each ends its convergence test with
``cupy.all(...)`` read by ``if``: a 1-byte device-to-host copy (pageable) that blocks.
``iteration_ms``: each iteration's length; ``module_loads_per_iteration``: the
cuModuleLoadData calls in it (iteration 1 counted from 1 ms before its var_kernel, which
is loaded just before it; CuPy compiles a kernel with NVRTC at its first use, then
loads it: the first iterations are compilation; ``compile_gaps_s``: for each iteration,
the longest GPU-idle stretch in it).

Steady window: from the start of the first iteration with no module load after which
no iteration loads one, to the end of the last GPU activity (``steady_iterations``).
Figures of it: ``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets),
``gpu_idle_pct``; ``sync_wait_pct``: idle stretches that begin where a D2H copy ends
(within 2 us) up to the next GPU activity; ``other_idle_pct``; ``kernel_ms``: the
largest kernels' median durations (sum_kernel, count_kernel); ``calls_in_window``:
module loads, allocations (cudaMalloc/cudaFree) and syncs starting in it; ``d2h_dst``;
``min_grid_blocks``.
Program figures: ``cpu_fit_s`` (the NumPy fit: from the first CUDA synchronisation's
end to the first allocation after it, the GPU idle), ``first_iteration_s`` and
``gpu_part_s`` (first GPU activity to the last), ``module_loads_total``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, ms, pct, union  # noqa: E402

TOUCH_NS = 2_000
LOAD = r"^(cuModuleLoad\w*|cuLibraryLoad\w*)$"


def main(path: str) -> dict:
    r = Report(path)
    ks = r.kernels()
    u = union(r.gpu_intervals())
    starts = [k[0] for k in ks if k[2] == "var_kernel"]
    end = int(u[-1, 1])
    bounds = starts + [end]
    loads = [a for a, *_ in r.api_calls(LOAD)]
    # iteration 1's var_kernel is loaded just before its start: its span starts 1 ms early
    edges = [starts[0] - 1_000_000] + bounds[1:]
    per_it = [sum(1 for a in loads if edges[i] <= a < edges[i + 1]) for i in range(len(starts))]
    first_clean = next(i for i in range(len(starts)) if not any(per_it[i:]))
    lo, hi = bounds[first_clean], end
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    d2h = [m for m in r.memcpys() if m["kind"] == "Device-to-Host"]
    d2h_ends = np.array(sorted(m["end"] for m in d2h), dtype=np.int64)
    sync = 0
    gaps = r.idle_gaps(lo, hi)
    for a, b in gaps.tolist():
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, "right")) - 1
        if k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
            sync += b - a
    idle = win - busy
    longest = []
    for i in range(len(starts)):
        g = r.idle_gaps(bounds[i], bounds[i + 1])
        longest.append(round(float((g[:, 1] - g[:, 0]).max()) / 1e9, 3) if len(g) else 0.0)
    big = {}
    for name in ("sum_kernel", "count_kernel"):
        big[name] = ms(float(np.median([b - a for a, b, n, *_ in ks if n == name and a >= lo])))
    syncs = r.api_calls(r"^cudaStreamSynchronize$")
    first_alloc = next(a for a, *_ in r.api_calls(r"^cudaMalloc$") if a > syncs[0][1])
    return {
        "iterations": len(starts),
        "iteration_ms": [ms(b - a) for a, b in zip(bounds, bounds[1:])],
        "module_loads_per_iteration": per_it,
        "compile_gaps_s": longest,
        "steady_iterations": len(starts) - first_clean,
        "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(idle, win),
        "sync_wait_pct": pct(sync, win),
        "other_idle_pct": pct(idle - sync, win),
        "kernel_ms": big,
        "calls_in_window": {
            "module_load": sum(1 for a in loads if lo <= a < hi),
            "allocation": len(r.api_calls(r"^(cudaMalloc\w*|cudaFree\w*)$", lo, hi)),
            "sync": len(r.api_calls(r"Synchronize$", lo, hi))},
        "d2h_dst": sorted({m["dst"] for m in d2h}),
        "min_grid_blocks": r.q("select min(gridX * gridY * gridZ) from CUPTI_ACTIVITY_KIND_KERNEL")[0][0],
        "cpu_fit_s": round((first_alloc - syncs[0][1]) / 1e9, 3),
        "first_iteration_s": round((bounds[1] - bounds[0]) / 1e9, 3),
        "gpu_part_s": round((end - int(u[0, 0])) / 1e9, 3),
        "module_loads_total": len(loads),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
