"""Truth figures for cpp-tiny-kernels, from the export alone (sqlite3 + numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: no NVTX, no graphs, one created stream. A warm-up runs
each of its five kernels once (iter_begin, scale_kernel, axpy_kernel, add_kernel,
clamp_kernel) and syncs; then 300 iterations, each launching 48 kernels back to back:
iter_begin, then 47 elementwise ops cycling scale, axpy, add, clamp; one
cudaStreamSynchronize after every 50th iteration, nothing else in the loop.

Figures (times in ns on the session clock unless the key says ms/us):
- iterations: the kernels of the first device in start order are cut at every
  iter_begin kernel (iteration_marks: how many) into runs, each from one iter_begin to
  the kernel before the next. The most common run's name sequence is the iteration
  (kernels_per_iteration: its length; sequence_as_designed: iter_begin then scale, axpy,
  add, clamp cycling); iterations: the runs with exactly that sequence; other_runs: the
  runs without it (the warm-up's 5 kernels).
- Steady window (iterations 3..end, i.e. 0-based 2..last): from the GPU start of the
  3rd iteration's iter_begin to the GPU end of the last iteration's last kernel.
  busy_pct / idle_pct: union of all GPU work (kernels, copies, memsets) in the window
  as % of the window, and the rest.
- Each idle gap of the window is classed by the kernel whose start ends it:
  after_sync (the first kernel launched after a cudaStreamSynchronize returned: the
  GPU was drained by the sync; sync_wait_idle_pct), between_iterations (an iter_begin:
  from the previous iteration's last kernel), within_iteration (any other kernel of the
  iteration: from the previous kernel). launch_bound_share_pct (the designed cause's
  share, my plain definition): the idle time of the window in within_iteration and
  between_iterations gaps, i.e. all idle except the after-sync gaps, as % of the window:
  the host launches back to back and does nothing else, so every such gap is the GPU
  waiting for the next launch.
- Per kernel and per launch (steady window, medians in us): kernel_us (GPU duration),
  gap_within_us (idle between consecutive kernels of an iteration), gpu_start_interval_us
  (start to start of consecutive kernels of an iteration), launch_interval_us (start to
  start of their launch calls, the host's pace), launch_call_us (cudaLaunchKernel
  duration), queue_lag_us (median, p95, max: a kernel's GPU start minus the end of its
  launch call; it stays small when the GPU waits for the host and grows when a queue
  builds up). kernels_done_before_next_launch_pct: consecutive kernel pairs of the window
  in which the first kernel ended before the second's launch call returned (the
  vocabulary's launch-bound: kernels finish before the host launches the next).
- iteration_us_median (iter_begin start to the next one's), iteration_gpu_us_median
  (sum of an iteration's kernel durations), us_per_iteration (window / steady
  iterations).
- Silent checks: grid (blocks per kernel, min and most common; threads per block; the
  device's SM count from TARGET_INFO_GPU; min blocks per SM) for small-grid; syncs in
  the window and sync_wait_idle_pct for sync-wait; idle_gaps_over_100us and
  largest_gap_us for host-work; watched_calls_in_window (sync, allocation, free, copy,
  memset, module/library load calls starting in the window, count per name: the design
  has only the 6 cudaStreamSynchronize) for allocation and module-load; module_loads_total
  anywhere; api_calls_in_window (every CUDA API call name in the window with its
  count); streams (stream ids of the kernels) and launching_threads (threads making the
  window's launch calls).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, pct  # noqa: E402

MARK = "iter_begin"
CYCLE = ["scale_kernel", "axpy_kernel", "add_kernel", "clamp_kernel"]
SKIP = 2
WATCHED = (r"(Synchronize|^cudaStreamWaitEvent|^cudaEventQuery|Malloc|Free|^cuMemAlloc|"
           r"^cuMemFree|^cuMemCreate$|^cudaHostAlloc|Memcpy|Memset|^cuModuleLoad|"
           r"^cuLibraryLoad)")
MODULE_LOAD = r"^(cuModuleLoad|cuLibraryLoad)"


def us(values, q: float = 50) -> float | None:
    return round(float(np.percentile(values, q)) / 1e3, 3) if len(values) else None


def main(path: str) -> dict:
    r = Report(path)
    devs = r.devices()
    dev = devs[0] if devs else 0
    calls = {(((g >> 24) & THREAD_MASK), c): (a, b, g)
             for a, b, _n, g, c in r.launch_calls()}
    rows = r.q("select start, end, shortName, correlationId, globalPid, streamId, "
               "gridX * gridY * gridZ, blockX * blockY * blockZ from "
               "CUPTI_ACTIVITY_KIND_KERNEL where deviceId = ? order by start", dev)
    ks = [{"start": a, "end": b, "name": r.strings.get(n, str(n)), "stream": s,
           "blocks": gb, "threads": tb, "call": calls.get((((gp >> 24) & THREAD_MASK), c))}
          for a, b, n, c, gp, s, gb, tb in rows]
    marks = [i for i, k in enumerate(ks) if k["name"] == MARK]
    out: dict = {"device": dev, "kernels_total": len(ks),
                 "kernels_by_name": dict(sorted(Counter(k["name"] for k in ks).items())),
                 "iteration_marks": len(marks), "nvtx_ranges": len(r.ranges(".")),
                 "graph_executions": len(r.graph_launches())}
    runs = [(m, marks[j + 1] if j + 1 < len(marks) else len(ks)) for j, m in enumerate(marks)]
    seqs = [tuple(k["name"] for k in ks[a:b]) for a, b in runs]
    if not seqs:
        return out | {"error": "no iter_begin kernels"}
    modal = Counter(seqs).most_common(1)[0][0]
    its = [run for run, s in zip(runs, seqs) if s == modal]
    designed = [MARK] + [CYCLE[j % 4] for j in range(len(modal) - 1)]
    out |= {"iterations": len(its), "kernels_per_iteration": len(modal),
            "sequence_as_designed": list(modal) == designed,
            "other_runs": [len(s) for s in seqs if s != modal]}
    if len(its) <= SKIP + 1:
        return out | {"error": "too few iterations"}

    steady = its[SKIP:]
    a0, b_last = steady[0][0], steady[-1][1]
    lo = ks[a0]["start"]
    hi = max(k["end"] for k in ks[steady[-1][0]:b_last])
    span = hi - lo
    busy = r.busy_ns(lo, hi, dev)
    gaps = r.idle_gaps(lo, hi, dev)
    win = [k for k in ks if lo <= k["start"] < hi]

    # Syncs in the window and the first kernel launched after each one returned.
    syncs = r.api_calls(r"Synchronize$", lo, hi)
    lstarts = np.array([k["call"][0] if k["call"] else -1 for k in ks], dtype=np.int64)
    after_sync_starts = set()
    for _a, b, _n, _g in syncs:
        nxt = [k["start"] for k, ls in zip(ks, lstarts.tolist()) if ls >= b]
        if nxt:
            after_sync_starts.add(min(nxt))
    kind_of = {}
    for i, k in enumerate(ks):
        kind_of.setdefault(k["start"], "between_iterations" if k["name"] == MARK
                           else "within_iteration")
    for s in after_sync_starts:
        kind_of[s] = "after_sync"
    idle_by = Counter()
    for ga, gb in gaps.tolist():
        idle_by[kind_of.get(gb, "other")] += gb - ga
    glen = (gaps[:, 1] - gaps[:, 0]) if len(gaps) else np.zeros(0, dtype=np.int64)

    # Per kernel pairs inside the steady iterations, and over the whole window.
    within_gap, start_iv, launch_iv = [], [], []
    for a, b in steady:
        for k1, k2 in zip(ks[a:b - 1], ks[a + 1:b]):
            within_gap.append(max(0, k2["start"] - k1["end"]))
            start_iv.append(k2["start"] - k1["start"])
            if k1["call"] and k2["call"]:
                launch_iv.append(k2["call"][0] - k1["call"][0])
    done_before = [k1["end"] <= k2["call"][1] for k1, k2 in zip(win, win[1:])
                   if k2["call"]]
    lag = [k["start"] - k["call"][1] for k in win if k["call"]]
    call_us = [k["call"][1] - k["call"][0] for k in win if k["call"]]
    kdur = [k["end"] - k["start"] for k in win]
    periods = [ks[c]["start"] - ks[a]["start"] for (a, _), (c, _) in zip(steady, steady[1:])]
    gpu_per_it = [sum(k["end"] - k["start"] for k in ks[a:b]) for a, b in steady]
    blocks = Counter(k["blocks"] for k in win)
    sm = r.q("select smCount from TARGET_INFO_GPU where id = ?", dev) \
        if r.has("TARGET_INFO_GPU") else []
    sms = int(sm[0][0]) if sm else 0
    api = r.call_time_by_name(r.api_calls(".", lo, hi))
    watched = r.call_time_by_name(r.api_calls(WATCHED, lo, hi))
    out |= {
        "first_iteration": SKIP,
        "steady_iterations": len(steady),
        "steady_window_ns": [int(lo), int(hi)],
        "steady_ms": round(span / 1e6, 3),
        "us_per_iteration": round(span / len(steady) / 1e3, 2),
        "iteration_us_median": us(periods),
        "iteration_gpu_us_median": us(gpu_per_it),
        "kernels_in_window": len(win),
        "busy_pct": pct(busy, span),
        "idle_pct": pct(span - busy, span),
        "launch_bound_share_pct": pct(idle_by["within_iteration"]
                                      + idle_by["between_iterations"], span),
        "idle_within_iterations_pct": pct(idle_by["within_iteration"], span),
        "idle_between_iterations_pct": pct(idle_by["between_iterations"], span),
        "sync_wait_idle_pct": pct(idle_by["after_sync"], span),
        "other_idle_pct": pct(idle_by["other"], span),
        "kernel_us": us(kdur),
        "gap_within_us": us(within_gap),
        "gpu_start_interval_us": us(start_iv),
        "launch_interval_us": us(launch_iv),
        "launch_call_us": us(call_us),
        "queue_lag_us": {"median": us(lag), "p95": us(lag, 95), "max": us(lag, 100)},
        "kernels_done_before_next_launch_pct": pct(sum(done_before), len(done_before)),
        "idle_gaps": int(len(glen)),
        "idle_gaps_over_100us": int((glen >= 100_000).sum()),
        "largest_gap_us": us(glen, 100),
        "syncs_in_window": len(syncs),
        "blocks_per_kernel": {"min": int(min(blocks)) if blocks else 0,
                              "most_common": int(blocks.most_common(1)[0][0]) if blocks else 0},
        "threads_per_block": int(Counter(k["threads"] for k in win).most_common(1)[0][0]),
        "sm_count": sms,
        "min_blocks_per_sm": round(min(blocks) / sms, 2) if sms and blocks else None,
        "streams": sorted({k["stream"] for k in ks}),
        "launching_threads": len({k["call"][2] for k in win if k["call"]}),
        "watched_calls_in_window": {n: v[0] for n, v in sorted(watched.items())},
        "module_loads_total": len(r.api_calls(MODULE_LOAD)),
        "api_calls_in_window": {n: v[0] for n, v in sorted(api.items())},
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
