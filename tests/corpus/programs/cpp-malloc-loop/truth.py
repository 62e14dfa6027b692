"""Truth figures for cpp-malloc-loop, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: one NVTX range `iter N` per iteration (200), each holding
one cudaMalloc of 256 MiB, one `scratch_pass` kernel and one cudaFree. Steady state: from
the start of the third `iter` range to the end of the last.

The designed cause's share, allocation_pct: the GPU-idle time of the steady window
during which the launching thread was inside cudaMalloc or cudaFree (or the driver's
cuMem* calls they make), as a % of the window. Also: busy %, mean call times, and how
much of each cudaFree was spent waiting for the kernel (GPU busy) vs freeing (GPU idle).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, iv, overlap_ns, pct, window_of  # noqa: E402

SKIP = 2
KERNEL = "scratch_pass"
ALLOC = r"^cuda(Malloc|Free)$|^cuMem(Alloc|Free|Create|Release|Map|Unmap)"


def main() -> int:
    r = Report(sys.argv[1])
    iters = r.ranges(r"^iter \d+$")
    result: dict = {"iterations": len(iters)}
    if len(iters) <= SKIP:
        print(json.dumps(result | {"error": "too few iter ranges"}))
        return 0
    lo, hi = window_of(iters, SKIP)
    span = hi - lo
    n = len(iters) - SKIP
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    main_tid = iters[SKIP].gtid
    calls = [c for c in r.api_calls(ALLOC, lo, hi) if c[3] == main_tid]
    mallocs = [c for c in calls if c[2] == "cudaMalloc"]
    frees = [c for c in calls if c[2] == "cudaFree"]
    call_iv = iv(calls)
    alloc_idle = overlap_ns(gaps, call_iv, lo, hi) if len(gaps) else 0

    malloc_idle = overlap_ns(gaps, iv(mallocs), lo, hi) if len(gaps) else 0
    free_idle = overlap_ns(gaps, iv(frees), lo, hi) if len(gaps) else 0
    free_total = sum(b - a for a, b, *_ in frees)
    ks = [k for k in r.kernels() if k[2] == KERNEL and lo <= k[0] < hi]
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_iterations": n,
        "steady_ms": round(span / 1e6, 3), "us_per_iteration": round(span / n / 1e3, 1),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "allocation_pct": pct(alloc_idle, span),
        "cudaMalloc_idle_pct": pct(malloc_idle, span),
        "cudaFree_idle_pct": pct(free_idle, span),
        "cudaMalloc_per_iteration": round(len(mallocs) / n, 2),
        "cudaFree_per_iteration": round(len(frees) / n, 2),
        "cudaMalloc_us_mean": round(float(np.mean([b - a for a, b, *_ in mallocs])) / 1e3, 1)
        if mallocs else 0.0,
        "cudaFree_us_mean": round(free_total / len(frees) / 1e3, 1) if frees else 0.0,
        "cudaFree_waiting_on_gpu_us_mean": round((free_total - free_idle) / len(frees) / 1e3, 1)
        if frees else 0.0,
        "kernels_in_window": len(ks),
        "kernel_us_mean": round(float(np.mean([k[1] - k[0] for k in ks])) / 1e3, 1)
        if ks else 0.0,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
