"""Truth figures for cpp-host-work, from the export alone (sqlite3 + numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 300 NVTX push/pop ranges `iteration` (default domain);
each holds ~1.5 ms of host CPU work (sorting) and then three `fma_pass` launches on one
non-blocking stream, no sync, no allocation, no copies in the loop. One warm-up
`fma_pass` runs before the loop, outside any range.

Figures (times in ns on the session clock unless the key says ms/us):
- iterations: the `iteration` ranges. A kernel belongs to the range in which its launch
  call (the CUDA runtime/driver row with the kernel's correlationId, same process)
  started. kernels_total: every `fma_pass`; kernels_in_ranges: those launched in a range.
- launches_per_iteration: launch calls (cudaLaunchKernel / cuLaunchKernel*) starting
  inside each range: median, min, max over all ranges.
- The ranges do not run ahead of the GPU: each range's kernels start during its launch
  calls and end ~0.3 ms after the range (gpu_end_after_range_end_us_median), long before
  the next range's kernels. Steady window: from the start of the 3rd range to
  the later of the last range's end and the GPU end of the last kernel launched in it
  (298 steady iterations plus the last one's GPU tail).
- busy_pct / idle_pct: union of all GPU work (kernels, copies, memsets) in the window,
  as % of the window, and the rest.
- host_work_share_pct (the designed cause's share): the GPU-idle time of the window in
  the idle gaps that end at the GPU start of the FIRST kernel of a steady iteration
  (the gaps the host's CPU work left: the GPU waits from the end of the previous
  iteration's kernels until this iteration's first kernel, launched after the sorting),
  as % of the window. Split into idle_before_first_launch_call_pct (the part of those
  gaps before the iteration's first launch call starts: pure CPU work) and
  idle_in_first_launch_pct (from that call's start to its kernel's start).
  other_idle_pct: every other idle gap of the window (between the 3 kernels of an
  iteration).
- Per steady iteration (3rd..last), medians: host_ms (range duration), host_cpu_work_ms
  (range start to its first launch call's start), period_ms (range start to the next
  range's start, the last range left out), gpu_ms (sum of its kernels' durations),
  gpu_span_ms (its first kernel's start to its last kernel's end).
- kernel_us_median: `fma_pass` kernels starting in the window.
- calls_in_steady_ranges: CUDA API calls starting in [3rd range start, last range end)
  whose name (without _vNNNN) is a sync (*Synchronize*, cudaStreamWaitEvent,
  cudaEventQuery), an allocation or free (*Malloc*, *Free*, cuMemAlloc*, cuMemFree*,
  cuMemCreate, cudaHostAlloc), a copy or a memset (*Memcpy*, *Memset*), or a
  module/library load (cuModuleLoad*, cuLibraryLoad*): count per name (the design: none);
  sync_alloc_copy_calls_in_steady_ranges: their total. calls_in_gpu_tail: the same
  calls starting after the last range's end but inside the window (the GPU tail): the
  program's one cudaStreamSynchronize after the loop, which waits on the last
  iteration's kernels (the GPU is busy then: it costs no GPU-idle time).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, pct  # noqa: E402

KERNEL = "fma_pass"
SKIP = 2
WATCHED = (r"(Synchronize|^cudaStreamWaitEvent|^cudaEventQuery|Malloc|Free|^cuMemAlloc|"
           r"^cuMemFree|^cuMemCreate$|^cudaHostAlloc|Memcpy|Memset|^cuModuleLoad|"
           r"^cuLibraryLoad)")


def med(values: list[float], scale: float) -> float | None:
    return round(float(np.median(values)) / scale, 3) if values else None


def main(path: str) -> dict:
    r = Report(path)
    its = r.ranges(r"^iteration$", domain="")
    out: dict = {"iterations": len(its)}
    if len(its) <= SKIP + 1:
        return out | {"error": "too few iteration ranges"}
    launches = r.launch_calls()
    lstart = np.array([a for a, *_ in launches], dtype=np.int64)
    by_corr = {(((g >> 24) & THREAD_MASK), c): a for a, _b, _n, g, c in launches}
    rows = r.q("select start, end, shortName, correlationId, globalPid from "
               "CUPTI_ACTIVITY_KIND_KERNEL order by start")
    ks = [(a, b, c, by_corr.get((((gp >> 24) & THREAD_MASK), c)))
          for a, b, n, c, gp in rows if r.strings.get(n) == KERNEL]
    starts = np.array([rg.start for rg in its], dtype=np.int64)
    ends = np.array([rg.end for rg in its], dtype=np.int64)
    per_it: list[list[tuple[int, int]]] = [[] for _ in its]
    for a, b, _c, la in ks:
        if la is None:
            continue
        i = int(np.searchsorted(starts, la, side="right")) - 1
        if i >= 0 and la < ends[i]:
            per_it[i].append((a, b))
    n_launch = []
    first_call = []
    for rg in its:
        lo_i = int(np.searchsorted(lstart, rg.start, side="left"))
        hi_i = int(np.searchsorted(lstart, rg.end, side="left"))
        n_launch.append(hi_i - lo_i)
        first_call.append(int(lstart[lo_i]) if hi_i > lo_i else None)

    lo = its[SKIP].start
    hi = max(its[-1].end, max((b for _a, b in per_it[-1]), default=its[-1].end))
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)

    # Gaps ending at the first kernel of a steady iteration: the host's CPU work.
    host_gaps, host_pre_call = [], []
    for i in range(SKIP, len(its)):
        if not per_it[i]:
            continue
        k0 = min(a for a, _b in per_it[i])
        for ga, gb in gaps.tolist():
            if gb == k0:
                host_gaps.append((ga, gb))
                if first_call[i] is not None:
                    host_pre_call.append((ga, min(gb, max(ga, first_call[i]))))
    hg = np.array(host_gaps, dtype=np.int64).reshape(-1, 2)
    hp = np.array(host_pre_call, dtype=np.int64).reshape(-1, 2)
    host_idle = int((hg[:, 1] - hg[:, 0]).sum()) if len(hg) else 0
    pre_idle = int((hp[:, 1] - hp[:, 0]).sum()) if len(hp) else 0
    gap_total = int((gaps[:, 1] - gaps[:, 0]).sum()) if len(gaps) else 0

    steady = range(SKIP, len(its))
    host_ms = [its[i].ns for i in steady]
    cpu_ms = [first_call[i] - its[i].start for i in steady if first_call[i] is not None]
    period = [its[i + 1].start - its[i].start for i in range(SKIP, len(its) - 1)]
    gpu_sum = [sum(b - a for a, b in per_it[i]) for i in steady if per_it[i]]
    gpu_span = [max(b for _a, b in per_it[i]) - min(a for a, _b in per_it[i])
                for i in steady if per_it[i]]
    lag = [max(b for _a, b in per_it[i]) - its[i].end for i in range(len(its)) if per_it[i]]
    kin = [b - a for a, b, *_ in ks if lo <= a < hi]
    host_hi = its[-1].end
    in_loop = {k: v[0] for k, v in sorted(r.call_time_by_name(
        r.api_calls(WATCHED, lo, host_hi)).items())}
    in_tail = {k: v[0] for k, v in sorted(r.call_time_by_name(
        r.api_calls(WATCHED, host_hi, hi)).items())} if hi > host_hi else {}
    out |= {
        "steady_iterations": len(its) - SKIP,
        "steady_window_ns": [int(lo), int(hi)],
        "steady_ms": round(span / 1e6, 3),
        "kernels_total": len(ks),
        "kernels_in_ranges": sum(len(p) for p in per_it),
        "launches_per_iteration": {"median": float(np.median(n_launch)),
                                   "min": int(min(n_launch)), "max": int(max(n_launch))},
        "gpu_end_after_range_end_us_median": med(lag, 1e3),
        "busy_pct": pct(busy, span),
        "idle_pct": pct(span - busy, span),
        "host_work_share_pct": pct(host_idle, span),
        "idle_before_first_launch_call_pct": pct(pre_idle, span),
        "idle_in_first_launch_pct": pct(host_idle - pre_idle, span),
        "other_idle_pct": pct(gap_total - host_idle, span),
        "host_gaps": len(hg),
        "host_gap_us_median": med([b - a for a, b in host_gaps], 1e3),
        "host_ms_median": med(host_ms, 1e6),
        "host_cpu_work_ms_median": med(cpu_ms, 1e6),
        "period_ms_median": med(period, 1e6),
        "gpu_ms_median": med(gpu_sum, 1e6),
        "gpu_span_ms_median": med(gpu_span, 1e6),
        "kernels_in_window": len(kin),
        "kernel_us_median": med(kin, 1e3),
        "calls_in_steady_ranges": in_loop,
        "sync_alloc_copy_calls_in_steady_ranges": int(sum(in_loop.values())),
        "calls_in_gpu_tail": in_tail,
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
