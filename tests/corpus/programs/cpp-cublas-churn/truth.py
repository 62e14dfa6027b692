"""Truth figures for cpp-cublas-churn, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: one NVTX range `batch N` per batch (100); inside each,
cublasCreate + 3 cudaMalloc, then the first GPU work of the batch (the `fill` kernel's
launch), the SGEMM, cudaDeviceSynchronize, then 3 cudaFree + cublasDestroy.
Steady state: from the start of `batch 2` (the third range) to the end of the last.

The designed cause's share, churn_pct: the GPU-idle time of the steady window inside
each batch's churn phases, [batch start, first launch call) (cublasCreate and the
allocations) and [end of the batch's own cudaDeviceSynchronize (the first one after its
last launch call), batch end) (the frees and cublasDestroy), as a % of the window.
The capture (nsys 2025.3.1, cuBLAS 13.1) has no CUBLAS_EVENTS table: nsys's cuBLAS trace
shows up as NVTX ranges in the `cuBLAS` domain, and only cublasCreate_v2 is traced (not
cublasDestroy or cublasSgemm). So the split is:
  handle_create_pct   idle time under the cublasCreate ranges,
  handle_destroy_pct  idle time from the end of the third cudaFree after the batch's
                      sync (the program's own frees of C, B, A) to the batch end
                      (cublasDestroy: its syncs, event destroys and workspace frees),
  user_alloc_pct      idle time under the program's own 3 cudaMalloc + 3 cudaFree.
Cross-checks: churn_calls_pct (GPU-idle time overlapped by the churn calls themselves:
the cublasCreate ranges, cudaMalloc/cudaFree, module/library loads and unloads), and per-
batch counts of module/library loads, allocations, events and cuBLAS calls in the steady
state; the slowest steady batch (one cudaMalloc inside cublasCreate may stall for tens
of ms).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, iv, overlap_ns, pct, window_of  # noqa: E402

SKIP = 2
LOADS = r"^cu(Module|Library)(Load|Unload)"
ALLOC = r"^cuda(Malloc|Free)$|^cuMem(Alloc|Free)"
LAUNCH = r"(Launch|LaunchKernel)"


def cublas_calls(r: Report, lo: int, hi: int) -> list[tuple[int, int, str]]:
    """(start, end, name) of traced cuBLAS API calls starting in [lo, hi): rows of
    CUBLAS_EVENTS where that table exists, else NVTX ranges of the `cuBLAS` domain (how
    nsys 2025.3 exports its cuBLAS trace)."""
    out = []
    if r.has("CUBLAS_EVENTS"):
        cols = {c[1] for c in r.q("pragma table_info(CUBLAS_EVENTS)")}
        name_col = "nameId" if "nameId" in cols else "textId" if "textId" in cols else None
        if name_col is not None:
            for a, b, n in r.q(f"select start, end, {name_col} from CUBLAS_EVENTS "
                               "where start >= ? and start < ? order by start", lo, hi):
                out.append((a, b, re.sub(r"_v\d+$", "", r.strings.get(n, str(n)))))
    if not out:
        for rg in r.ranges(".", domain="cuBLAS"):
            if lo <= rg.start < hi:
                out.append((rg.start, rg.end, re.sub(r"_v\d+$", "", rg.name)))
    return out


def main() -> int:
    r = Report(sys.argv[1])
    batches = r.ranges(r"^batch \d+$")
    result: dict = {"iterations": len(batches)}
    if len(batches) <= SKIP:
        print(json.dumps(result | {"error": "too few batch ranges"}))
        return 0
    lo, hi = window_of(batches, SKIP)
    span = hi - lo
    steady = batches[SKIP:]
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    main_tid = steady[0].gtid
    calls = [c for c in r.api_calls(".", lo, hi) if c[3] == main_tid]
    blas = cublas_calls(r, lo, hi)
    creates = [c for c in blas if c[2] == "cublasCreate"]
    phases = []
    user_allocs = []          # the program's own cudaMalloc x3 / cudaFree x3
    destroy_phases = []
    batch_ns = []
    for rg in steady:
        inside = [c for c in calls if rg.start <= c[0] < rg.end]
        batch_ns.append(rg.ns)
        lch = [c for c in inside if re.search(LAUNCH, c[2])]
        if not lch:
            continue
        first, last = lch[0][0], lch[-1][0]
        phases.append((rg.start, first))
        sync = next((c for c in inside if c[2] == "cudaDeviceSynchronize" and c[0] > last),
                    None)
        if sync is None:
            continue
        phases.append((sync[1], rg.end))
        create_end = max((c[1] for c in creates if rg.start <= c[0] < rg.end), default=rg.start)
        user_allocs += [c for c in inside
                        if c[2] == "cudaMalloc" and create_end <= c[0] < first][-3:]
        frees = [c for c in inside if c[2] == "cudaFree" and c[0] >= sync[1]][:3]
        user_allocs += frees
        if len(frees) == 3:
            destroy_phases.append((frees[-1][1], rg.end))
    phase_iv = np.array(phases, dtype=np.int64).reshape(-1, 2)
    churn = overlap_ns(gaps, phase_iv, lo, hi) if len(gaps) else 0
    loads = [c for c in calls if re.search(LOADS, c[2])]
    allocs = [c for c in calls if re.search(ALLOC, c[2])]
    lib_iv = np.concatenate([iv(loads), iv(creates)])
    all_iv = np.concatenate([lib_iv, iv(allocs)])

    def idle_under(x: np.ndarray) -> int:
        return overlap_ns(gaps, x, lo, hi) if len(gaps) and len(x) else 0

    calls_idle = idle_under(all_iv)
    create_idle = idle_under(iv(creates))
    destroy_idle = idle_under(np.array(destroy_phases, dtype=np.int64).reshape(-1, 2))
    user_idle = idle_under(iv(user_allocs))
    ks = [k for k in r.kernels() if lo <= k[0] < hi]
    gemm = [k for k in ks if k[2] != "fill"]
    n = len(steady)
    counts: dict[str, int] = {}
    for c in blas:
        counts[c[2]] = counts.get(c[2], 0) + 1
    events = [c for c in calls if re.search(r"^cudaEvent(Create|Destroy)", c[2])]
    slow = int(np.argmax(batch_ns))
    slow_call = max((c for c in calls if steady[slow].start <= c[0] < steady[slow].end),
                    key=lambda c: c[1] - c[0])
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_batches": n,
        "steady_ms": round(span / 1e6, 3), "us_per_batch": round(span / n / 1e3, 2),
        "us_per_batch_median": round(float(np.median(batch_ns)) / 1e3, 2),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "churn_pct": pct(churn, span),
        "churn_calls_pct": pct(calls_idle, span),
        "handle_create_pct": pct(create_idle, span),
        "handle_destroy_pct": pct(destroy_idle, span),
        "handle_churn_pct": pct(create_idle + destroy_idle, span),
        "user_alloc_pct": pct(user_idle, span),
        "user_alloc_calls": len(user_allocs),
        "slowest_batch": {"name": steady[slow].name, "ms": round(batch_ns[slow] / 1e6, 3),
                          "pct_of_window": pct(batch_ns[slow], span),
                          "longest_call": slow_call[2],
                          "longest_call_ms": round((slow_call[1] - slow_call[0]) / 1e6, 3),
                          "inside_cublasCreate": any(a <= slow_call[0] < b
                                                     for a, b, _ in creates)},
        "module_library_loads_per_batch": round(
            len([c for c in loads if "Load" in c[2]]) / n, 2),
        "module_library_load_us_per_batch": round(
            sum(c[1] - c[0] for c in loads) / n / 1e3, 2),
        "malloc_free_calls_per_batch": round(len(allocs) / n, 2),
        "malloc_free_us_per_batch": round(sum(c[1] - c[0] for c in allocs) / n / 1e3, 2),
        "event_create_destroy_per_batch": round(len(events) / n, 2),
        "cublas_events_table": r.has("CUBLAS_EVENTS"),
        "cublas_calls_per_batch": {k: round(v / n, 2) for k, v in sorted(counts.items())},
        "cublas_create_us_per_batch": round(sum(c[1] - c[0] for c in creates) / n / 1e3, 2),
        "cublas_create_us_median": round(float(np.median([c[1] - c[0] for c in creates]))
                                         / 1e3, 2) if creates else 0.0,
        "gemm_kernels_per_batch": round(len(gemm) / n, 2),
        "gemm_us_per_batch": round(sum(k[1] - k[0] for k in gemm) / n / 1e3, 2),
        "gemm_kernel_names": sorted({k[2] for k in gemm}),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
