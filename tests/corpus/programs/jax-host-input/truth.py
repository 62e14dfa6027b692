"""Truth figures for jax-host-input (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

No NVTX from the program (XLA's domain TSL excluded at capture). Iterations: the
executions of the step's CUDA graph (XLA command buffer, CUPTI graph-level trace,
CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows): the step graph is the graphId executed most
often on the device (``graph_executions_by_graph`` lists them all); ``iterations`` is
its count. Each is launched by one ``cuGraphLaunch`` (joined on correlationId within the
process); the thread making those calls is the training (main) thread.

Steady window: from the GPU start of the 3rd step graph (index 2) to the GPU start of the
last one: ``steady_periods`` = N - 3 step periods, each from one step graph's start to
the next one's (so each holds one step's graph and the next step's uploads).

Figures of the window, on the device of the step graphs:
  * ``gpu_busy_pct``: the union of kernels, copies, memsets and graph executions in the
    window, % of it; ``gpu_idle_pct`` the rest.
  * ``input_wait_pct`` (the designed cause): for each step graph after the first one of
    the window, the GPU idle from the end of the GPU work before that step's uploads
    (the previous step's graph) to the start of its first host-to-device copy (the
    uploads are the H2D copies that start between the previous step graph's end and its
    own start; with none, to the graph's start): the GPU waiting for the host to build
    the next batch. Summed, % of the window; ``input_wait_ms_median`` per step.
  * ``dispatch_idle_pct``: the GPU idle from the end of those uploads to the step graph's
    start (device_put's return and the step's dispatch); ``other_idle_pct``: the rest
    (the short gap between a step's two uploads).
  * ``step_period_ms_median``, ``graph_ms_median`` (a step graph's GPU duration),
    ``h2d_per_step`` (median count of uploads), ``h2d_bytes_per_step`` (median bytes),
    ``h2d_src`` (memory kinds of the uploads).
  * ``launch_to_next_upload_ms_median``: on the host, from the return of one step's
    ``cuGraphLaunch`` to the start of the first ``cuMemcpyHtoDAsync`` (any thread: JAX's
    transfer threads make them) of the next step; ``main_thread_cuda_calls_in_batch`` and
    ``main_thread_osrt_calls_in_batch`` (medians): the main thread's CUDA and OS runtime
    calls inside that stretch (the dispatch's event records and host callbacks right
    after the launch; numpy makes neither). ``host_batch_ms_median``: the part of that
    stretch after the main thread's last CUDA call in it: the main thread making no CUDA
    call while it builds the batch.
  * ``module_loads_in_window``: cuModuleLoad*/cuLibraryLoad*/cudaLibraryLoad* calls of
    the process starting in the window (compilation would load modules; expect 0);
    ``compiler_spawns_in_window``: posix_spawn/fork calls in it (ptxas); also the
    totals, and the module loads before the first step graph and after the window.
  * ``startup_s``: from the first GPU activity of the capture to the first step graph's
    start (XLA compilation and autotuning).
  * ``syncs_in_window`` / ``d2h_in_window``: synchronisations and device-to-host copies
    (none by design).
Capture check: CUPTI's count of produced events (DIAGNOSTIC_EVENT) against the CUPTI
activity rows in the export (``capture_exported_pct``).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, pct, union  # noqa: E402

SKIP = 2
MODULE_LOAD = re.compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$")
SPAWN = re.compile(r"^(posix_spawnp?|fork|vfork|execv\w*|system|popen)$")
SYNC = re.compile(r"^(cu|cuda)(Ctx|Device|Stream|Event)Synchronize\w*$")
H2D_CALL = re.compile(r"^(cuMemcpyHtoD\w*|cudaMemcpy\w*)$")
CUPTI_PRODUCED = re.compile(r"Number of CUPTI events produced:\s*(\d+)")


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def main(path: str) -> dict:
    r = Report(path)
    out: dict = {}
    rows = r.q("select start, end, graphId, correlationId, globalPid, deviceId from "
               "CUPTI_ACTIVITY_KIND_GRAPH_TRACE order by start") \
        if r.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE") else []
    counts: dict = defaultdict(int)
    first: dict = {}
    for a, _, gid, *_ in rows:
        counts[gid] += 1
        first.setdefault(gid, a)
    order = sorted(counts, key=lambda k: (-counts[k], first[k]))
    out["graph_executions_by_graph"] = {str(k): counts[k] for k in order}
    if not order:
        out["iterations"] = 0
        return out
    gid = order[0]
    steps = [x for x in rows if x[2] == gid]
    out |= {"step_graph": int(gid), "iterations": len(steps)}
    if len(steps) <= SKIP + 2:
        return out
    dev = steps[0][5]
    pid = pid_of(steps[0][4])

    # the host calls, and the cuGraphLaunch of each step
    calls = []
    for a, b, n, g, c in r.q("select start, end, nameId, globalTid, correlationId from "
                             "CUPTI_ACTIVITY_KIND_RUNTIME order by start"):
        if pid_of(g) == pid:
            calls.append((a, b, re.sub(r"_v\d+$", "", r.strings.get(n, str(n))), g, c))
    by_corr = {c[4]: c for c in calls}
    launch = [by_corr.get(s[3]) for s in steps]
    threads = {c[3] for c in launch if c}
    main_tid = max(threads, key=lambda t: sum(1 for c in launch if c and c[3] == t)) \
        if threads else None

    lo, hi = steps[SKIP][0], steps[-1][0]
    win = hi - lo
    gpu = r.gpu_intervals(dev)
    u = union(gpu)
    busy = clipped_ns(u, lo, hi)

    h2d = [m for m in r.memcpys(dev) if m["kind"] == "Host-to-Device"]
    h2d_starts = np.array([m["start"] for m in h2d], dtype=np.int64)
    input_wait, dispatch_idle, per_wait = 0, 0, []
    n_up, up_bytes, up_src = [], [], set()
    for prev, cur in zip(steps[SKIP:-1], steps[SKIP + 1:]):
        p_end, c_start = prev[1], cur[0]
        i0 = int(np.searchsorted(h2d_starts, p_end, "left"))
        i1 = int(np.searchsorted(h2d_starts, c_start, "left"))
        ups = h2d[i0:i1]
        n_up.append(len(ups))
        up_bytes.append(sum(m["bytes"] for m in ups))
        up_src |= {m["src"] for m in ups}
        first_up = min((m["start"] for m in ups), default=c_start)
        # end of the GPU work before the uploads (the previous graph, or later work)
        k = int(np.searchsorted(u[:, 0], first_up, "left")) - 1
        before = int(u[k, 1]) if k >= 0 else lo
        wait = max(0, first_up - max(before, lo))
        input_wait += wait
        per_wait.append(wait)
        up_end = max((m["end"] for m in ups), default=c_start)
        if up_end < c_start:
            dispatch_idle += (c_start - up_end) - clipped_ns(u, up_end, c_start)
    other = (win - busy) - input_wait - dispatch_idle

    # host: from one step's cuGraphLaunch return to the next step's first upload call
    upload_calls = np.array([a for a, b, name, g, c in calls if H2D_CALL.match(name)],
                            dtype=np.int64)
    batch, quiet, main_cuda, main_osrt = [], [], [], []
    osrt = [(a, b, g) for a, b, _, g in r.osrt_calls()] if r.has("OSRT_API") else []
    osrt_main = np.array([a for a, b, g in osrt if g == main_tid], dtype=np.int64)
    cuda_main = np.array([a for a, b, n, g, c in calls if g == main_tid], dtype=np.int64)
    cuda_main_end = np.sort(np.array([b for a, b, n, g, c in calls if g == main_tid],
                                     dtype=np.int64))
    for c in launch[SKIP:-1]:
        if not c:
            continue
        j = int(np.searchsorted(upload_calls, c[1], "left"))
        if j >= len(upload_calls):
            continue
        nxt = int(upload_calls[j])
        batch.append(nxt - c[1])
        k = int(np.searchsorted(cuda_main_end, nxt, "left")) - 1
        quiet.append(nxt - max(int(cuda_main_end[k]), c[1]) if k >= 0 else nxt - c[1])
        main_cuda.append(int(((cuda_main >= c[1]) & (cuda_main < nxt)).sum()))
        main_osrt.append(int(((osrt_main >= c[1]) & (osrt_main < nxt)).sum()))

    loads = [a for a, b, name, g, c in calls if MODULE_LOAD.match(name)]
    spawns = [a for a, b, name, g in r.osrt_calls(SPAWN.pattern) if pid_of(g) == pid]
    syncs = [a for a, b, name, g, c in calls if SYNC.match(name) and lo <= a < hi]
    d2h_in = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host" and lo <= m["start"] < hi]

    diag = [t for (t,) in r.q("select text from DIAGNOSTIC_EVENT")] \
        if r.has("DIAGNOSTIC_EVENT") else []
    produced = sum(int(m.group(1)) for m in (CUPTI_PRODUCED.search(t) for t in diag) if m)
    exported = sum(r.q(f"select count(*) from {t}")[0][0] for t in sorted(r.tables)
                   if t.startswith("CUPTI_ACTIVITY_KIND_"))

    s_starts = np.array([s[0] for s in steps], dtype=np.int64)
    s_dur = np.array([s[1] - s[0] for s in steps[SKIP:]], dtype=np.int64)
    out |= {
        "steady_periods": len(steps) - SKIP - 1,
        "steady_window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "input_wait_pct": pct(input_wait, win),
        "input_wait_ms_median": ms(float(np.median(per_wait))),
        "dispatch_idle_pct": pct(dispatch_idle, win),
        "other_idle_pct": pct(other, win),
        "step_period_ms_median": ms(float(np.median(np.diff(s_starts[SKIP:])))),
        "graph_ms_median": ms(float(np.median(s_dur))),
        "h2d_per_step": int(np.median(n_up)),
        "h2d_bytes_per_step": int(np.median(up_bytes)),
        "h2d_src": sorted(up_src),
        "launch_to_next_upload_ms_median": ms(float(np.median(batch))) if batch else None,
        "host_batch_ms_median": ms(float(np.median(quiet))) if quiet else None,
        "main_thread_cuda_calls_in_batch": int(np.median(main_cuda)) if main_cuda else None,
        "main_thread_osrt_calls_in_batch": int(np.median(main_osrt)) if main_osrt else None,
        "launching_threads": len(threads),
        "module_loads_in_window": sum(1 for a in loads if lo <= a < hi),
        "module_loads_total": len(loads),
        "module_loads_before_first_step": sum(1 for a in loads if a < steps[0][0]),
        "module_loads_after_window": sum(1 for a in loads if a >= hi),
        "compiler_spawns_in_window": sum(1 for a in spawns if lo <= a < hi),
        "compiler_spawns_total": len(spawns),
        "syncs_in_window": len(syncs),
        "d2h_in_window": len(d2h_in),
        "startup_s": round((steps[0][0] - int(gpu[:, 0].min())) / 1e9, 3),
        "capture_exported_pct": pct(exported, produced) if produced else None,
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
