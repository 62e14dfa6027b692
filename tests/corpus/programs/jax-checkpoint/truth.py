"""Truth figures for jax-checkpoint (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 40 calls of jit_train_step (RESULT "steps"), a save
after every 10th (RESULT "saves": after steps 9, 19, 29, 39). The capture has no XLA NVTX
ranges (domain TSL excluded, see the manifest), so the steps are the executions of the
step's XLA command buffer: the most executed CUDA graph on the device.

A save = the large device-to-host copies (>= 1 MiB: jax.device_get of the parameters)
between two steps (or after the last one) and the main thread's write() calls there
(np.savez). Its stall = GPU idle from the GPU end of the step before it to the GPU start
of the step after it (nothing else is queued meanwhile). Steady state: steps 2..39, from
the GPU start of step 2 to the GPU end of the last step; periodic_save_pct = the stalls
of the saves inside it, as % of the window. Also: the main thread's blocking waits in the
stall (device_get waiting for the queued steps) and whether the copies went to pageable
host memory.

Capture check (every jax-* truth script): "capture" compares CUPTI's count of produced
events with the rows exported (the first captures lost most of them to nsys's "Cannot
find string for an exterior index" on XLA's NVTX); an incomplete capture is an error
(exit 1).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_jax import (  # noqa: E402
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
from truthlib import THREAD_MASK, Report, clipped_ns, ms, pct  # noqa: E402

SKIP = 2
MIN_D2H_BYTES = 1 << 20
WRITE = re.compile(r"^(write|pwrite|pwrite64|writev|pwritev|pwritev2|fwrite)$")
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
                 "result_saves_after_step": [s.get("after_step")
                                             for s in result.get("saves", [])],
                 "graph_executions_by_graph": {str(k): v for k, v in graphs.items()},
                 "step_graph": top, "steps": len(steps),
                 "capture": capture_health(r)}
    if len(steps) <= SKIP:
        out["error"] = "no steps found"
        return finish(out, 1)
    lo, hi = steps[SKIP]["start"], steps[-1]["end"]
    window = hi - lo
    gpu = r.gpu_intervals(dev)
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host"
           and m["bytes"] >= MIN_D2H_BYTES]
    osrt_main = [(a, b, name) for a, b, name, g in r.osrt_calls()
                 if g & THREAD_MASK == pid and (g >> 24) & THREAD_MASK == pid]
    copy_threads: Counter = Counter()
    for a, _, name, g, c in api_rows(r, re.compile(r"Memcpy"), pid):
        if any(m["corr"] == c for m in d2h):
            copy_threads[g & THREAD_MASK] += 1
    saves = []
    for i, s in enumerate(steps):
        a = s["end"]
        b = steps[i + 1]["start"] if i + 1 < len(steps) else None
        limit = b if b is not None else float("inf")
        sel = [m for m in d2h if a <= m["start"] < limit]
        if not sel:
            continue
        writes = [(x, y) for x, y, name in osrt_main if WRITE.match(name) and a <= x < limit]
        waits = [(x, y) for x, y, name in osrt_main if WAIT.match(name) and a <= x < limit
                 and y - x >= 1_000_000]
        end = b if b is not None else max([y for _, y in writes] + [m["end"] for m in sel])
        saves.append({"after_step": i, "d2h_copies": len(sel),
                      "d2h_mb": round(sum(m["bytes"] for m in sel) / 2**20, 1),
                      "d2h_ms": ms(sum(m["end"] - m["start"] for m in sel)),
                      "d2h_dst": sorted({m["dst"] for m in sel}),
                      "first_copy_after_step_end_ms": ms(sel[0]["start"] - a),
                      "main_thread_wait_ms": ms(sum(y - x for x, y in waits)),
                      "write_calls": len(writes),
                      "write_ms": ms(sum(y - x for x, y in writes)),
                      "write_span_ms": ms(max(y for _, y in writes) - min(x for x, _ in writes))
                      if writes else 0.0,
                      "next_step_gpu_start": b,
                      "stall_ms": ms((end - a) - clipped_ns(gpu, a, end)),
                      "in_steady": bool(lo <= a and b is not None and b <= hi)})
    hits = [s for s in saves if s["in_steady"]]
    stall = sum(s["stall_ms"] for s in hits) * 1e6
    busy = clipped_ns(gpu, lo, hi)
    between = [saves[i + 1]["after_step"] - saves[i]["after_step"]
               for i in range(len(saves) - 1)]
    same = [steps[i]["start"] - steps[i - 1]["end"] for i in range(SKIP + 1, len(steps))
            if not any(sv["after_step"] == i - 1 for sv in saves)]
    out["d2h_copy_threads"] = {str(k): v for k, v in copy_threads.items()}
    out["compilation"] = compile_report(r, pid, [s["start"] for s in steps], lo, hi)
    out["saves"] = saves
    out["steady"] = {"first_step": SKIP, "steps": len(steps) - SKIP, "lo": int(lo),
                     "hi": int(hi), "ms": ms(window),
                     "step_gpu_ms_median": ms(float(np.median(
                         [s["end"] - s["start"] for s in steps[SKIP:]]))),
                     "busy_pct": pct(busy, window), "idle_pct": pct(window - busy, window),
                     "save_hits": len(hits), "saves_total": len(saves),
                     "steps_between_saves": between,
                     "periodic_save_pct": pct(stall, window),
                     "gap_between_steps_without_save_ms_max": ms(max(same, default=0)),
                     "launching_threads": launching_threads(r, pid, lo, hi),
                     "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
