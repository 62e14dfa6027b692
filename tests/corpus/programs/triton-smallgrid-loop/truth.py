"""Truth figures for triton-smallgrid-loop, from the export alone (sqlite3 + numpy, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: one warm-up call of the Triton kernel
``rmsnorm_persistent_kernel`` (JIT compilation) and a float64 check before the loop,
then 150 NVTX ranges ``iter`` (torch.cuda.nvtx.range, default domain), each launching
the RMS-norm (grid 8) and one PyTorch elementwise ``add_`` (a full grid), no sync in the
loop; one torch.cuda.synchronize after it, then a check (more kernels, after the loop).

Figures (times in ns on the session clock unless the key says ms/us):
- iterations: the ``iter`` ranges. A kernel belongs to the range in which its launch
  call (cuLaunchKernel* / cudaLaunchKernel* on the ranges' thread, joined to the kernel
  by correlationId within the process) started; ``kernels_per_iteration``: min/max over
  the steady iterations, ``kernel_names_steady``: per name, over them.
- Steady window: iterations 2..N-1 (the first two hold the add_'s module load and the
  allocator's first blocks), on the GPU: from the GPU start of the first kernel launched
  in iteration 2 to the GPU end of the last kernel launched in the last iteration (the
  host runs far ahead: the ranges end long before their kernels run, so the window is
  taken from the kernels, not from the ranges). ``steady_iterations`` = N - 2.
- sm_count: TARGET_INFO_GPU.smCount of the kernels' device (132 when absent). A kernel's
  blocks: gridX * gridY * gridZ; a kernel is small-grid when blocks < sm_count.
- gpu_busy_pct / gpu_idle_pct: the union of all GPU work (kernels, copies, memsets) in
  the window, % of the window, and the rest; idle_gaps_over_10us, idle_gap_max_us.
- small_kernel_time_pct: the union of the small-grid kernels, clipped to the window, %
  of the window (the "plain" share: the time the GPU spent running only them).
- small_grid_share_pct (the designed cause's share) = sm_time_idle_pct: the SM time the
  kernels left idle, sum over the window's kernels of clipped duration x max(0, 1 -
  blocks / sm_count), % of the window (one stream: the kernels never overlap; fully idle
  GPU time is not counted here, it is gpu_idle_pct).
- small_kernels: per small-grid kernel name, its grid (blocks), block (threads), count
  in the window and median duration (ms); full_grid_kernel_ms_median: the other kernels.
- Host ahead (launch-bound must stay silent): host_loop_ms (first range's start to the
  last range's end), iter_range_us_median (steady ranges), gpu_behind_host_ms (window end
  minus the last range's end), launch_to_start_ms_min/median (a steady kernel's GPU
  start minus its launch call's start), launched_before_previous_end_pct (of consecutive
  steady kernels, how often the next one's launch call started before the previous
  kernel ended: the queue was never empty).
- calls_in_steady_loop: sync / allocation / copy / memset / module-load CUDA calls of the
  process starting from iteration 2's range start to the last range's end (the design:
  none); calls_after_loop_in_window: those starting after the last range but inside the
  window (the one torch.cuda.synchronize, waiting on a busy GPU).
- Compilation at start-up: module_loads and spawns (posix_spawn*/fork/vfork/exec*/
  system/popen OS-runtime calls of the process; the committed captures keep calls of
  10 us or more) by phase: before the first range, in iterations 0-1, in the steady part
  (iteration 2's range start to the window's end), after it; warmup_kernels: kernels
  launched before the first range, by name.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, pct  # noqa: E402

SKIP = 2
MODULE_LOAD = r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$"
SPAWN = r"^(posix_spawnp?|fork|vfork|execv\w*|system|popen)$"
WATCHED = (r"(Synchronize|^cudaStreamWaitEvent|^cudaEventQuery|Malloc|Free|^cuMemAlloc|"
           r"^cuMemFree|^cuMemCreate$|^cudaHostAlloc|Memcpy|Memset|^cuModuleLoad|"
           r"^cuLibraryLoad|^cudaLibraryLoad)")


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def counts(rows: list[tuple]) -> dict[str, int]:
    return dict(sorted(Counter(row[2] for row in rows).items()))


def sm_count(r: Report, dev: int) -> int:
    if r.has("TARGET_INFO_GPU"):
        rows = r.q("select smCount from TARGET_INFO_GPU where id = ? and smCount > 0", dev) \
            or r.q("select smCount from TARGET_INFO_GPU where smCount > 0")
        if rows:
            return int(rows[0][0])
    return 132


def main(path: str) -> dict:
    r = Report(path)
    its = r.ranges(r"^iter$")
    out: dict = {"iterations": len(its), "range": "iter"}
    if len(its) <= SKIP + 1:
        return out | {"error": "too few iter ranges"}
    gtid, pid = its[0].gtid, pid_of(its[0].gtid)

    # kernels by (pid, correlationId); launch calls of the ranges' thread by iteration
    kern = {(pid_of(gp), c): {"start": a, "end": b, "name": r.strings.get(n, str(n)),
                              "blocks": int(gr), "threads": int(bl), "dev": d}
            for a, b, n, c, gp, d, gr, bl in r.q(
                "select start, end, shortName, correlationId, globalPid, deviceId, "
                "gridX * gridY * gridZ, blockX * blockY * blockZ "
                "from CUPTI_ACTIVITY_KIND_KERNEL")}
    launches = [(a, kern[(pid, c)]) for a, _b, _n, g, c in r.launch_calls()
                if g == gtid and (pid, c) in kern]
    lstart = np.array([a for a, _ in launches], dtype=np.int64)
    per_it = []
    for s in its:
        i0 = int(np.searchsorted(lstart, s.start, "left"))
        i1 = int(np.searchsorted(lstart, s.end, "right"))
        per_it.append(launches[i0:i1])
    if not per_it[SKIP] or not per_it[-1]:
        return out | {"error": "no kernels launched in the steady ranges"}
    steady = [k for p in per_it[SKIP:] for k in p]
    dev = steady[0][1]["dev"]
    sms = sm_count(r, dev)
    lo = min(k["start"] for _, k in per_it[SKIP])
    hi = max(k["end"] for _, k in per_it[-1])
    win = hi - lo

    # the window's kernels (every kernel of the device, not only the loop's), clipped
    in_win = [(max(k["start"], lo), min(k["end"], hi), k) for k in kern.values()
              if k["dev"] == dev and k["end"] > lo and k["start"] < hi]
    small = [(a, b, k) for a, b, k in in_win if k["blocks"] < sms]
    small_iv = np.array([(a, b) for a, b, _ in small], dtype=np.int64).reshape(-1, 2)
    sm_idle = sum((b - a) * max(0.0, 1.0 - k["blocks"] / sms) for a, b, k in in_win)
    busy = r.busy_ns(lo, hi, dev)
    gaps = r.idle_gaps(lo, hi, dev)
    glen = gaps[:, 1] - gaps[:, 0] if len(gaps) else np.zeros(0, dtype=np.int64)

    by_name: dict = {}
    for a, b, k in small:
        e = by_name.setdefault(k["name"], {"blocks": set(), "threads": set(), "dur": []})
        e["blocks"].add(k["blocks"])
        e["threads"].add(k["threads"])
        e["dur"].append(k["end"] - k["start"])
    small_kernels = {n: {"grid_blocks": sorted(e["blocks"]), "block_threads": sorted(e["threads"]),
                         "count": len(e["dur"]), "ms_median": ms(float(np.median(e["dur"])))}
                     for n, e in sorted(by_name.items())}
    full = [k["end"] - k["start"] for _, _, k in in_win if k["blocks"] >= sms]

    # the host ahead of the GPU
    order = sorted(steady, key=lambda x: x[1]["start"])
    delay = np.array([k["start"] - a for a, k in order], dtype=np.int64)
    ahead = [order[j + 1][0] < order[j][1]["end"] for j in range(len(order) - 1)]

    # calls that would be findings of their own, and compilation by phase
    main_pid = [c for c in r.api_calls(WATCHED) if pid_of(c[3]) == pid]
    loop = [c for c in main_pid if its[SKIP].start <= c[0] <= its[-1].end]
    tail = [c for c in main_pid if its[-1].end < c[0] < hi]

    def phases(rows: list[tuple]) -> dict:
        keys = ("before_first_iter", "in_iters_0_1", "steady", "after_window")
        out_: dict = {k: [] for k in keys}
        for row in rows:
            a = row[0]
            key = keys[0] if a < its[0].start else keys[1] if a < its[SKIP].start \
                else keys[2] if a < hi else keys[3]
            out_[key].append(row)
        return {k: counts(v) for k, v in out_.items()}

    loads = [c for c in r.api_calls(MODULE_LOAD) if pid_of(c[3]) == pid]
    spawns = [c for c in r.osrt_calls(SPAWN) if pid_of(c[3]) == pid]
    warm = Counter(k["name"] for a, k in launches if a < its[0].start)

    n_k = [len(p) for p in per_it[SKIP:]]
    out |= {
        "steady_iterations": len(its) - SKIP,
        "steady_window_ns": [int(lo), int(hi)],
        "steady_window_ms": ms(win),
        "ms_per_iteration": ms(win / (len(its) - SKIP)),
        "kernels_per_iteration": {"min": min(n_k), "max": max(n_k)},
        "kernel_names_steady": dict(sorted(Counter(k["name"] for _, k in steady).items())),
        "sm_count": sms,
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "idle_gaps_over_10us": int((glen > 10_000).sum()),
        "idle_gap_max_us": round(float(glen.max()) / 1e3, 2) if len(glen) else 0.0,
        "small_kernels": small_kernels,
        "full_grid_kernel_ms_median": ms(float(np.median(full))) if full else None,
        "small_kernel_time_pct": pct(clipped_ns(small_iv, lo, hi), win),
        "sm_time_idle_pct": pct(sm_idle, win),
        "host_loop_ms": ms(its[-1].end - its[0].start),
        "iter_range_us_median": round(float(np.median([s.ns for s in its[SKIP:]])) / 1e3, 2),
        "gpu_behind_host_ms": ms(hi - its[-1].end),
        "launch_to_start_ms_min": ms(int(delay.min())),
        "launch_to_start_ms_median": ms(float(np.median(delay))),
        "launched_before_previous_end_pct": pct(sum(ahead), len(ahead)),
        "calls_in_steady_loop": counts(loop),
        "calls_after_loop_in_window": counts(tail),
        "module_loads": phases(loads),
        "spawns": phases(spawns),
        "warmup_kernels": dict(sorted(warm.items())),
    }
    out["small_grid_share_pct"] = out["sm_time_idle_pct"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
