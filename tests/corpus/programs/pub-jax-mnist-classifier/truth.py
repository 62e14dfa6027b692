"""Truth figures for pub-jax-mnist-classifier (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

JAX's examples/mnist_classifier.py (3 epochs of 100 steps, un-jitted accuracy() after
each epoch). No NVTX (XLA's domain TSL excluded at capture). Iterations: the executions
of the step's CUDA graph (XLA command buffer, graph-level trace): the graphId executed
most often (``step_graph``, ``iterations``), each launched by one cuGraphLaunch of the
main thread. ``epoch_gaps_ms``: the step periods over 5 ms (the accuracy() evaluations
after epochs 1 and 2; the one after epoch 3 follows the last step).

Compilation (truth_jax.compile_report): XLA's compiler runs (ptxas/nvlink spawns) and
module loads, by the number of steps before them; ``first_use_compile_s``: the step
period that holds module loads (the first evaluation compiles its eager ops).

Windows (all from a step graph's GPU start to another's):
  * ``naive``: step index 2 to the last step (the usual skip-2 steady state); it holds
    the first evaluation: ``first_eval_pct`` of it is that one period.
  * ``steady``: from the first step after the last module load / compiler run that falls
    between steps (all first-use work done) to the last step: epochs 2 and 3 and the
    second evaluation. Its figures: ``window_ms``, ``periods``, ``gpu_busy_pct`` (union
    of kernels, copies, memsets, graph executions), ``gpu_idle_pct``;
    - ``input_wait_pct``: over the step periods under 5 ms, the GPU idle from the end of
      the step graph to the start of the next step's first host-to-device copy (the
      batch upload): the host cutting the next numpy batch and handing it to JAX;
      ``dispatch_idle_pct``: from the end of those uploads to the next step graph's start
      (the jit dispatch: graph parameter updates and cuGraphLaunch);
      ``other_step_idle_pct``: the rest of those periods' idle;
    - ``eval_idle_pct``: the idle in the long period (the second evaluation: the test
      and train sets staged and uploaded again, stax's ops dispatched one by one);
    - per step medians: ``step_period_us``, ``graph_us``, ``input_wait_us``,
      ``dispatch_us``, ``h2d_per_step``, ``h2d_bytes_per_step``, ``h2d_src``;
      ``main_thread_futex_us_median``: the main thread's futex waits in a step period
      (OS-runtime trace, calls >= 10 us: waiting for JAX's transfer threads);
    - ``host_calls``: module loads, allocations, syncs and launches of the process in
      the window (truth_jax.host_calls_in); ``d2h_in_steps``: device-to-host copies in
      the short step periods.
Capture check (truth_jax.capture_health): CUPTI's produced events against the rows
exported.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import THREAD_MASK, Report, ms, pct  # noqa: E402

EPOCH_GAP_NS = 5_000_000


def main(path: str) -> dict:
    r = Report(path)
    pid = tj.main_pid(r)
    execs = tj.graph_execs(r, 0)
    counts = tj.graph_counts(execs)
    gid = next(iter(counts))
    steps = [e for e in execs if e["graph"] == gid]
    st = [e["start"] for e in steps]
    out: dict = {"capture": tj.capture_health(r), "graph_executions_by_graph":
                 {str(k): v for k, v in counts.items()}, "step_graph": gid,
                 "iterations": len(steps)}
    periods = np.diff(st)
    long_ = [i for i, p in enumerate(periods) if p > EPOCH_GAP_NS]
    out["epoch_gaps_ms"] = {str(i): ms(periods[i]) for i in long_}

    loads = [a for a, *_ in tj.api_rows(r, tj.MODULE_LOAD, pid)]
    runs = tj.compiler_runs(r, pid)
    inside = [a for a in loads if st[0] <= a < st[-1]] + \
             [x["end"] for x in runs if st[0] <= x["start"] < st[-1]]
    first = tj.steps_before(max(inside), st) if inside else 2
    first_use = [i for i in long_ if any(st[i] <= a < st[i + 1] for a in inside)]
    out["first_use_compile_s"] = {str(i): round(periods[i] / 1e9, 3) for i in first_use}

    lo2, hi = st[2], st[-1]
    out["naive"] = {"window_ms": ms(hi - lo2), "gpu_busy_pct": pct(r.busy_ns(lo2, hi), hi - lo2),
                    "first_eval_pct": pct(sum(periods[i] for i in first_use if i >= 2), hi - lo2)}

    lo = st[first]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    h2d = [m for m in r.memcpys(0) if m["kind"] == "Host-to-Device"]
    hs = np.array([m["start"] for m in h2d], dtype=np.int64)
    d2h = [m["start"] for m in r.memcpys(0) if m["kind"] == "Device-to-Host"]
    main_tid = steps[first]["thread"]
    futex = [(a, b) for a, b, n, g in r.osrt_calls(r"^futex$")
             if g & THREAD_MASK == main_tid]
    inp, disp, other, evald = 0, 0, 0, 0
    per = {"period": [], "graph": [], "input": [], "dispatch": [], "n": [], "bytes": [],
           "futex": []}
    srcs: set = set()
    d2h_steps = 0
    for p, c in zip(steps[first:-1], steps[first + 1:]):
        idle = (c["start"] - p["start"]) - r.busy_ns(p["start"], c["start"])
        if c["start"] - p["start"] > EPOCH_GAP_NS:
            evald += idle
            continue
        i0, i1 = np.searchsorted(hs, p["end"]), np.searchsorted(hs, c["start"])
        ups = h2d[i0:i1]
        a = ups[0]["start"] - p["end"] if ups else 0
        b = c["start"] - max(m["end"] for m in ups) if ups else c["start"] - p["end"]
        inp += a
        disp += b
        other += idle - a - b
        srcs |= {m["src"] for m in ups}
        d2h_steps += sum(1 for t in d2h if p["start"] <= t < c["start"])
        for k, v in (("period", c["start"] - p["start"]), ("graph", p["end"] - p["start"]),
                     ("input", a), ("dispatch", b), ("n", len(ups)),
                     ("bytes", sum(m["bytes"] for m in ups)),
                     ("futex", sum(y - x for x, y in futex if p["start"] <= x < c["start"]))):
            per[k].append(v)
    med = {k: float(np.median(v)) for k, v in per.items()}
    out["steady"] = {
        "first_step": first, "periods": len(steps) - 1 - first, "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win), "gpu_idle_pct": pct(win - busy, win),
        "input_wait_pct": pct(inp, win), "dispatch_idle_pct": pct(disp, win),
        "other_step_idle_pct": pct(other, win), "eval_idle_pct": pct(evald, win),
        "step_period_us": round(med["period"] / 1e3, 1), "graph_us": round(med["graph"] / 1e3, 1),
        "input_wait_us": round(med["input"] / 1e3, 1), "dispatch_us": round(med["dispatch"] / 1e3, 1),
        "h2d_per_step": int(med["n"]), "h2d_bytes_per_step": int(med["bytes"]),
        "h2d_src": sorted(srcs), "main_thread_futex_us_median": round(med["futex"] / 1e3, 1),
        "d2h_in_steps": d2h_steps,
        "host_calls": tj.host_calls_in(r, pid, lo, hi),
        "launching_threads": tj.launching_threads(r, pid, lo, hi),
    }
    out["compilation"] = tj.compile_report(r, pid, st, lo, hi)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
