"""Truth figures for cupy-streams-overlap (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step`` (default domain), one per step; their count is
``iterations``. The ranges are host-side and short (the host enqueues a step in tens of
us and runs up to 4 steps ahead), so a step's GPU work is found through the CUDA calls
made inside its range by the range's thread: each call's correlationId (within the
process) names the kernel (``cuLaunchKernel``) or copy (``cudaMemcpyAsync``) it
enqueued. Step i enqueues kernel i (compute stream) and the host-to-device copy of
chunk i + 1 (copy stream; the last step has none). ``steps_mapped``: steps with exactly
one kernel found that way.

Steady window: from the earliest GPU start of the work launched in the 3rd step (step
index 2: its kernel or its copy) to the latest GPU end of the work launched in the last
step (its kernel). ``steady_steps`` = steps 2 .. N-1.

Figures of the window (the device of the first GPU work):
  * ``gpu_busy_pct``: the union of every kernel, copy, memset (and graph, none here) in
    the window, % of the window; ``gpu_idle_pct`` = 100 - busy; ``kernel_busy_pct``: the
    union of kernels alone. ``idle_gaps_over_10us``: idle stretches longer than 10 us,
    ``idle_gap_max_us`` the longest.
  * ``kernel_ms_median``: median duration of the steady steps' kernels;
    ``kernel_gap_us_median`` / ``_max``: from one steady kernel's end to the next one's
    start; ``ms_per_step``: window / steady steps.
  * ``copy_overlap_pct``: of the time of the copies launched by the steady steps (their
    union, in the window), the share during which a kernel was running (overlap with the
    union of kernels); ``h2d_copy_ms_median`` their median duration; ``h2d_pinned`` /
    ``h2d_pageable``: their source memory kinds.
  * ``event_sync_*``: the host's ``cudaEventSynchronize`` calls (the lookahead throttle)
    that start in the window: count, total ms, % of the window;
    ``gpu_idle_during_event_sync_ms``: GPU idle time (device-wide, every idle stretch,
    the ~1 us launch gaps between back-to-back kernels included) that falls inside those
    calls, and ``event_syncs_with_gpu_idle``: how many of them overlap an idle stretch
    longer than 10 us (a drained GPU, not a launch gap);
    ``kernels_queued_at_sync_return_min``: the fewest loop kernels not yet finished when
    a throttle call returned (launched before the return, ending after it): how much
    work the host still had queued when it woke up.
  * ``step_range_us_median``: the NVTX range's own (host) duration.
  * ``in_window_calls``: calls of the process from the window's start to the end of the
    last step's range (the loop; the final stream synchronizes come after it) that would
    be findings of their own (allocations, module loads, other synchronisations).
Also: kernels outside any step (the warm-up), and the device-to-host copies.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, overlap_ns, pct  # noqa: E402

SKIP = 2
LONG_GAP_NS = 10_000      # an idle stretch longer than this is more than a launch gap
ALLOC = re.compile(r"^(cudaMalloc\w*|cudaFree\w*|cuMemAlloc\w*|cuMemFree\w*|cudaHostAlloc|"
                   r"cuMemHostAlloc|cudaMallocHost|cudaFreeHost)$")
MODULE_LOAD = re.compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$")
SYNC = re.compile(r"^(cu|cuda)(Ctx|Device|Stream|Event)Synchronize\w*$")


def api_rows(r: Report) -> list[tuple[int, int, str, int, int]]:
    """(start, end, name without _vNNNN, globalTid, correlationId) of every CUDA call."""
    out = []
    for a, b, n, g, c in r.q("select start, end, nameId, globalTid, correlationId from "
                             "CUPTI_ACTIVITY_KIND_RUNTIME order by start"):
        out.append((a, b, re.sub(r"_v\d+$", "", r.strings.get(n, str(n))), g, c))
    return out


def main(path: str) -> dict:
    r = Report(path)
    steps = r.ranges(r"^step$")
    out: dict = {"iterations": len(steps), "range": "step"}
    if len(steps) <= SKIP + 1:
        return out
    devices = r.devices()
    dev = devices[0] if devices else None
    pid = (steps[0].gtid >> 24) & THREAD_MASK

    # GPU rows by (pid, correlationId)
    kern = {}
    for a, b, c, gp in r.q("select start, end, correlationId, globalPid from "
                           "CUPTI_ACTIVITY_KIND_KERNEL"):
        kern[((gp >> 24) & THREAD_MASK, c)] = (a, b)
    copy_pid = {(c, s): (gp >> 24) & THREAD_MASK for c, s, gp in r.q(
        "select correlationId, start, globalPid from CUPTI_ACTIVITY_KIND_MEMCPY")}
    copies = {(copy_pid[(m["corr"], m["start"])], m["corr"]): m for m in r.memcpys()}

    calls = api_rows(r)
    starts = np.array([c[0] for c in calls], dtype=np.int64)
    step_kernels: list[list[tuple[int, int]]] = []
    step_copies: list[list[dict]] = []
    for s in steps:
        i0 = int(np.searchsorted(starts, s.start, "left"))
        i1 = int(np.searchsorted(starts, s.end, "left"))
        ks, cs = [], []
        for a, b, name, g, c in calls[i0:i1]:
            if g != s.gtid:
                continue
            key = ((g >> 24) & THREAD_MASK, c)
            if key in kern:
                ks.append(kern[key])
            if key in copies:
                cs.append(copies[key])
        step_kernels.append(ks)
        step_copies.append(cs)
    mapped = sum(1 for ks in step_kernels if len(ks) == 1)
    out["steps_mapped"] = mapped
    if mapped != len(steps):
        out["error"] = "not every step maps to one kernel"
        return out

    first = [k[0] for k in step_kernels[SKIP]] + [c["start"] for c in step_copies[SKIP]]
    last = [k[1] for k in step_kernels[-1]] + [c["end"] for c in step_copies[-1]]
    lo, hi = min(first), max(last)
    win = hi - lo
    steady = range(SKIP, len(steps))

    gpu = r.gpu_intervals(dev)
    busy = clipped_ns(gpu, lo, hi)
    kiv = np.array([(a, b) for a, b, *_ in r.kernels(dev)], dtype=np.int64).reshape(-1, 2)
    kernel_busy = clipped_ns(kiv, lo, hi)
    gaps = r.idle_gaps(lo, hi, dev)
    glen = gaps[:, 1] - gaps[:, 0] if len(gaps) else np.zeros(0, dtype=np.int64)

    loop_k = np.array([step_kernels[i][0] for i in steady], dtype=np.int64)
    kdur = loop_k[:, 1] - loop_k[:, 0]
    kgap = loop_k[1:, 0] - loop_k[:-1, 1]

    st_copies = [c for i in steady for c in step_copies[i]]
    civ = np.array([(c["start"], c["end"]) for c in st_copies], dtype=np.int64).reshape(-1, 2)
    copy_ns = clipped_ns(civ, lo, hi)
    copy_over = overlap_ns(civ, kiv, lo, hi)

    # the lookahead throttle: cudaEventSynchronize on the steps' thread
    ev = [(a, b) for a, b, name, g, _ in calls
          if name == "cudaEventSynchronize" and g == steps[0].gtid and lo <= a < hi]
    ev_iv = np.array(ev, dtype=np.int64).reshape(-1, 2)
    long_gaps = gaps[glen > LONG_GAP_NS] if len(gaps) else gaps
    idle_in_sync = 0
    syncs_with_idle = 0
    for a, b in ev:
        one = np.array([(a, b)], dtype=np.int64)
        idle_in_sync += overlap_ns(one, gaps) if len(gaps) else 0
        syncs_with_idle += (overlap_ns(one, long_gaps) if len(long_gaps) else 0) > 0
    all_k = np.array([k[0] for k in step_kernels], dtype=np.int64).reshape(-1, 2)
    launched = np.array([s.start for s in steps], dtype=np.int64)   # kernel i: in range i
    queued = []
    for _, b in ev:
        # loop kernels launched (range started) before the return and ending after it
        queued.append(int(((launched < b) & (all_k[:, 1] > b)).sum()))

    other = {"allocations": 0, "module_loads": 0, "other_syncs": 0}
    for a, b, name, g, _ in calls:
        if not lo <= a < steps[-1].end or (g >> 24) & THREAD_MASK != pid:
            continue
        if ALLOC.match(name):
            other["allocations"] += 1
        elif MODULE_LOAD.match(name):
            other["module_loads"] += 1
        elif SYNC.match(name) and name != "cudaEventSynchronize":
            other["other_syncs"] += 1

    in_steps = {k for ks in step_kernels for k in ks}
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host"]
    out |= {
        "steady_steps": len(steady),
        "steady_window_ms": ms(win),
        "ms_per_step": ms(win / len(steady)),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "kernel_busy_pct": pct(kernel_busy, win),
        "idle_gaps_over_10us": int((glen > 10_000).sum()),
        "idle_gap_max_us": round(float(glen.max()) / 1e3, 2) if len(glen) else 0.0,
        "kernel_ms_median": ms(float(np.median(kdur))),
        "kernel_gap_us_median": round(float(np.median(kgap)) / 1e3, 2),
        "kernel_gap_us_max": round(float(kgap.max()) / 1e3, 2),
        "h2d_copies_steady": len(st_copies),
        "h2d_copy_ms_median": ms(float(np.median(civ[:, 1] - civ[:, 0]))) if len(civ) else None,
        "h2d_pinned": sum(1 for c in st_copies if c["src"] == "Pinned"),
        "h2d_pageable": sum(1 for c in st_copies if c["src"] == "Pageable"),
        "copy_overlap_pct": pct(copy_over, copy_ns),
        "event_sync_calls": len(ev),
        "event_sync_ms": ms(clipped_ns(ev_iv, lo, hi)),
        "event_sync_pct": pct(clipped_ns(ev_iv, lo, hi), win),
        "gpu_idle_during_event_sync_ms": ms(idle_in_sync),
        "event_syncs_with_gpu_idle": int(syncs_with_idle),
        "kernels_queued_at_sync_return_min": min(queued) if queued else None,
        "step_range_us_median": round(float(np.median([steps[i].ns for i in steady])) / 1e3, 2),
        "in_window_calls": other,
        "kernels_total": len(kiv),
        "kernels_outside_steps": sum(1 for a, b, *_ in r.kernels(dev) if (a, b) not in in_steps),
        "d2h_copies": len(d2h),
        "d2h_in_window": sum(1 for m in d2h if lo <= m["start"] < hi),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
