"""Truth figures for cpp-mallocasync, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 200 iterations, each one cudaMallocAsync, one
`scratch_pass` kernel and one cudaFreeAsync on one stream, with one NVTX start/end
range `iter N` around the host's enqueueing (the host runs ahead, so these ranges are
short and early: the GPU-side iterations are the kernels). Steady state: from the
start of the third `scratch_pass` kernel to the end of the last.
Figures: busy %, gaps between kernels, the allocation calls' count and time, and the
GPU-idle time overlapped by them (allocation_pct: expected ~0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, iv, overlap_ns, pct  # noqa: E402

SKIP = 2
KERNEL = "scratch_pass"
ALLOC = r"^cuda(Malloc|Free)(Async)?$|^cuMem(Alloc|Free)"


def main() -> int:
    r = Report(sys.argv[1])
    iters = r.ranges(r"^iter \d+$")
    ks = [k for k in r.kernels() if k[2] == KERNEL]
    result: dict = {"iterations": len(iters), "kernels": len(ks)}
    if len(ks) <= SKIP:
        print(json.dumps(result | {"error": "too few scratch_pass kernels"}))
        return 0
    lo, hi = ks[SKIP][0], max(k[1] for k in ks)
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    steady = ks[SKIP:]
    kgaps = np.array([steady[i + 1][0] - steady[i][1] for i in range(len(steady) - 1)],
                     dtype=np.int64)
    calls = r.api_calls(ALLOC)
    in_loop = [c for c in calls if iters and iters[0].start <= c[0] < iters[-1].end]
    call_iv = iv(calls)
    alloc_idle = overlap_ns(gaps, call_iv, lo, hi) if len(gaps) else 0
    by_name: dict[str, list[int]] = {}
    for a, b, name, _ in in_loop:
        by_name.setdefault(name, []).append(b - a)
    syncs = r.api_calls(r"Synchronize$")
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_kernels": len(steady),
        "steady_ms": round(span / 1e6, 3),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "allocation_pct": pct(alloc_idle, span),
        "kernel_us_mean": round(float(np.mean([k[1] - k[0] for k in steady])) / 1e3, 1),
        "kernel_gap_us_mean": round(float(kgaps.mean()) / 1e3, 2) if len(kgaps) else 0.0,
        "kernel_gap_us_max": round(float(kgaps.max()) / 1e3, 2) if len(kgaps) else 0.0,
        "alloc_calls_in_loop": {k: len(v) for k, v in sorted(by_name.items())},
        "alloc_call_us_mean": {k: round(float(np.mean(v)) / 1e3, 2)
                               for k, v in sorted(by_name.items())},
        "sync_calls_during_loop": len([c for c in syncs if iters and
                                       iters[0].start <= c[0] < iters[-1].end]),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
