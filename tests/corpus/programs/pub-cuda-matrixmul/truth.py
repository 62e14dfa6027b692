"""Truth figures for pub-cuda-matrixmul (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

NVIDIA's matrixMul sample at 4096 x 4096. Iterations: the ``MatrixMulCUDA`` kernels
(``iterations``: one warm-up launch, synchronised, then the timed loop of launches on
the same stream).

Steady window: from the start of the 3rd kernel (index 2) to the end of the last one
(``steady_kernels`` = N - 2). Figures of it: ``window_ms``, ``gpu_busy_pct`` (union of
kernels, copies and memsets), ``gpu_idle_pct``, ``largest_gap_us``, ``kernel_ms_median``,
``launch_call_us_median`` (the host's cudaLaunchKernel calls, all made within
milliseconds: ``last_launch_ms_before_window``, how long before the window's start the
last launch call started; the host then waits in cudaEventSynchronize), ``calls_in_window`` (synchronisations, allocations,
module loads starting in it), ``grid_blocks`` and ``streams``.
Also ``startup_s`` (first CUDA call to the first kernel) and ``process_s``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, ms, pct  # noqa: E402

SKIP = 2


def main(path: str) -> dict:
    r = Report(path)
    ks = r.kernels()
    lo, hi = ks[SKIP][0], ks[-1][1]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    launches = r.launch_calls()
    calls = r.api_calls()
    return {
        "iterations": len(ks),
        "steady_kernels": len(ks) - SKIP,
        "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "largest_gap_us": round(float((gaps[:, 1] - gaps[:, 0]).max()) / 1e3, 2) if len(gaps) else 0,
        "kernel_ms_median": ms(float(np.median([b - a for a, b, *_ in ks]))),
        "launch_call_us_median": round(float(np.median([b - a for a, b, *_ in launches])) / 1e3, 1),
        "last_launch_ms_before_window": ms(lo - launches[-1][0]),
        "calls_in_window": {
            "sync": len(r.api_calls(r"Synchronize$", lo, hi)),
            "allocation": len(r.api_calls(r"^(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc)$", lo, hi)),
            "module_load": len(r.api_calls(r"^(cuLibraryLoad\w*|cuModuleLoad\w*)$", lo, hi))},
        "grid_blocks": sorted({g for (g,) in r.q(
            "select gridX * gridY * gridZ from CUPTI_ACTIVITY_KIND_KERNEL")}),
        "streams": sorted({k[3] for k in ks}),
        "startup_s": round((ks[0][0] - calls[0][0]) / 1e9, 3),
        "process_s": round((calls[-1][1] - calls[0][0]) / 1e9, 3),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
