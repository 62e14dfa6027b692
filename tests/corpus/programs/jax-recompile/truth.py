"""Truth figures for jax-recompile (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 60 calls of jit_train_step (RESULT "steps"), the
batch shape changing at the steps RESULT "shape_changes" lists (0, 20, 40). The capture
has no XLA NVTX ranges (domain TSL excluded, see the manifest), so the steps are the
executions of the step's XLA command buffers: one CUDA graph per shape (executable), each
executed once per step of that shape; graphs executed only once before them are the
set-up's jitted functions (init/make_batch), not steps. A new shape = a new step graph.

At each shape change ("hits"): the GPU gap between the last step of the old shape and the
first of the new one (and the GPU work in it), the host gap between the two steps'
cuGraphLaunch calls (what jit spent tracing, compiling or loading the new executable), and
what the host did in that gap: XLA compiler runs (ptxas/nvlink spawned by its compile
threads, posix_spawnp ... waitpid), module loads. Start-up compilations are listed
with the number of steps that had started on the GPU before each.

Steady state: steps 2..59, from the GPU start of step 2 to the GPU end of the last step.
shape_change_stall_pct = GPU idle at the shape changes inside it, as % of the window.

Capture check (every jax-* truth script): "capture" compares CUPTI's count of produced
events with the rows exported (the first captures lost most of them to nsys's "Cannot
find string for an exterior index" on XLA's NVTX); an incomplete capture is an error
(exit 1).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_jax import (  # noqa: E402
    MODULE_LOAD,
    api_rows,
    capture_health,
    compile_report,
    compiler_runs,
    finish,
    graph_counts,
    graph_execs,
    host_calls_in,
    launching_threads,
    main_pid,
    manifest_result,
)
from truthlib import Report, clipped_ns, ms, pct  # noqa: E402

SKIP = 2


def main() -> int:
    r = Report(sys.argv[1])
    result = manifest_result(sys.argv[1])
    devices = r.devices()
    dev = devices[0] if devices else 0
    pid = main_pid(r)
    execs = graph_execs(r, dev)
    graphs = graph_counts(execs)
    step_graphs = [g for g, n in graphs.items() if n > 1]
    steps = [e for e in execs if e["graph"] in step_graphs]
    setup = [e for e in execs if e["graph"] not in step_graphs]
    out: dict = {"device": dev, "devices_with_gpu_work": devices,
                 "result_steps": result.get("steps"),
                 "result_shape_changes": [c.get("step") for c in
                                          result.get("shape_changes", [])],
                 "graph_executions_total": len(execs),
                 "graph_executions_by_graph": {str(k): v for k, v in graphs.items()},
                 "steps": len(steps),
                 "step_graphs_in_order": [g for g in dict.fromkeys(e["graph"] for e in steps)],
                 "setup_graph_executions": [{"graph": e["graph"], "start_ms": ms(e["start"]),
                                             "gpu_ms": ms(e["end"] - e["start"])}
                                            for e in setup],
                 "capture": capture_health(r)}
    if len(steps) <= SKIP:
        out["error"] = "no steps found"
        return finish(out, 1)
    lo, hi = steps[SKIP]["start"], steps[-1]["end"]
    window = hi - lo
    gpu = r.gpu_intervals(dev)
    runs = compiler_runs(r, pid)
    loads = [a for a, *_ in api_rows(r, MODULE_LOAD, pid)]
    hits = []
    for i in range(1, len(steps)):
        if steps[i]["graph"] == steps[i - 1]["graph"]:
            continue
        a, b = steps[i - 1]["end"], steps[i]["start"]
        ha, hb = steps[i - 1]["launch"], steps[i]["launch"]
        hits.append({"step": i, "in_steady": lo <= a and b <= hi,
                     "gpu_gap_ms": ms(b - a),
                     "gpu_idle_ms": ms((b - a) - clipped_ns(gpu, a, b)),
                     "host_launch_gap_ms": ms(hb - ha) if ha and hb else None,
                     "compiler_runs_in_host_gap": sum(1 for x in runs
                                                      if ha <= x["start"] < hb),
                     "module_loads_in_host_gap": sum(1 for t in loads if ha <= t < hb)})
    steady_hits = [h for h in hits if h["in_steady"]]
    busy = clipped_ns(gpu, lo, hi)
    same = [steps[i]["start"] - steps[i - 1]["end"] for i in range(SKIP + 1, len(steps))
            if steps[i]["graph"] == steps[i - 1]["graph"]]
    step_ms = defaultdict(list)
    for s in steps:
        step_ms[s["graph"]].append(s["end"] - s["start"])
    out["compilation"] = compile_report(r, pid, [s["start"] for s in steps], lo, hi,
                                        execs)
    out["hits"] = hits
    out["steady"] = {"first_step": SKIP, "steps": len(steps) - SKIP, "lo": int(lo),
                     "hi": int(hi), "ms": ms(window),
                     "step_gpu_ms_median_by_graph": {str(g): ms(float(np.median(v)))
                                                    for g, v in step_ms.items()},
                     "busy_pct": pct(busy, window), "idle_pct": pct(window - busy, window),
                     "shape_change_hits": len(steady_hits),
                     "shape_change_stall_ms": round(sum(h["gpu_idle_ms"]
                                                        for h in steady_hits), 3),
                     "shape_change_stall_pct": pct(sum(h["gpu_idle_ms"]
                                                       for h in steady_hits) * 1e6, window),
                     "gap_between_same_shape_steps_ms_max": ms(max(same, default=0)),
                     "launching_threads": launching_threads(r, pid, lo, hi),
                     "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
