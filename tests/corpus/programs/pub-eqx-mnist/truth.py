"""Truth figures for pub-eqx-mnist (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Equinox's MNIST CNN example (300 steps, batch 64, a PyTorch DataLoader over torchvision
FakeData with num_workers=0, evaluation on the 1,000-image test loader at step 0, every
30 steps and at the last step). No NVTX (XLA's domain TSL excluded). Iterations: the
training steps, one execution each of the step's first CUDA graph (XLA command buffer,
graph-level trace): the graphId executed most often (ties: the first executed)
(``step_graph``, ``iterations``); ``graph_executions_by_graph`` lists all (the
evaluation's jitted loss and accuracy run their own graphs, once per test batch).
``eval_periods``: the step periods holding an evaluation (periods over 100 ms), with
their median length and batch uploads in one (each of the 16 test batches is uploaded
twice, once for the jitted loss and once for the accuracy, plus the step's batch).

Steady window: from the 3rd step graph's GPU start (index 2) to the last one's. Figures
of it: ``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets, graph
executions), ``gpu_idle_pct``;
  * ``input_wait_pct``: for every batch upload in the window (a host-to-device copy
    over 64 KiB: a 64x1x28x28 float32 batch, training or test), the GPU idle from the
    end of the GPU work before it to its start: the host building the batch (FakeData
    items made one by one: a seeded random image, PIL, ToTensor, Normalize), summed;
    ``input_wait_ms_median`` per batch;
  * ``after_upload_pct``: the idle from each batch upload's end to the next GPU work
    (JAX dispatch: filter_jit's partition of the model in Python, graph updates,
    launches); ``other_idle_pct``: the rest;
  * ``step_period_ms_median`` (periods without an evaluation), ``graph_us`` (median of
    the step graphs), ``batch_uploads`` and ``batch_bytes`` (median), ``h2d_src``;
  * ``processes_started_in_window``: processes started during the window (nsys injects
    into each; DataLoader workers would be: none, num_workers=0, the main thread builds
    every batch); ``host_calls`` (truth_jax.host_calls_in).
Compilation: truth_jax.compile_report (before step 0: the notebook's exploration cells,
make_step and the jitted evaluation functions).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import Report, ms, pct, union  # noqa: E402

SKIP = 2
BATCH_BYTES = 64 * 1024
EVAL_NS = 100_000_000


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
    u = union(r.gpu_intervals(0))
    cps = r.memcpys(0)
    ups = [m for m in cps if m["kind"] == "Host-to-Device" and m["bytes"] > BATCH_BYTES
           and lo <= m["start"] < hi]
    wait, after, per = 0, 0, []
    for m in ups:
        k = int(np.searchsorted(u[:, 1], m["start"], "right")) - 1
        prev_end = max(int(u[k, 1]), lo) if k >= 0 else lo
        w = max(0, m["start"] - prev_end)
        wait += w
        per.append(w)
        j = int(np.searchsorted(u[:, 0], m["end"], "right"))
        nxt = min(int(u[j, 0]), hi) if j < len(u) else hi
        after += max(0, nxt - m["end"])
    periods = np.diff(st[SKIP:])
    evals = [p for p in periods if p > EVAL_NS]
    eval_ups = [sum(1 for m in ups if a <= m["start"] < b)
                for a, b in zip(st[SKIP:-1], st[SKIP + 1:]) if b - a > EVAL_NS]
    started = [c["pid"] for c in tj.child_processes(r, pid) if lo <= c["start"] < hi]
    idle = win - busy
    return {
        "capture": tj.capture_health(r),
        "graph_executions_by_graph": {str(k): v for k, v in counts.items()},
        "step_graph": gid, "iterations": len(steps),
        "eval_periods": {"count": len(evals),
                         "ms_median": ms(float(np.median(evals))) if evals else None,
                         "batch_uploads_median": int(np.median(eval_ups)) if eval_ups else 0},
        "steady": {
            "window_ms": ms(win), "periods": len(steps) - SKIP - 1,
            "gpu_busy_pct": pct(busy, win), "gpu_idle_pct": pct(idle, win),
            "input_wait_pct": pct(wait, win),
            "input_wait_ms_median": ms(float(np.median(per))),
            "after_upload_pct": pct(after, win),
            "other_idle_pct": pct(idle - wait - after, win),
            "step_period_ms_median": ms(float(np.median([p for p in periods if p <= EVAL_NS]))),
            "graph_us": round(float(np.median([e["end"] - e["start"] for e in steps])) / 1e3, 1),
            "batch_uploads": len(ups), "batch_bytes": int(np.median([m["bytes"] for m in ups])),
            "h2d_src": sorted({m["src"] for m in ups}),
            "processes_started_in_window": len(started),
            "host_calls": tj.host_calls_in(r, pid, lo, hi),
        },
        "compilation": tj.compile_report(r, pid, st, lo, hi),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
