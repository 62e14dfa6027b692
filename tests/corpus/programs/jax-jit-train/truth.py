"""Truth figures for jax-jit-train (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 60 calls of jit_train_step (RESULT "steps"). The
capture has no XLA NVTX ranges (domain TSL excluded, see the manifest), so the steps are
the executions of the step's XLA command buffer: the most executed CUDA graph on the
device (CUPTI graph-level trace), each launched by one cuGraphLaunch (its thread = the
launching thread). Steady state: steps 2..59, from the GPU start of step 2 to the GPU end
of the last step; busy % = union of GPU work in that window. Compilation: XLA's compiler
runs (ptxas/nvlink spawned by its compile threads, posix_spawnp ... waitpid) merged into
compilations, placed against the steps; module loads and other host calls of note inside
the steady window are counted.

Capture check (every jax-* truth script): "capture" compares CUPTI's count of produced
events with the rows exported (the first captures lost most of them to nsys's "Cannot
find string for an exterior index" on XLA's NVTX); an incomplete capture is an error
(exit 1).
"""

from __future__ import annotations

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
from truthlib import Report, ms, pct  # noqa: E402

SKIP = 2


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
                 "result_ms_per_step": result.get("ms_per_step"),
                 "graph_executions_total": len(execs),
                 "graph_executions_by_graph": {str(k): v for k, v in graphs.items()},
                 "step_graph": top, "steps": len(steps),
                 "kernels_outside_graphs": len(r.kernels(dev)),
                 "capture": capture_health(r)}
    if len(steps) <= SKIP:
        out["error"] = "no steps found"
        return finish(out, 1)
    lo, hi = steps[SKIP]["start"], steps[-1]["end"]
    window = hi - lo
    busy = r.busy_ns(lo, hi, dev)
    gaps = r.idle_gaps(lo, hi, dev)
    n = len(steps) - SKIP
    starts = [s["start"] for s in steps]
    launch_lead = [s["start"] - s["launch"] for s in steps[SKIP:] if s["launch"] is not None]
    out["compilation"] = compile_report(r, pid, starts, lo, hi)
    out["steady"] = {"first_step": SKIP, "steps": n, "lo": int(lo), "hi": int(hi),
                     "ms": ms(window), "ms_per_step": ms(window / n),
                     "step_gpu_ms_median": ms(float(np.median(
                         [s["end"] - s["start"] for s in steps[SKIP:]]))),
                     "busy_pct": pct(busy, window), "idle_pct": pct(window - busy, window),
                     "longest_gap_ms": ms(int((gaps[:, 1] - gaps[:, 0]).max())
                                          if len(gaps) else 0),
                     "launch_to_gpu_start_ms_median": ms(float(np.median(launch_lead)))
                     if launch_lead else None,
                     "launching_threads": launching_threads(r, pid, lo, hi),
                     "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
