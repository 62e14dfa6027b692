"""Truth figures for cupy-alloc-nopool (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX push/pop ranges ``iter`` (default domain, cupy.cuda.nvtx), one per
iteration; their count is ``iterations``. Every cudaFree waits for the device, so the
ranges are synchronous with the GPU: the work an iteration launches runs inside it.

Steady window: from the start of the 3rd ``iter`` range (index 2) to the end of the last
one (``steady_iterations`` = N - 2; iteration 0 compiles CuPy's kernels with NVRTC and
initialises cuBLAS). Figures of the window, on the device of the first GPU work:
  * ``gpu_busy_pct``: the union of kernels, copies and memsets, % of the window;
    ``gpu_idle_pct`` the rest.
  * ``allocation_pct`` (the designed cause's share): the GPU idle time of the window
    that falls inside an allocation call of the launching thread (the thread of the
    ``iter`` ranges): any CUDA runtime/driver call whose name contains ``Malloc`` or
    ``Free``, or starts with ``cuMemAlloc``, % of the window. Split into
    ``malloc_idle_pct`` (the *Malloc*/cuMemAlloc* calls) and ``free_idle_pct`` (*Free*).
  * ``alloc_gap_idle_pct``: the broad reading: the whole of every idle stretch of the
    window that overlaps such a call (the dispatch and launch after a cudaFree drained
    the GPU included); ``other_idle_pct`` = idle outside allocation calls (CuPy's Python
    dispatch and launch latency), ``idle_gaps_without_alloc_pct``: idle stretches that
    touch no allocation call at all, ``idle_gaps_without_alloc_over_20us``: how many of
    those last over 20 us.
  * ``host_in_alloc_calls_pct``: the union of those calls, % of the window.
Per steady iteration (calls of the launching thread starting inside its range):
``alloc_calls_per_iteration`` {name: median}, ``alloc_calls_per_iteration_min_max``
(all allocation calls together), ``alloc_call_us_median`` {name: median duration};
``cudaFree_gpu_busy_us_mean`` / ``cudaFree_gpu_idle_us_mean``: the mean time of a
cudaFree with the GPU busy (waiting for it) and idle (freeing);
``cudaFree_returns_on_idle_gpu_pct``: cudaFree calls that return with nothing running on
the GPU (the implicit synchronisation drained it). ``launches_per_iteration``: kernel
launch calls in the range (median; min, max); ``gpu_ms_per_iteration_median``: the union
of GPU work in a range; ``iteration_ms_median``; ``gemm_*``: kernels whose name contains
"gemm" (cuBLAS); ``kernel_time_top``: the 5 kernel names with the most time in the window.
What must stay silent: ``sync_calls_in_window`` (explicit *Synchronize* calls of the
process: none in the loop), ``memcpy_in_window`` / ``pageable_memcpy_in_window`` /
``h2d_in_window`` (no copy in the loop), ``module_loads_in_window`` (no compilation or
module load in the steady state; ``module_loads_iteration_0_1`` is where they are),
``small_grid_kernel_time_pct`` (kernel time of the window in grids of fewer blocks than
the GPU has SMs, % of kernel time). Also ``first_iteration_ms``, ``second_iteration_ms``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, iv, ms, overlap_ns, pct, union, window_of  # noqa: E402

SKIP = 2
ALLOC = r"(Malloc|Free|^cuMemAlloc)"
SYNC = r"Synchronize"
MODULE_LOAD = r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$"
OTHER_GAP_NS = 20_000


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def med(values: list, scale: float = 1.0, nd: int = 2) -> float | None:
    return round(float(np.median(values)) / scale, nd) if len(values) else None


def main(path: str) -> dict:
    r = Report(path)
    its = r.ranges(r"^iter$", domain="")
    out: dict = {"iterations": len(its), "range": "iter"}
    if len(its) <= SKIP + 1:
        return out | {"error": "too few iter ranges"}
    devices = r.devices()
    dev = devices[0] if devices else None
    tid = its[SKIP].gtid
    pid = pid_of(tid)
    lo, hi = window_of(its, SKIP)
    win = hi - lo
    steady = its[SKIP:]

    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    gaps = r.idle_gaps(lo, hi, dev)
    idle = win - busy

    # allocation calls of the launching thread
    allocs = [c for c in r.api_calls(ALLOC) if c[3] == tid]
    in_win = [c for c in allocs if lo <= c[0] < hi]
    mallocs = [c for c in in_win if "Free" not in c[2]]
    frees = [c for c in in_win if "Free" in c[2]]
    alloc_idle = overlap_ns(gaps, iv(in_win), lo, hi) if len(gaps) else 0
    malloc_idle = overlap_ns(gaps, iv(mallocs), lo, hi) if len(gaps) else 0
    free_idle = overlap_ns(gaps, iv(frees), lo, hi) if len(gaps) else 0

    # idle stretches touching an allocation call (broad) and those touching none
    ua = union(iv(in_win))
    touching, untouched = 0, []
    for a, b in gaps.tolist():
        k = int(np.searchsorted(ua[:, 1], a, side="right")) if len(ua) else 0
        if len(ua) and k < len(ua) and ua[k, 0] < b:
            touching += b - a
        else:
            untouched.append(b - a)

    # cudaFree: time with the GPU busy (waiting) vs idle (freeing), and how they return
    def idle_in(a: int, b: int) -> int:
        """GPU idle time of the window inside [a, b) (the gaps are disjoint, sorted)."""
        i0 = int(np.searchsorted(gaps[:, 1], a, side="right"))
        i1 = int(np.searchsorted(gaps[:, 0], b, side="left"))
        g = gaps[i0:i1]
        return int((np.minimum(g[:, 1], b) - np.maximum(g[:, 0], a)).clip(0).sum())

    free_idle_each = [idle_in(a, b) for a, b, *_ in frees]
    free_busy = [(b - a) - x for (a, b, *_), x in zip(frees, free_idle_each)]
    on_idle = 0
    for _a, b, *_ in frees:
        k = int(np.searchsorted(u[:, 0], b, side="right")) - 1
        if not (k >= 0 and u[k, 1] > b):
            on_idle += 1

    # per steady iteration: calls of the launching thread inside the range
    a_starts = np.array([c[0] for c in allocs], dtype=np.int64)
    launches = [c for c in r.launch_calls() if c[3] == tid]
    l_starts = np.array([c[0] for c in launches], dtype=np.int64)
    per_name: dict = defaultdict(list)
    names = sorted({c[2] for c in in_win})
    totals, n_launch, gpu_ms = [], [], []
    for s in steady:
        i0, i1 = np.searchsorted(a_starts, [s.start, s.end], side="left")
        inside = allocs[int(i0):int(i1)]
        totals.append(len(inside))
        for name in names:
            per_name[name].append(sum(1 for c in inside if c[2] == name))
        j0, j1 = np.searchsorted(l_starts, [s.start, s.end], side="left")
        n_launch.append(int(j1 - j0))
        gpu_ms.append(clipped_ns(u, s.start, s.end))
    by_dur: dict = defaultdict(list)
    for a, b, name, _ in in_win:
        by_dur[name].append(b - a)

    # kernels of the window
    sms = r.q("select smCount from TARGET_INFO_GPU limit 1") \
        if r.has("TARGET_INFO_GPU") else []
    sm_count = int(sms[0][0]) if sms and sms[0][0] else 132
    krows = r.q("select start, end, shortName, gridX * gridY * gridZ from "
                "CUPTI_ACTIVITY_KIND_KERNEL where start >= ? and start < ?"
                + ("" if dev is None else f" and deviceId = {int(dev)}"), lo, hi) \
        if r.has("CUPTI_ACTIVITY_KIND_KERNEL") else []
    ktime: dict = defaultdict(lambda: [0, 0])
    small = total_k = 0
    gemm = []
    for a, b, n, blocks in krows:
        name = r.strings.get(n, str(n))
        ktime[name][0] += 1
        ktime[name][1] += b - a
        total_k += b - a
        if blocks < sm_count:
            small += b - a
        if "gemm" in name.lower():
            gemm.append(b - a)
    top = sorted(ktime.items(), key=lambda kv: -kv[1][1])[:5]

    # what must stay silent
    syncs = [c for c in r.api_calls(SYNC, lo, hi) if pid_of(c[3]) == pid]
    cps = [m for m in r.memcpys(dev) if lo <= m["start"] < hi]
    loads = [c for c in r.api_calls(MODULE_LOAD) if pid_of(c[3]) == pid]
    early = sum(1 for a, *_ in loads if its[0].start <= a < its[min(SKIP, len(its) - 1)].start)

    out |= {
        "steady_iterations": len(steady),
        "steady_window_ms": ms(win),
        "ms_per_iteration": ms(win / len(steady)),
        "iteration_ms_median": ms(float(np.median([s.ns for s in steady]))),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(idle, win),
        "allocation_pct": pct(alloc_idle, win),
        "malloc_idle_pct": pct(malloc_idle, win),
        "free_idle_pct": pct(free_idle, win),
        "alloc_gap_idle_pct": pct(touching, win),
        "other_idle_pct": pct(idle - alloc_idle, win),
        "idle_gaps_without_alloc_pct": pct(sum(untouched), win),
        "idle_gaps_without_alloc_over_20us": sum(1 for x in untouched if x > OTHER_GAP_NS),
        "host_in_alloc_calls_pct": pct(clipped_ns(iv(in_win), lo, hi), win),
        "alloc_calls_per_iteration": {k: med(v, 1, 1) for k, v in per_name.items()},
        "alloc_calls_per_iteration_min_max": [int(min(totals)), int(max(totals))],
        "alloc_call_us_median": {k: med(v, 1e3) for k, v in sorted(by_dur.items())},
        "cudaFree_gpu_busy_us_mean": round(float(np.mean(free_busy)) / 1e3, 2)
        if free_busy else None,
        "cudaFree_gpu_idle_us_mean": round(float(np.mean(free_idle_each)) / 1e3, 2)
        if free_idle_each else None,
        "cudaFree_returns_on_idle_gpu_pct": pct(on_idle, len(frees)),
        "launches_per_iteration": med(n_launch, 1, 1),
        "launches_per_iteration_min_max": [int(min(n_launch)), int(max(n_launch))],
        "gpu_ms_per_iteration_median": ms(float(np.median(gpu_ms))),
        "kernels_in_window": len(krows),
        "gemm_kernels_in_window": len(gemm),
        "gemm_us_median": med(gemm, 1e3),
        "kernel_time_top": [[k, v[0], ms(v[1])] for k, v in top],
        "sync_calls_in_window": len(syncs),
        "memcpy_in_window": len(cps),
        "pageable_memcpy_in_window": sum(1 for m in cps
                                         if "Pageable" in (m["src"], m["dst"])),
        "h2d_in_window": sum(1 for m in cps if m["kind"] == "Host-to-Device"),
        "module_loads_in_window": sum(1 for a, *_ in loads if lo <= a < hi),
        "module_loads_iteration_0_1": early,
        "module_loads_total": len(loads),
        "small_grid_kernel_time_pct": pct(small, total_k),
        "sm_count": sm_count,
        "first_iteration_ms": ms(its[0].ns),
        "second_iteration_ms": ms(its[1].ns),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
