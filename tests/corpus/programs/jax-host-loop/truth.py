"""Truth figures for jax-host-loop (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 100 calls of jit_eval_step (RESULT "steps"), each
followed by jax.device_get of its logits and numpy post-processing. The capture has no
XLA NVTX ranges (domain TSL excluded, see the manifest), so the steps are the executions
of the step's XLA command buffer: the most executed CUDA graph on the device, each
launched by one cuGraphLaunch (host time = the next step's dispatch).

Iteration i = GPU start of step i to GPU start of step i+1 (the last step has no next
and is left out). In it: the step's graph, the device-to-host copy of its logits
(>= 1 MiB), then the GPU idles until the next step. idle_after_copy = GPU idle from the
copy's end to the next step's GPU start; host_after_copy = copy end to the next step's
cuGraphLaunch call (the host's work on the results: the main thread makes no CUDA call
in it). Steady state: iterations 2..98; results_work_pct = sum of idle_after_copy / the
window. Also: the main thread's blocking waits before the copy (device_get waiting for
the step while the GPU is busy).

Capture check (every jax-* truth script): "capture" compares CUPTI's count of produced
events with the rows exported (the first captures lost most of them to nsys's "Cannot
find string for an exterior index" on XLA's NVTX); an incomplete capture is an error
(exit 1).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_jax import (  # noqa: E402
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
from truthlib import THREAD_MASK, Report, clipped_ns, ms, pct  # noqa: E402

SKIP = 2
MIN_D2H_BYTES = 1 << 20
WAIT = re.compile(r"^(futex|pthread_cond_wait|pthread_cond_timedwait|sem_wait|"
                  r"sem_timedwait|poll|epoll_wait)$")


def main() -> int:
    r = Report(sys.argv[1])
    result = manifest_result(sys.argv[1])
    devices = r.devices()
    dev = devices[0] if devices else 0
    pid = main_pid(r)
    execs = graph_execs(r, dev)
    graphs = graph_counts(execs)
    top = next(iter(graphs), None)
    steps = [e for e in execs if e["graph"] == top]
    out: dict = {"device": dev, "devices_with_gpu_work": devices,
                 "result_steps": result.get("steps"),
                 "result_postprocess_ms_per_step": result.get("postprocess_ms_per_step"),
                 "graph_executions_by_graph": {str(k): v for k, v in graphs.items()},
                 "step_graph": top, "steps": len(steps),
                 "capture": capture_health(r)}
    if len(steps) <= SKIP + 1:
        out["error"] = "no steps found"
        return finish(out, 1)
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host"
           and m["bytes"] >= MIN_D2H_BYTES]
    out["d2h_copies"] = len(d2h)
    out["d2h_dst"] = sorted({m["dst"] for m in d2h})
    out["d2h_mb_each"] = round(float(np.median([m["bytes"] for m in d2h])) / 2**20, 2) \
        if d2h else 0.0
    waits = [(a, b) for a, b, name, g in r.osrt_calls()
             if g & THREAD_MASK == pid and (g >> 24) & THREAD_MASK == pid
             and WAIT.match(name)]
    gpu = r.gpu_intervals(dev)
    lo, hi = steps[SKIP]["start"], steps[-1]["start"]
    window = hi - lo
    n = len(steps) - 1 - SKIP
    idle_after_copy, host_after_copy, step_ms, copy_ms, wait_ms, idle_before_copy = \
        [], [], [], [], [], []
    for i in range(SKIP, len(steps) - 1):
        a, nxt = steps[i]["start"], steps[i + 1]["start"]
        copies = [m for m in d2h if a <= m["start"] < nxt]
        if not copies:
            continue
        c0 = min(m["start"] for m in copies)
        end = max(m["end"] for m in copies)
        idle_after_copy.append((nxt - end) - clipped_ns(gpu, end, nxt))
        idle_before_copy.append((c0 - a) - clipped_ns(gpu, a, c0))
        step_ms.append(steps[i]["end"] - a)
        copy_ms.append(sum(m["end"] - m["start"] for m in copies))
        if steps[i + 1]["launch"] is not None:
            host_after_copy.append(steps[i + 1]["launch"] - end)
        if steps[i]["launch"] is not None:
            wait_ms.append(sum(y - x for x, y in waits
                               if steps[i]["launch"] <= x < end))
    busy = r.busy_ns(lo, hi, dev)
    med = lambda v: ms(float(np.median(v))) if v else 0.0  # noqa: E731
    out["compilation"] = compile_report(r, pid, [s["start"] for s in steps], lo, hi)
    out["steady"] = {"first_step": SKIP, "iterations": n, "lo": int(lo), "hi": int(hi),
                     "ms": ms(window), "ms_per_iteration": ms(window / n),
                     "busy_pct": pct(busy, window), "idle_pct": pct(window - busy, window),
                     "iterations_with_copy": len(idle_after_copy),
                     "step_gpu_ms_median": med(step_ms), "d2h_ms_median": med(copy_ms),
                     "main_thread_wait_before_copy_end_ms_median": med(wait_ms),
                     "idle_before_copy_ms_median": med(idle_before_copy),
                     "host_after_copy_ms_median": med(host_after_copy),
                     "idle_after_copy_ms_median": med(idle_after_copy),
                     "results_work_pct": pct(sum(idle_after_copy), window),
                     "idle_before_copy_pct": pct(sum(idle_before_copy), window),
                     "launching_threads": launching_threads(r, pid, lo, hi),
                     "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
