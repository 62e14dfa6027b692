"""Truth figures for pub-jax-mnist-vae (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

JAX's examples/mnist_vae.py (4 epochs; each epoch one jitted run_epoch whose
lax.fori_loop runs 80 batches on the device, then a jitted evaluate, a printed ELBO and
a PNG of sampled images written by plt.imsave). No NVTX (XLA's domain TSL excluded).

Iterations: XLA runs the fori_loop's body as a CUDA graph (command buffer) launched once
per loop iteration from the host (graph-level trace). ``body_graphs``: the graphs
executed at least 10 times (epoch 1's run_epoch executable, then the one of epochs 2-4);
``iterations``: their executions (``iterations_by_graph``); ``epochs``: runs of them
separated by more than 5 ms, with each run's length (``loop_ms``).

Steady window: two full epoch periods, from the first body execution of epoch 2 to the
first of epoch 4 (epoch 1 precedes the compilation of evaluate; epoch 4's images are
written after the last GPU work). Figures of it: ``window_ms``, ``gpu_busy_pct`` (union
of kernels, copies, memsets, graph executions), ``gpu_idle_pct``;
  * ``results_work_pct``: the idle from the end of each epoch's device-to-host copy of
    the sampled image grid (the largest D2H copy of the epoch) to the next GPU activity:
    the host encodes and writes the PNG (``png_write_ms``: the main thread's open64 of
    the file to its last write, OS-runtime trace) and dispatches the next epoch;
  * ``eval_wait_pct``: the idle from the end of the epoch's last body graph to the end
    of that image copy (evaluate's graph, the ELBO's 4-byte copy, the print);
  * ``loop_idle_pct``: idle between body graphs inside the epochs;
  * ``h2d_in_window`` (bytes, copies: the PRNG key only; the train set was put on the
    device once), ``d2h_per_epoch``, ``copy_src_dst``;
  * ``host_calls`` (truth_jax.host_calls_in: module loads, allocations, syncs,
    launches). ``naive``: the usual window, from the most executed graph's 3rd
    execution to its last, and its busy share.
Compilation: truth_jax.compile_report against the body executions' starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402

EPOCH_GAP_NS = 5_000_000


def main(path: str) -> dict:
    r = Report(path)
    pid = tj.main_pid(r)
    execs = tj.graph_execs(r, 0)
    counts = tj.graph_counts(execs)
    body_ids = [g for g, n in counts.items() if n >= 10]
    body = [e for e in execs if e["graph"] in body_ids]
    out: dict = {"capture": tj.capture_health(r),
                 "graph_executions_by_graph": {str(k): v for k, v in counts.items()},
                 "body_graphs": body_ids, "iterations": len(body),
                 "iterations_by_graph": {str(g): counts[g] for g in body_ids}}
    epochs: list[list[dict]] = [[body[0]]]
    for p, c in zip(body, body[1:]):
        if c["start"] - p["end"] > EPOCH_GAP_NS:
            epochs.append([])
        epochs[-1].append(c)
    out["epochs"] = [{"iterations": len(e), "loop_ms": ms(e[-1]["end"] - e[0]["start"])}
                     for e in epochs]
    lo, hi = epochs[1][0]["start"], epochs[3][0]["start"]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    cps = r.memcpys(0)
    u = union(r.gpu_intervals(0))
    starts = u[:, 0]
    results, evalw, loopi = 0, 0, 0
    for e in epochs[1:3]:
        nxt_epoch = next(x for x in epochs if x[0]["start"] > e[-1]["end"])[0]["start"]
        d2h = [m for m in cps if m["kind"] == "Device-to-Host"
               and e[-1]["end"] <= m["start"] < nxt_epoch]
        grid = max(d2h, key=lambda m: m["bytes"])
        j = int(np.searchsorted(starts, grid["end"], "right"))
        nxt = int(starts[j]) if j < len(starts) else hi
        results += nxt - grid["end"]
        evalw += (grid["end"] - e[-1]["end"]) - r.busy_ns(e[-1]["end"], grid["end"])
        loopi += (e[-1]["end"] - e[0]["start"]) - r.busy_ns(e[0]["start"], e[-1]["end"])
    main_tid = body[0]["thread"]
    files = [(a, b, n) for a, b, n, g in r.osrt_calls(r"^(open64|write)$")
             if g & THREAD_MASK == main_tid and lo <= a < hi]
    opens = [a for a, _, n in files if n == "open64"]
    png = []
    for a, nxt in zip(opens, opens[1:] + [hi]):
        writes = [y for x, y, n in files if n == "write" and a < x < nxt]
        if writes:
            png.append(max(writes) - a)
    h2d = [m for m in cps if m["kind"] == "Host-to-Device" and lo <= m["start"] < hi]
    naive = [e for e in execs if e["graph"] == next(iter(counts))]
    nlo, nhi = naive[2]["start"], naive[-1]["start"]
    out["steady"] = {
        "window_ms": ms(win), "epochs": 2, "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win), "results_work_pct": pct(results, win),
        "eval_wait_pct": pct(evalw, win), "loop_idle_pct": pct(loopi, win),
        "png_write_ms": [ms(x) for x in png],
        "h2d_in_window": {"copies": len(h2d), "bytes": sum(m["bytes"] for m in h2d)},
        "d2h_per_epoch": [m["bytes"] for m in cps if m["kind"] == "Device-to-Host"
                          and epochs[1][0]["start"] <= m["start"] < epochs[2][0]["start"]],
        "copy_src_dst": sorted({f"{m['kind']} {m['src']}->{m['dst']}" for m in cps
                                if lo <= m["start"] < hi}),
        "host_calls": tj.host_calls_in(r, pid, lo, hi),
    }
    out["naive"] = {"window_ms": ms(nhi - nlo), "gpu_busy_pct": pct(r.busy_ns(nlo, nhi), nhi - nlo)}
    out["compilation"] = tj.compile_report(r, pid, [e["start"] for e in body], lo, hi)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
