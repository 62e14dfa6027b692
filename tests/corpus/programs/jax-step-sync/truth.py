"""Truth figures for jax-step-sync (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 200 calls of train_step, each followed by
``float(loss)`` (RESULT "steps", "losses_logged"). The capture has no NVTX (the program
has none; XLA's domain TSL is excluded), so the steps are the executions of the step's
XLA command buffer: the most executed CUDA graph on the device (CUPTI graph-level trace,
truth_jax.graph_execs), each launched by one cuGraphLaunch of the main thread
(``iteration_source`` "graph"). Should XLA not graph the step (no graph executed 10
times), the steps are told apart by the loss copies instead: a step starts at the first
kernel or graph after a loss copy, step 0 standing for all the GPU work before the first
copy (``iteration_source`` "loss-copies"; no per-step host figures then).

Loss copies: device-to-host copies of at most 64 bytes on the steps' device (the 4-byte
float32 loss each ``float(loss)`` reads back).

Steady window: steps 2..N-1 (0-based, i.e. from the 3rd step), from the GPU start of
step 2 to the GPU start of the last step: ``periods`` = N - 3 step periods, each one
step's GPU work and the gap after it.

The cause, by this plain definition: let W be the GPU's work other than the loss copies
(kernels, memsets, graph executions, other copies). A sync gap is an idle stretch of W
(from the end of one piece of W to the start of the next) holding a loss copy or the
return of a synchronising CUDA call of the process (cu/cuda Ctx/Device/Stream/Event
Synchronize): from the end of a step's GPU work to the next step's first GPU work after
the host synchronised. ``sync_wait_pct``: the GPU idle in the sync gaps (their length
minus the loss copies' time), clipped to the window, % of the window. Its two parts:
``idle_before_copy_pct`` (gap start to the first loss copy's start: PjRt enqueues the
copy only once the host learns the step is done) and ``idle_after_copy_pct`` (last loss
copy's end to the next GPU work: the host wakes in float(), returns, loops, dispatches;
the narrow reading); ``other_idle_pct``: the window's idle outside sync gaps.

Also, over the window: ``gpu_busy_pct`` (union of all GPU work, loss copies included);
per period (medians, the fields ending in _median): ``step_gpu_ms`` (a step graph's GPU
time), ``period_ms``, ``sync_gap_us``, ``idle_before_copy_us``, ``idle_after_copy_us``,
``copy_end_to_launch_us`` (loss copy end to the next step's cuGraphLaunch call: the
host's way back and its dispatch), ``launch_to_gpu_us``, ``main_thread_blocked_us``
(the main thread's OS-runtime waits, futex/pthread_cond/sem/poll, between one step's
launch and the next: float() blocking; the committed captures keep only waits of 10 us
or more), ``wake_to_launch_us`` (end of the main thread's last wait to the next launch:
the host's own work a step); ``launches_per_period`` (graph and kernel launches of the
process between one step's launch and the next). What must stay silent:
``h2d_copies_in_window`` (input: 0 by design), ``launches_per_period`` (launch-bound: 1),
``wake_to_launch_us`` (host-work: small against the period), compilation (compiler runs
and module loads in the window: 0).
Capture check (every jax-* truth script): an incompletely exported capture is an error.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_jax import (  # noqa: E402
    LAUNCH,
    SYNC,
    api_rows,
    capture_health,
    compile_report,
    finish,
    graph_counts,
    graph_execs,
    host_calls_in,
    launching_threads,
    main_pid,
    manifest_result,
)
from truthlib import THREAD_MASK, Report, clipped_ns, ms, overlap_ns, pct, union  # noqa: E402

SKIP = 2
LOSS_MAX_BYTES = 64
MIN_GRAPH_STEPS = 10
WAIT = re.compile(r"^(futex|pthread_cond_wait|pthread_cond_timedwait|sem_wait|"
                  r"sem_timedwait|poll|ppoll|epoll_wait|pthread_mutex_lock)$")


def med_us(v: list) -> float | None:
    return round(float(np.median(v)) / 1e3, 2) if v else None


def main() -> int:
    r = Report(sys.argv[1])
    result = manifest_result(sys.argv[1])
    devices = r.devices()
    dev = devices[0] if devices else 0
    pid = main_pid(r)
    execs = graph_execs(r, dev)
    graphs = graph_counts(execs)
    top = next(iter(graphs), None)
    copies = r.memcpys(dev)
    loss = [m for m in copies if m["kind"] == "Device-to-Host"
            and m["bytes"] <= LOSS_MAX_BYTES]
    loss_iv = np.array([(m["start"], m["end"]) for m in loss], dtype=np.int64).reshape(-1, 2)
    # W: every GPU interval but the loss copies
    loss_ids = {id(m) for m in loss}
    compute = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if r.has(t):
            compute += r.q(f"select start, end from {t} where deviceId = ?", dev)
    compute = union(np.array(compute, dtype=np.int64).reshape(-1, 2))
    w = union(np.vstack([compute, np.array([(m["start"], m["end"]) for m in copies
                                            if id(m) not in loss_ids],
                                           dtype=np.int64).reshape(-1, 2)]))

    steps = [e for e in execs if e["graph"] == top]
    source = "graph"
    if len(steps) < MIN_GRAPH_STEPS:      # no command buffer: steps begin after the copies
        source = "loss-copies"
        c_starts = compute[:, 0]
        nxt_idx = sorted({int(np.searchsorted(c_starts, e, "left")) for e in loss_iv[:, 1]})
        first = [int(c_starts[0])] if len(compute) else []
        steps = [{"start": a, "end": None, "launch": None}
                 for a in first + [int(c_starts[j]) for j in nxt_idx if j < len(c_starts)]]
    out: dict = {"device": dev, "devices_with_gpu_work": devices,
                 "result_steps": result.get("steps"),
                 "result_losses_logged": result.get("losses_logged"),
                 "graph_executions_by_graph": {str(k): v for k, v in graphs.items()},
                 "step_graph": top if source == "graph" else None,
                 "iteration_source": source, "iterations": len(steps),
                 "loss_copies": len(loss),
                 "loss_copy_bytes": sorted({m["bytes"] for m in loss}),
                 "loss_copy_dst": sorted({m["dst"] for m in loss}),
                 "capture": capture_health(r)}
    if len(steps) <= SKIP + 1:
        out["error"] = "no steps found"
        return finish(out, 1)

    lo, hi = steps[SKIP]["start"], steps[-1]["start"]
    window = hi - lo
    periods = len(steps) - 1 - SKIP
    all_gpu = union(np.vstack([w, loss_iv]))
    busy = clipped_ns(all_gpu, lo, hi)

    # sync gaps: idle stretches of W holding a loss copy or a sync call's return
    sync_ends = np.sort(np.array([b for _, b, *_ in api_rows(r, SYNC, pid)], dtype=np.int64))
    loss_starts = loss_iv[:, 0]
    gaps, before, after, with_copy, with_sync = [], [], [], 0, 0
    for a, b in zip(w[:-1, 1].tolist(), w[1:, 0].tolist()):
        if b <= lo or a >= hi:
            continue
        i0, i1 = np.searchsorted(loss_starts, [a, b], "left")
        j0, j1 = np.searchsorted(sync_ends, [a, b], "left")
        if i1 == i0 and j1 == j0:
            continue
        gaps.append((a, b))
        with_copy += int(i1 > i0)
        with_sync += int(j1 > j0)
        if i1 > i0:
            before.append(int(loss_starts[i0]) - a)
            after.append(b - int(loss_iv[i0:i1, 1].max()))
    sg = np.array(gaps, dtype=np.int64).reshape(-1, 2)
    sync_idle = clipped_ns(sg, lo, hi) - overlap_ns(sg, loss_iv, lo, hi)

    # per period: the step's GPU time, its loss copy, the host's way to the next launch
    tid = next((s["thread"] for s in steps[SKIP:] if s.get("thread")), None)
    waits = [(a, b) for a, b, name, g in r.osrt_calls(WAIT.pattern)
             if (g >> 24) & THREAD_MASK == pid and g & THREAD_MASK == tid]
    launches = np.array([a for a, *_ in api_rows(r, LAUNCH, pid)], dtype=np.int64)
    step_gpu, period, to_launch, lag, blocked, wake, n_launch = [], [], [], [], [], [], []
    for cur, nxt in zip(steps[SKIP:-1], steps[SKIP + 1:]):
        period.append(nxt["start"] - cur["start"])
        if cur["end"] is not None:
            step_gpu.append(cur["end"] - cur["start"])
        if cur["launch"] is None or nxt["launch"] is None:
            continue
        lag.append(nxt["start"] - nxt["launch"])
        n_launch.append(int(((launches >= cur["launch"]) & (launches < nxt["launch"])).sum()))
        mine = [m for m in loss if cur["start"] <= m["start"] < nxt["start"]]
        if mine:
            to_launch.append(nxt["launch"] - max(m["end"] for m in mine))
        inside = [(max(a, cur["launch"]), min(b, nxt["launch"])) for a, b in waits
                  if b > cur["launch"] and a < nxt["launch"]]
        blocked.append(sum(b - a for a, b in inside))
        if inside:
            wake.append(nxt["launch"] - max(b for _, b in inside))

    h2d = [m for m in copies if m["kind"] == "Host-to-Device" and lo <= m["start"] < hi]
    out["compilation"] = compile_report(r, pid, [s["start"] for s in steps], lo, hi,
                                        execs if source == "graph" else None)
    out["steady"] = {
        "first_step": SKIP, "periods": periods, "lo": int(lo), "hi": int(hi),
        "ms": ms(window), "ms_per_period": ms(window / periods),
        "gpu_busy_pct": pct(busy, window), "gpu_idle_pct": pct(window - busy, window),
        "sync_wait_pct": pct(sync_idle, window),
        "idle_before_copy_pct": pct(sum(before), window),
        "idle_after_copy_pct": pct(sum(after), window),
        "other_idle_pct": pct(window - busy - sync_idle, window),
        "sync_gaps": len(gaps), "sync_gaps_with_loss_copy": with_copy,
        "sync_gaps_with_sync_call": with_sync,
        "loss_copies_in_window": int(((loss_starts >= lo) & (loss_starts < hi)).sum()),
        "step_gpu_ms_median": ms(float(np.median(step_gpu))) if step_gpu else None,
        "period_ms_median": ms(float(np.median(period))),
        "sync_gap_us_median": med_us((sg[:, 1] - sg[:, 0]).tolist()),
        "idle_before_copy_us_median": med_us(before),
        "idle_after_copy_us_median": med_us(after),
        "copy_end_to_launch_us_median": med_us(to_launch),
        "launch_to_gpu_us_median": med_us(lag),
        "main_thread_blocked_us_median": med_us(blocked),
        "wake_to_launch_us_median": med_us(wake),
        "launches_per_period": int(np.median(n_launch)) if n_launch else None,
        "h2d_copies_in_window": len(h2d),
        "launching_threads": launching_threads(r, pid, lo, hi),
        "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
