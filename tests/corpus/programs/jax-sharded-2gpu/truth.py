"""Truth figures for jax-sharded-2gpu (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations are what the program did: 40 calls of jit_train_step (RESULT "steps"); XLA runs
the SPMD program once per device and step. The capture has no XLA NVTX ranges (domain
TSL excluded, see the manifest), so per device the steps are read from the CUDA graph
executions (XLA command buffers): the step's compute is split into several graphs around
the NCCL all-reduce, each executed once per step; the step graphs are those executed
RESULT "steps" times (the most executed count), and the step starts with the first of
them. Per device: the graph executions by graph, the NCCL kernels (name contains "nccl"),
the launching threads, and the steady state = steps 2..39, from the GPU start of step 2 to
the GPU end of the last graph or kernel of the last step: busy % and exposed
communication = NCCL kernel time not overlapped by any other GPU work of that device, as
% of the window. Compilation: XLA's compiler runs (ptxas/nvlink spawned by its compile
threads, posix_spawnp ... waitpid), placed against device 0's steps.

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
from truthlib import Report, clipped_ns, ms, pct  # noqa: E402

SKIP = 2
NCCL = re.compile(r"nccl", re.IGNORECASE)


def main() -> int:
    r = Report(sys.argv[1])
    result = manifest_result(sys.argv[1])
    pid = main_pid(r)
    out: dict = {"devices": r.devices(), "processes_with_gpu_work": r.processes_with_gpu_work(),
                 "result_steps": result.get("steps"),
                 "result_ms_per_step": result.get("ms_per_step"),
                 "capture": capture_health(r), "per_device": {}}
    dev0_starts: list[int] = []
    dev0_window = (0, 0)
    for dev in r.devices():
        execs = graph_execs(r, dev)
        graphs = graph_counts(execs)
        most = max(graphs.values(), default=0)
        step_graphs = [g for g, n in graphs.items() if n == most]
        first_graph = next((e["graph"] for e in execs if e["graph"] in step_graphs), None)
        steps = [e for e in execs if e["graph"] == first_graph]
        kernels = r.kernels(dev)
        nccl = np.array([(a, b) for a, b, name, *_ in kernels if NCCL.search(name)],
                        dtype=np.int64).reshape(-1, 2)
        d: dict = {"graph_executions_total": len(execs),
                   "graph_executions_by_graph": {str(k): v for k, v in graphs.items()},
                   "step_graphs": step_graphs, "steps": len(steps),
                   "graph_executions_per_step": len(step_graphs),
                   "nccl_kernels": int(len(nccl)),
                   "nccl_kernel_names": sorted({name for _, _, name, *_ in kernels
                                                if NCCL.search(name)})[:5]}
        if len(steps) <= SKIP:
            out["per_device"][str(dev)] = d
            continue
        lo = steps[SKIP]["start"]
        last = steps[-1]["start"]
        hi = max([e["end"] for e in execs if e["start"] >= last]
                 + [b for a, b, *_ in kernels if a >= last])
        window = hi - lo
        n = len(steps) - SKIP
        allgpu = r.gpu_intervals(dev)
        busy = clipped_ns(allgpu, lo, hi)
        nccl_set = {(int(a), int(b)) for a, b in nccl.tolist()}
        other = np.array([(a, b) for a, b in allgpu.tolist() if (a, b) not in nccl_set],
                         dtype=np.int64).reshape(-1, 2)
        other_ns = clipped_ns(other, lo, hi)
        nccl_ns = clipped_ns(nccl, lo, hi)
        threads = Counter(e["thread"] for e in execs if e["thread"] is not None
                          and lo <= e["start"] < hi)
        d["steady"] = {"first_step": SKIP, "steps": n, "lo": int(lo), "hi": int(hi),
                       "ms": ms(window), "ms_per_step": ms(window / n),
                       "busy_pct": pct(busy, window), "idle_pct": pct(window - busy, window),
                       "nccl_pct": pct(nccl_ns, window),
                       "nccl_kernel_us_median": round(float(np.median(
                           nccl[:, 1] - nccl[:, 0])) / 1e3, 1) if len(nccl) else 0.0,
                       "exposed_communication_pct": pct(busy - other_ns, window),
                       "graph_launch_threads": {str(k): v for k, v in threads.items()}}
        out["per_device"][str(dev)] = d
        if not dev0_starts:
            dev0_starts = [s["start"] for s in steps]
            dev0_window = (lo, hi)
    lo, hi = dev0_window
    out["compilation"] = compile_report(r, pid, dev0_starts, lo, hi)
    out["steady_host"] = {"launching_threads": launching_threads(r, pid, lo, hi),
                          "host_calls": host_calls_in(r, pid, lo, hi)}
    return finish(out)


if __name__ == "__main__":
    raise SystemExit(main())
