"""Truth figures for pub-flax-train-state (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Flax's nnx_toy_examples/03_train_state.py (1,500 steps). No NVTX (XLA's domain TSL
excluded). Iterations: the executions of the jitted train_step's CUDA graph (XLA command
buffer, graph-level trace), the graphId executed most often (``step_graph``,
``iterations``), launched by the main thread.

Steady window: from the 3rd step graph's GPU start (index 2) to the last one's. Figures
of it: ``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets, graph
executions), ``gpu_idle_pct``; per step period (one step graph's start to the next
one's), medians: ``step_period_us``, ``graph_us``, ``upload_wait_us`` (step graph's end
to the next step's first host-to-device copy: the host's numpy choice of 32 points and
JAX's dispatch of train_step with the numpy batch), ``dispatch_us`` (last upload's end
to the step graph's start: graph parameter updates and cuGraphLaunch), ``h2d_per_step``
and ``h2d_bytes_per_step`` (the 32 x and 32 y values), ``launch_calls_per_step`` (graph
and kernel launches of the process); ``upload_wait_pct`` and ``dispatch_idle_pct``: those
stretches summed over the window; ``long_periods``: step periods over 1 ms (the
test_step print at step 1000 and scheduler noise) and their share of the window
(``long_periods_pct``); ``host_calls`` (truth_jax.host_calls_in); ``d2h_in_window``.
Compilation: truth_jax.compile_report (train_step before step 0, test_step at step 0,
the eager model call after the loop).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import Report, ms, pct  # noqa: E402

SKIP = 2
LONG_NS = 1_000_000


def main(path: str) -> dict:
    r = Report(path)
    pid = tj.main_pid(r)
    execs = tj.graph_execs(r, 0)
    counts = tj.graph_counts(execs)
    gid = next(iter(counts))
    steps = [e for e in execs if e["graph"] == gid]
    st = [e["start"] for e in steps]
    lo, hi = st[SKIP], st[-1]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    cps = r.memcpys(0)
    h2d = [m for m in cps if m["kind"] == "Host-to-Device"]
    hs = np.array([m["start"] for m in h2d], dtype=np.int64)
    launches = np.array(sorted(a for a, *_ in tj.api_rows(r, tj.LAUNCH, pid)), dtype=np.int64)
    per = {k: [] for k in ("period", "graph", "wait", "disp", "n", "bytes", "launch")}
    wait_sum, disp_sum, long_ = 0, 0, []
    for p, c in zip(steps[SKIP:-1], steps[SKIP + 1:]):
        ups = h2d[int(np.searchsorted(hs, p["end"])):int(np.searchsorted(hs, c["start"]))]
        if c["start"] - p["start"] > LONG_NS:
            long_.append(c["start"] - p["start"])
        if not ups:
            continue
        w = ups[0]["start"] - p["end"]
        d = c["start"] - max(m["end"] for m in ups)
        wait_sum += w
        disp_sum += d
        for k, v in (("period", c["start"] - p["start"]), ("graph", p["end"] - p["start"]),
                     ("wait", w), ("disp", d), ("n", len(ups)),
                     ("bytes", sum(m["bytes"] for m in ups)),
                     ("launch", int(((launches >= p["start"]) & (launches < c["start"])).sum()))):
            per[k].append(v)
    med = {k: float(np.median(v)) for k, v in per.items()}
    return {
        "capture": tj.capture_health(r),
        "graph_executions_by_graph": {str(k): v for k, v in counts.items()},
        "step_graph": gid, "iterations": len(steps),
        "steady": {
            "window_ms": ms(win), "periods": len(steps) - SKIP - 1,
            "gpu_busy_pct": pct(busy, win), "gpu_idle_pct": pct(win - busy, win),
            "step_period_us": round(med["period"] / 1e3, 1), "graph_us": round(med["graph"] / 1e3, 1),
            "upload_wait_us": round(med["wait"] / 1e3, 1), "dispatch_us": round(med["disp"] / 1e3, 1),
            "upload_wait_pct": pct(wait_sum, win), "dispatch_idle_pct": pct(disp_sum, win),
            "h2d_per_step": int(med["n"]), "h2d_bytes_per_step": int(med["bytes"]),
            "launch_calls_per_step": int(med["launch"]),
            "long_periods": len(long_), "long_periods_pct": pct(sum(long_), win),
            "d2h_in_window": sum(1 for m in cps if m["kind"] == "Device-to-Host"
                                 and lo <= m["start"] < hi),
            "host_calls": tj.host_calls_in(r, pid, lo, hi),
        },
        "compilation": tj.compile_report(r, pid, st, lo, hi),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
