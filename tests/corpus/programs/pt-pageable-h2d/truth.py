"""Truth figures for pt-pageable-h2d (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step`` (default domain), one per step; their count is
``iterations``. Each range holds the step's upload (``cudaMemcpyAsync`` of 64 MiB from
pageable memory, which holds the thread while the driver stages it) and the launches of
its ~5 kernels, which run after the range has closed, during the next step's upload call.

Steady window: from the start of the 3rd ``step`` range (index 2) to the end of the last
one (``steady_steps`` = N - 2; steps 0-1 hold cuBLAS start-up and the first allocations).
Figures of the window, on the device of the first GPU work:
  * ``gpu_busy_pct``: the union of kernels, copies and memsets, % of the window;
    ``kernel_busy_pct``: the union of kernels alone.
  * ``pageable_copy_pct`` (the designed cause's share): the time in the window during
    which no kernel runs while a host-to-device copy from pageable memory is in flight
    (CUPTI_ACTIVITY_KIND_MEMCPY rows whose copyKind is Host-to-Device and srcKind is
    Pageable, through ENUM_CUDA_MEMCPY_OPER / ENUM_CUDA_MEM_KIND) or the CUDA call that
    enqueued it (same process and correlationId: ``cudaMemcpyAsync``) is running; i.e.
    |(copies U their calls) minus kernels| clipped to the window, % of the window.
    ``pageable_copy_time_pct``: the pageable copies' own GPU time alone;
    ``pageable_call_idle_pct``: the time the GPU does nothing at all (no kernel, copy or
    memset) while the host sits in those calls.
  * ``other_kernel_idle_pct``: kernel idle in the window outside the cause (launch gaps,
    the host's Python between the upload call's return and the launches);
    ``other_idle_gaps_over_20us`` / ``other_idle_gap_max_us``: such stretches.
  * ``h2d``: the pageable host-to-device copies starting in the window: count, per step,
    median ms, mean MiB, GB/s (bytes / copy time), memory kinds; ``h2d_pinned``: pinned
    ones (none by design); ``h2d_call_ms_median``: their calls' durations.
  * per step: ``step_ms_median`` (the range), ``step_period_ms_median`` (one range's start
    to the next), ``kernel_ms_per_step`` (kernel union / steady steps),
    ``kernels_per_step`` (median, and min/max: kernel launch calls of the range's thread
    starting inside the range).
  * what must stay silent: ``small_grid_kernel_pct`` (% of the window's kernel time in
    kernels with fewer blocks than the GPU's SMs, TARGET_INFO_GPU.smCount),
    ``in_window_calls`` (allocations, synchronisations, module loads of the process from
    the window's start to the last range's end), ``d2h_in_window`` and
    ``memsets_in_window``.
Also: the first step's duration (start-up).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, overlap_ns, pct, union, window_of  # noqa: E402

SKIP = 2
GAP_NS = 20_000
ALLOC = re.compile(r"^(cudaMalloc\w*|cudaFree\w*|cuMemAlloc\w*|cuMemFree\w*|cudaHostAlloc|"
                   r"cuMemHostAlloc|cudaMallocHost|cudaFreeHost|cuMemCreate|cuMemMap)$")
SYNC = re.compile(r"^(cu|cuda)(Ctx|Device|Stream|Event)Synchronize\w*$")
MODULE_LOAD = re.compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$")


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def free_of(busy: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The stretches of [lo, hi) not covered by *busy* (N x 2)."""
    u = union(busy)
    u = np.clip(u[(u[:, 1] > lo) & (u[:, 0] < hi)], lo, hi) if len(u) else u
    starts = np.r_[lo, u[:, 1]]
    ends = np.r_[u[:, 0], hi]
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1)


def main(path: str) -> dict:
    r = Report(path)
    steps = r.ranges(r"^step$")
    out: dict = {"iterations": len(steps), "range": "step"}
    if len(steps) <= SKIP + 1:
        return out
    dev = r.devices()[0] if r.devices() else None
    pid = pid_of(steps[0].gtid)
    lo, hi = window_of(steps, SKIP)
    win = hi - lo
    steady = steps[SKIP:]

    gpu = r.gpu_intervals(dev)
    krows = r.q("select start, end, gridX * gridY * gridZ from CUPTI_ACTIVITY_KIND_KERNEL "
                "where deviceId = ?", dev)
    kiv = np.array([(a, b) for a, b, _ in krows], dtype=np.int64).reshape(-1, 2)
    kernel_busy = clipped_ns(kiv, lo, hi)

    # pageable host-to-device copies, and the calls that enqueued them (pid, correlationId)
    kinds, mem = r.enum("ENUM_CUDA_MEMCPY_OPER"), r.enum("ENUM_CUDA_MEM_KIND")
    copies = [(a, b, n, mem.get(s, str(s)), c, pid_of(gp)) for a, b, n, k, s, c, gp in r.q(
        "select start, end, bytes, copyKind, srcKind, correlationId, globalPid from "
        "CUPTI_ACTIVITY_KIND_MEMCPY where deviceId = ?", dev)
        if kinds.get(k, str(k)) == "Host-to-Device"]
    pageable = [c for c in copies if c[3] == "Pageable"]
    calls = {(pid_of(g), c): (a, b) for a, b, g, c in r.q(
        "select start, end, globalTid, correlationId from CUPTI_ACTIVITY_KIND_RUNTIME")}
    copy_iv = np.array([(a, b) for a, b, *_ in pageable], dtype=np.int64).reshape(-1, 2)
    call_iv = np.array([calls[(p, c)] for *_, c, p in pageable if (p, c) in calls],
                       dtype=np.int64).reshape(-1, 2)
    cause = np.vstack([copy_iv, call_iv])
    cause_ns = clipped_ns(cause, lo, hi)
    cause_idle = cause_ns - overlap_ns(cause, kiv, lo, hi)
    call_idle = overlap_ns(call_iv, free_of(gpu, lo, hi), lo, hi) if len(call_iv) else 0

    other = free_of(np.vstack([kiv, cause]), lo, hi)
    olen = other[:, 1] - other[:, 0] if len(other) else np.zeros(0, dtype=np.int64)

    in_win = [c for c in pageable if lo <= c[0] < hi]
    h2d_ns = sum(b - a for a, b, *_ in in_win)
    h2d_bytes = sum(n for _, _, n, *_ in in_win)
    in_win_calls = [calls[(p, c)] for *_, c, p in in_win if (p, c) in calls]

    launches = r.launch_calls()
    per_step = [sum(1 for a, _, _, g, _ in launches if g == s.gtid and s.start <= a < s.end)
                for s in steady]

    sms = r.q("select smCount from TARGET_INFO_GPU where id = ?", dev) \
        if r.has("TARGET_INFO_GPU") else []
    sm_count = int(sms[0][0]) if sms and sms[0][0] else 132
    small = np.array([(a, b) for a, b, blocks in krows if blocks < sm_count],
                     dtype=np.int64).reshape(-1, 2)

    counts = {"allocations": 0, "synchronizations": 0, "module_loads": 0}
    for a, _, name, g in r.api_calls(".", lo, steps[-1].end):
        if pid_of(g) != pid:
            continue
        if ALLOC.match(name):
            counts["allocations"] += 1
        elif SYNC.match(name):
            counts["synchronizations"] += 1
        elif MODULE_LOAD.match(name):
            counts["module_loads"] += 1
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host" and lo <= m["start"] < hi]
    memsets = r.q("select count(*) from CUPTI_ACTIVITY_KIND_MEMSET where deviceId = ? and "
                  "start >= ? and start < ?", dev, lo, hi) \
        if r.has("CUPTI_ACTIVITY_KIND_MEMSET") else [(0,)]

    out |= {
        "steady_steps": len(steady),
        "steady_window_ms": ms(win),
        "gpu_busy_pct": pct(clipped_ns(gpu, lo, hi), win),
        "kernel_busy_pct": pct(kernel_busy, win),
        # the designed cause: kernels idle while a pageable upload (or its call) runs
        "pageable_copy_pct": pct(cause_idle, win),
        "pageable_copy_time_pct": pct(clipped_ns(copy_iv, lo, hi), win),
        "pageable_call_idle_pct": pct(call_idle, win),
        "other_kernel_idle_pct": pct(int(olen.sum()), win),
        "other_idle_gaps_over_20us": int((olen > GAP_NS).sum()),
        "other_idle_gap_max_us": round(float(olen.max()) / 1e3, 2) if len(olen) else 0.0,
        "h2d": {"count": len(in_win), "per_step": round(len(in_win) / len(steady), 2),
                "ms_median": ms(float(np.median([b - a for a, b, *_ in in_win])))
                if in_win else None,
                "mib_mean": round(h2d_bytes / len(in_win) / 2**20, 2) if in_win else None,
                "gb_s": round(h2d_bytes / h2d_ns, 2) if h2d_ns else None,
                "kinds": sorted({f"{c[3]}->Device" for c in in_win})},
        "h2d_pinned": sum(1 for c in copies if c[3] == "Pinned" and lo <= c[0] < hi),
        "h2d_calls_matched": len(in_win_calls),
        "h2d_call_ms_median": ms(float(np.median([b - a for a, b in in_win_calls])))
        if in_win_calls else None,
        "step_ms_median": ms(float(np.median([s.ns for s in steady]))),
        "step_period_ms_median": ms(float(np.median(np.diff([s.start for s in steps[SKIP:]]))))
        if len(steady) > 1 else None,
        "kernel_ms_per_step": ms(kernel_busy / len(steady)),
        "kernels_per_step": float(np.median(per_step)),
        "kernels_per_step_min_max": [min(per_step), max(per_step)],
        "sm_count": sm_count,
        "small_grid_kernel_pct": pct(clipped_ns(small, lo, hi), kernel_busy),
        "in_window_calls": counts,
        "d2h_in_window": len(d2h),
        "memsets_in_window": int(memsets[0][0]),
        "first_step_ms": ms(steps[0].ns),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
