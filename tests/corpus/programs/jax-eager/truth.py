"""Truth figures for jax-eager (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 200 loop iterations (RESULT "iters"), each with
exactly one jnp.cos, so the cosine kernel (the only kernel whose name contains "cos")
marks them: iteration i runs from its cos kernel to the next one (the last one has no
end and is left out). No graphs (every eager op is its own one-kernel executable). Steady
state: iterations 2..198. busy % = union of GPU work in the window; launch-bound = the
rest (the GPU waits for the next launch: no syncs, copies or compiles in the window, see
host_calls / compilation). The launching thread is the one whose launch calls fall in
the window. Compilation: XLA's compiler runs (ptxas/nvlink spawned by its compile
threads, posix_spawnp ... waitpid) merged into compilations, each placed by the number of
cos marks (iterations started) before it.

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
    graph_execs,
    host_calls_in,
    launching_threads,
    main_pid,
    manifest_result,
)
from truthlib import Report, ms, pct  # noqa: E402

SKIP = 2
MARKER = re.compile(r"cos", re.IGNORECASE)


def main() -> int:
    r = Report(sys.argv[1])
    result = manifest_result(sys.argv[1])
    devices = r.devices()
    dev = devices[0] if devices else 0
    pid = main_pid(r)
    kernels = r.kernels(dev)
    marks = [k[0] for k in kernels if MARKER.search(k[2])]
    out: dict = {"device": dev, "devices_with_gpu_work": devices,
                 "result_iters": result.get("iters"),
                 "result_ops_per_iter": result.get("ops_per_iter"),
                 "result_ms_per_iter": result.get("ms_per_iter"),
                 "kernels_total": len(kernels), "iterations": len(marks),
                 "iteration_source": "cos-kernel",
                 "graph_executions": len(graph_execs(r, dev)),
                 "capture": capture_health(r)}
    if len(marks) <= SKIP + 1:
        out["error"] = "no iterations found"
        return finish(out, 1)
    lo, hi = marks[SKIP], marks[-1]
    window = hi - lo
    n = len(marks) - 1 - SKIP
    inside = [k for k in kernels if lo <= k[0] < hi]
    dur = np.array([k[1] - k[0] for k in inside], dtype=np.int64)
    busy = r.busy_ns(lo, hi, dev)
    gaps = r.idle_gaps(lo, hi, dev)
    glen = (gaps[:, 1] - gaps[:, 0]) if len(gaps) else np.zeros(0, np.int64)
    iter_ms = np.diff(np.asarray(marks, dtype=np.int64)) / 1e6
    comp = compile_report(r, pid, marks, lo, hi)
    comp["iteration_0_ms"] = round(float(iter_ms[0]), 3)
    comp["iteration_1_ms"] = round(float(iter_ms[1]), 3)
    out["compilation"] = comp
    out["steady"] = {
        "first_iteration": SKIP, "iterations": n, "lo": int(lo), "hi": int(hi),
        "ms": ms(window), "ms_per_iteration": ms(window / n),
        "iteration_ms_max": round(float(iter_ms[SKIP:].max()), 3),
        "kernels": len(inside), "kernels_per_iteration": round(len(inside) / n, 2),
        "kernel_median_us": round(float(np.median(dur)) / 1e3, 2) if len(dur) else 0.0,
        "gap_median_us": round(float(np.median(glen)) / 1e3, 2) if len(glen) else 0.0,
        "busy_pct": pct(busy, window),
        "launch_bound_pct": pct(window - busy, window),
        "memcpys_inside": sum(1 for m in r.memcpys(dev) if lo <= m["start"] < hi),
        "launching_threads": launching_threads(r, pid, lo, hi),
        "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
