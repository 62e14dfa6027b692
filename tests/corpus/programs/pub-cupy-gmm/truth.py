"""Truth figures for pub-cupy-gmm (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

CuPy's gmm example (defaults, -o gmm.png). Iterations: the EM loop's iterations, each
ending with ``if abs(change) < tol``: a 1-byte device-to-host copy (pageable) that
blocks the host (``iterations`` = the 1-byte D2H copies made before the first longer
copy: the prediction's reads come after the loop). Iteration 1 runs from the first
kernel to the end of its 1-byte copy; each next one from the previous copy's end to the
end of its own. ``iteration_ms``, ``kernels_per_iteration``,
``module_loads_per_iteration`` (cuModuleLoadData / cuLibraryLoadData; iteration 1
counts every load before its end: CuPy compiles each new kernel with NVRTC at its first
use and cuBLAS loads its GEMM kernels).

Steady window: from the start of the first iteration after which no iteration loads a
module, to the end of the last iteration's copy (``steady_iterations``). Figures of it:
``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets), ``gpu_idle_pct``;
``sync_wait_pct``: idle stretches that begin where a D2H copy ends (within 2 us) up to
the next GPU activity; ``launch_gap_pct``: the other idle stretches (between kernels:
CuPy's Python dispatch of ~46 small kernels an iteration); ``launch_gap_us_median``,
``kernel_us_median``, ``launch_call_us_median`` (cuLaunchKernel and cudaLaunchKernel*
calls in the window); ``calls_in_window`` (module loads, allocations, syncs).
After the loop (``after_loop``): from the last iteration's end to the end of the last
GPU activity, its length, busy share and module loads (predict and accuracy compile
their kernels at first use, then the plot's copies).
Program figures: ``cpu_part_s`` (the NumPy run before the GPU part, GPU idle: from the
first synchronisation's end to the first H2D copy), ``first_iteration_s``.
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
LAUNCH = r"^(cuLaunchKernel\w*|cudaLaunchKernel\w*)$"


def main(path: str) -> dict:
    r = Report(path)
    ks = r.kernels()
    cps = r.memcpys()
    d2h = [m for m in cps if m["kind"] == "Device-to-Host"]
    first_long = next(i for i, m in enumerate(d2h) if m["bytes"] > 1)
    checks = d2h[:first_long]
    bounds = [ks[0][0]] + [m["end"] for m in checks]
    loads = [a for a, *_ in r.api_calls(LOAD)]
    n = len(checks)
    per_it = [sum(1 for a in loads if (bounds[i] if i else 0) <= a < bounds[i + 1])
              for i in range(n)]
    per_k = [sum(1 for k in ks if bounds[i] <= k[0] < bounds[i + 1]) for i in range(n)]
    first_clean = next(i for i in range(n) if not any(per_it[i:]))
    lo, hi = bounds[first_clean], bounds[-1]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    d2h_ends = np.array(sorted(m["end"] for m in d2h), dtype=np.int64)
    sync, other = [], []
    for a, b in r.idle_gaps(lo, hi).tolist():
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, "right")) - 1
        (sync if k >= 0 and a - d2h_ends[k] <= TOUCH_NS else other).append(b - a)
    u = union(r.gpu_intervals())
    end = int(u[-1, 1])
    h2d = [m for m in cps if m["kind"] == "Host-to-Device"]
    syncs = r.api_calls(r"^cudaStreamSynchronize$")
    return {
        "iterations": n,
        "iteration_ms": [ms(b - a) for a, b in zip(bounds, bounds[1:])],
        "kernels_per_iteration": per_k,
        "module_loads_per_iteration": per_it,
        "steady_iterations": n - first_clean,
        "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "sync_wait_pct": pct(sum(sync), win),
        "launch_gap_pct": pct(sum(other), win),
        "launch_gaps": len(other),
        "launch_gap_us_median": round(float(np.median(other)) / 1e3, 1),
        "kernel_us_median": round(float(np.median(
            [b - a for a, b, *_ in ks if lo <= a < hi])) / 1e3, 1),
        "launch_call_us_median": round(float(np.median(
            [b - a for a, b, *_ in r.api_calls(LAUNCH, lo, hi)])) / 1e3, 1),
        "calls_in_window": {
            "module_load": sum(1 for a in loads if lo <= a < hi),
            "allocation": len(r.api_calls(r"^(cudaMalloc\w*|cudaFree\w*)$", lo, hi)),
            "sync": len(r.api_calls(r"Synchronize$", lo, hi))},
        "d2h_dst": sorted({m["dst"] for m in checks}),
        "after_loop": {"s": round((end - hi) / 1e9, 3), "gpu_busy_pct": pct(r.busy_ns(hi, end), end - hi),
                       "module_loads": sum(1 for a in loads if hi <= a < end)},
        "cpu_part_s": round((h2d[0]["start"] - syncs[0][1]) / 1e9, 3),
        "first_iteration_s": round((bounds[1] - bounds[0]) / 1e9, 3),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
