"""Truth figures for pub-jax-dpsgd (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

JAX's examples/differentially_private_sgd.py (--epochs 3, 50 steps an epoch). No NVTX
(XLA's domain TSL excluded). A step is the jitted private_update: three CUDA graphs
(XLA command buffers, graph-level trace) with XLA's non-graphed convolution kernels
between them; epoch 1 runs one set of graphs, epochs 2 and 3 another (new graph ids
after the first evaluation). ``graph_executions_by_graph``; ``iterations``: the
executions of the most executed graph (ties: the first executed: the step's first
graph of epochs 2-3); ``steps_all_epochs``: those plus the executions of epoch 1's
first graph (the earliest graph executed as often as the others of its size).

After each epoch the script evaluates on the host side: un-jitted accuracy() and loss()
(stax ops one by one on the re-uploaded test set), prints them, then compute_epsilon
(dp_accounting's RDP accountant reads 99 device scalars back one at a time, then
numpy/scipy on the host). ``epoch_gaps_ms``: the step periods over 5 ms.

Steady window: from the 3rd execution of the step graph (index 2) to its last one:
epoch 2 (from its 3rd step), the second evaluation, epoch 3. Figures of it:
``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets, graph executions),
``gpu_idle_pct``;
  * ``eval_period_pct``: the second evaluation's period (the step period over 5 ms) %
    of the window, ``eval_busy_pct`` its busy share;
    ``results_work_pct``: in it, the idle stretches that begin where a device-to-host
    copy ends (within 2 us) up to the next GPU activity (the host's work on each value
    it read back: the accountant's numpy/scipy, the prints), % of the window;
    ``eval_other_idle_pct``: the rest of its idle (eager dispatch of the evaluation,
    staging of the 31 MB test set twice); ``eval_d2h``: its device-to-host copies;
  * ``step_idle_pct``: the idle of the step periods under 5 ms, % of the window;
    ``input_wait_pct``: in them, from the end of the step's last graph to the start of
    the next batch's upload (the first host-to-device copy over 64 KiB after it);
    ``step_period_us`` and ``step_busy_pct`` (medians / share over those periods),
    ``batch_bytes`` (median upload a step), ``h2d_src``;
  * ``host_calls`` (truth_jax.host_calls_in), ``d2h_in_steps``.
Compilation: truth_jax.compile_report against the step graph's starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import Report, ms, pct, union  # noqa: E402

EPOCH_GAP_NS = 5_000_000
TOUCH_NS = 2_000
BATCH_BYTES = 64 * 1024


def gaps_in(u: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The idle stretches [start, end) inside [lo, hi) of the busy union *u*."""
    v = np.clip(u[(u[:, 1] > lo) & (u[:, 0] < hi)], lo, hi)
    starts, ends = np.r_[lo, v[:, 1]], np.r_[v[:, 0], hi]
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1)


def main(path: str) -> dict:
    r = Report(path)
    pid = tj.main_pid(r)
    execs = tj.graph_execs(r, 0)
    counts = tj.graph_counts(execs)
    gid = next(iter(counts))
    steps = [e for e in execs if e["graph"] == gid]
    st = [e["start"] for e in steps]
    second = max(n for g, n in counts.items() if n < counts[gid] and n >= 10)
    g1 = next(g for g, n in counts.items() if n == second)
    out: dict = {"capture": tj.capture_health(r),
                 "graph_executions_by_graph": {str(k): v for k, v in counts.items()},
                 "step_graph": gid, "iterations": len(steps),
                 "steps_all_epochs": len(steps) + counts[g1]}
    periods = np.diff(st)
    out["epoch_gaps_ms"] = {str(i): ms(p) for i, p in enumerate(periods) if p > EPOCH_GAP_NS}
    lo, hi = st[2], st[-1]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    cps = r.memcpys(0)
    d2h = [m for m in cps if m["kind"] == "Device-to-Host"]
    d2h_ends = np.array(sorted(m["end"] for m in d2h), dtype=np.int64)
    h2d = [m for m in cps if m["kind"] == "Host-to-Device" and m["bytes"] > BATCH_BYTES]
    hs = np.array([m["start"] for m in h2d], dtype=np.int64)
    u = union(r.gpu_intervals(0))
    graph_ends = np.array(sorted(e["end"] for e in execs), dtype=np.int64)
    res, eval_idle, eval_len, eval_busy, step_idle, inp = 0, 0, 0, 0, 0, 0
    eval_d2h, d2h_steps, per, bytes_, srcs = 0, 0, [], [], set()
    for a, b in zip(st[2:-1], st[3:]):
        idle_iv = gaps_in(u, a, b)
        idle = int((idle_iv[:, 1] - idle_iv[:, 0]).sum()) if len(idle_iv) else 0
        if b - a > EPOCH_GAP_NS:
            eval_len += b - a
            eval_busy += (b - a) - idle
            eval_idle += idle
            eval_d2h += sum(1 for m in d2h if a <= m["start"] < b)
            for x, y in idle_iv.tolist():
                k = int(np.searchsorted(d2h_ends, x + TOUCH_NS, "right")) - 1
                if k >= 0 and x - d2h_ends[k] <= TOUCH_NS:
                    res += y - x
            continue
        step_idle += idle
        per.append((b - a, idle))
        d2h_steps += sum(1 for m in d2h if a <= m["start"] < b)
        ups = [m for m in h2d if a <= m["start"] < b]
        if ups:
            last_graph = int(graph_ends[np.searchsorted(graph_ends, ups[0]["start"], "right") - 1])
            g = gaps_in(u, last_graph, ups[0]["start"])
            inp += int((g[:, 1] - g[:, 0]).sum())
            bytes_.append(sum(m["bytes"] for m in ups))
            srcs |= {m["src"] for m in ups}
    out["steady"] = {
        "window_ms": ms(win), "gpu_busy_pct": pct(busy, win), "gpu_idle_pct": pct(win - busy, win),
        "eval_period_pct": pct(eval_len, win), "eval_busy_pct": pct(eval_busy, eval_len),
        "results_work_pct": pct(res, win), "eval_other_idle_pct": pct(eval_idle - res, win),
        "eval_d2h": eval_d2h, "step_idle_pct": pct(step_idle, win),
        "input_wait_pct": pct(inp, win),
        "step_period_us": round(float(np.median([p for p, _ in per])) / 1e3, 1),
        "step_busy_pct": pct(sum(p - i for p, i in per), sum(p for p, _ in per)),
        "batch_bytes": int(np.median(bytes_)), "h2d_src": sorted(srcs),
        "d2h_in_steps": d2h_steps, "host_calls": tj.host_calls_in(r, pid, lo, hi),
    }
    # The loop over all three epochs (the count's other reading, steps_all_epochs): from
    # epoch 1's 3rd step to the last step, less the first evaluation's period (its
    # compilation: first use, as [phases] says). The same evaluation idle falls in it.
    st1 = [e["start"] for e in execs if e["graph"] == g1]
    first_eval = st[0] - st1[-1]
    win_all = (hi - st1[2]) - first_eval
    out["steady_all_epochs"] = {
        "window_ms": ms(win_all), "first_eval_ms": ms(first_eval),
        "gpu_idle_pct": pct((hi - st1[2]) - r.busy_ns(st1[2], hi)
                            - (first_eval - r.busy_ns(st1[-1], st[0])), win_all),
        "results_work_pct": pct(res, win_all), "eval_idle_pct": pct(eval_idle, win_all)}
    out["compilation"] = tj.compile_report(r, pid, st, lo, hi)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
