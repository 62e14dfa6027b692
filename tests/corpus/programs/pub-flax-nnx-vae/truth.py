"""Truth figures for pub-flax-nnx-vae (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Flax's nnx_toy_examples/05_vae.py (2 epochs of 200 steps). No NVTX (XLA's domain TSL
excluded). Iterations: the executions of the nnx.jit train_step's CUDA graph (XLA
command buffer, graph-level trace), the graphId executed most often (``step_graph``,
``iterations``), launched by the main thread. Each step ends with
``losses.append(np.asarray(loss))``: a 4-byte device-to-host copy the host waits for.

Steady window: from the 3rd step graph's GPU start (index 2) to the last one's. Figures
of it: ``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets, graph
executions), ``gpu_idle_pct``. Each step period (one step graph's start to the next
one's) split at the step's loss copy and the next step's batch upload, summed over the
window (``*_pct``) and as medians (``*_us``):
  * ``before_loss_copy``: the step graph's end to the loss copy's start (the host
    returns from nnx.jit, which merges the module and optimizer state back in Python,
    then asks for the loss);
  * ``after_loss_copy``: the loss copy's end to the next batch upload's start (the host
    appends the loss, cuts the 64-row numpy batch, and nnx.jit splits the graph state
    and dispatches the next call);
  * ``after_upload``: the upload's end to the next step graph's start (graph parameter
    updates, cuGraphLaunch);
``step_period_us``, ``graph_us``, ``main_thread_futex_us`` (the main thread's futex
waits in a period, OS-runtime trace: the loss read and the hand-offs to JAX's transfer
threads), ``h2d_bytes_per_step``, ``d2h_per_step``, ``copy_src_dst``, ``long_periods``
(over 10 ms: the epoch's mean-loss print); ``host_calls`` (truth_jax.host_calls_in).
Compilation: truth_jax.compile_report (train_step before step 0; forward and sample
after the loop).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import THREAD_MASK, Report, ms, pct  # noqa: E402

SKIP = 2
LONG_NS = 10_000_000


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
    d2h = [m for m in cps if m["kind"] == "Device-to-Host"]
    h2d = [m for m in cps if m["kind"] == "Host-to-Device"]
    main_tid = steps[SKIP]["thread"]
    futex = [(a, b) for a, b, n, g in r.osrt_calls(r"^futex$") if g & THREAD_MASK == main_tid]
    keys = ("period", "graph", "before", "after", "upload", "futex", "h2d", "d2h")
    per: dict = {k: [] for k in keys}
    sums = {"before": 0, "after": 0, "upload": 0}
    long_ = []
    for p, c in zip(steps[SKIP:-1], steps[SKIP + 1:]):
        if c["start"] - p["start"] > LONG_NS:
            long_.append(ms(c["start"] - p["start"]))
        loss = [m for m in d2h if p["end"] <= m["start"] < c["start"]]
        ups = [m for m in h2d if p["end"] <= m["start"] < c["start"]]
        if not loss or not ups:
            continue
        v = {"period": c["start"] - p["start"], "graph": p["end"] - p["start"],
             "before": loss[0]["start"] - p["end"],
             "after": ups[0]["start"] - loss[-1]["end"],
             "upload": c["start"] - max(m["end"] for m in ups),
             "futex": sum(b - a for a, b in futex if p["start"] <= a < c["start"]),
             "h2d": sum(m["bytes"] for m in ups), "d2h": len(loss)}
        for k in keys:
            per[k].append(v[k])
        for k in sums:
            sums[k] += v[k]
    med = {k: float(np.median(v)) for k, v in per.items()}
    return {
        "capture": tj.capture_health(r),
        "graph_executions_by_graph": {str(k): v for k, v in counts.items()},
        "step_graph": gid, "iterations": len(steps),
        "steady": {
            "window_ms": ms(win), "periods": len(steps) - SKIP - 1,
            "gpu_busy_pct": pct(busy, win), "gpu_idle_pct": pct(win - busy, win),
            "before_loss_copy_pct": pct(sums["before"], win),
            "after_loss_copy_pct": pct(sums["after"], win),
            "after_upload_pct": pct(sums["upload"], win),
            "step_period_us": round(med["period"] / 1e3, 1), "graph_us": round(med["graph"] / 1e3, 1),
            "before_loss_copy_us": round(med["before"] / 1e3, 1),
            "after_loss_copy_us": round(med["after"] / 1e3, 1),
            "after_upload_us": round(med["upload"] / 1e3, 1),
            "main_thread_futex_us": round(med["futex"] / 1e3, 1),
            "h2d_bytes_per_step": int(med["h2d"]), "d2h_per_step": int(med["d2h"]),
            "copy_src_dst": sorted({f"{m['kind']} {m['src']}->{m['dst']}" for m in cps
                                    if lo <= m["start"] < hi}),
            "long_periods_ms": long_,
            "host_calls": tj.host_calls_in(r, pid, lo, hi),
        },
        "compilation": tj.compile_report(r, pid, st, lo, hi),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
