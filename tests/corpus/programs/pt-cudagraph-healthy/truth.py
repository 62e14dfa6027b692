"""Truth figures for pt-cudagraph-healthy, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program did: one CUDA graph (8 x Linear+GELU and an argmax) captured with
torch.cuda.graph and replayed 300 times; before each replay a 16 MiB device-to-device
copy into the static input, after it a 16 KiB device-to-device copy of the predictions
into a preallocated buffer; one torch.cuda.synchronize() after the loop. No NVTX.

Iterations: the graph executions on the first device (CUPTI_ACTIVITY_KIND_GRAPH_TRACE,
graph-level tracing: nsys's default); if the capture traced graph nodes instead, the
graph's kernels grouped by the correlationId of their launch. ``graph_executions`` is
their count, ``cudaGraphLaunch_calls`` the API calls', ``executions_matched`` how many
executions have their cudaGraphLaunch call (same correlationId). ``nvtx_ranges``: 0.

Steady window: executions 3..N (the first two skipped: the first launch uploads the
graph), from the start of the third execution to the end of the last.
  * ``steady_busy_pct``: the union of all GPU work (kernels, copies, memsets, graph
    executions) in the window, % of it; ``steady_idle_pct`` = 100 - busy: the most any
    cause could take (a healthy control: designed < 5). ``largest_gap_us`` the longest
    idle stretch, ``idle_gaps_over_10us`` how many exceed 10 us.
  * The cause's share, by this plain definition: ``host_late_idle_pct``, the part of the
    window's idle gaps during which the work that ends the gap had not been launched yet
    (from the gap's start to the end of the launch call of the GPU operation starting
    at the gap's end, matched by correlationId): the host's share (launch-bound or host
    work). Designed ~0: the host queues the whole loop ahead of the GPU.
  * ``launch_lead_ms_min`` / ``_median``: execution start minus the end of its
    cudaGraphLaunch call (how far ahead the host launched); ``host_period_us_median``
    (between consecutive cudaGraphLaunch calls) against ``gpu_period_us_median``
    (between consecutive execution starts); ``host_loop_ms``: first launch call's start
    to the last one's end.
  * Silent causes, measured: ``sync_calls_in_loop`` (any *Synchronize call of the
    process between the first and the last cudaGraphLaunch call), ``alloc_calls`` (malloc
    / free kin from the first launch call to the window's end), ``copies_in_window`` by
    kind and ``pageable_copies_in_window``, ``copy_pct`` (copies' union, % of the
    window), ``eager_kernels_in_window`` (kernels not from the graph), ``loop_calls``
    (CUDA calls by name between the first and the last cudaGraphLaunch call).
  * ``final_sync_ms``: the synchronize after the loop (the host waits there while the
    GPU is still busy: ``final_sync_gpu_busy_pct``, the window's busy % during it).
Small grids cannot be measured: graph-level tracing hides the graph's kernels.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, ms, pct, union  # noqa: E402

SKIP = 2
SYNC = r"Synchronize$"
ALLOC = r"^(cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|cuMemCreate|cuMemMap|cuMemRelease|" \
        r"cudaHostAlloc|cudaMallocHost|cudaFreeHost|cuMemHostAlloc)"


def cols(r: Report, table: str) -> set[str]:
    return {c[1] for c in r.q(f"pragma table_info({table})")} if r.has(table) else set()


def executions(r: Report, dev: int) -> tuple[str, list[tuple[int, int, int]]]:
    """(source, [(start, end, correlationId)]) of the graph executions on *dev*."""
    if r.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        rows = r.q("select start, end, correlationId from CUPTI_ACTIVITY_KIND_GRAPH_TRACE "
                   "where deviceId = ? order by start", dev)
        if rows:
            return "graph", rows
    spans: dict[int, tuple[int, int]] = {}
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET"):
        if "graphNodeId" in cols(r, t):
            for a, b, c in r.q(f"select start, end, correlationId from {t} where deviceId = ? "
                               "and graphNodeId is not null and graphNodeId != 0", dev):
                s, e = spans.get(c, (a, b))
                spans[c] = (min(s, a), max(e, b))
    return "graph-nodes", sorted((a, b, c) for c, (a, b) in spans.items())


def main(path: str) -> dict:
    r = Report(path)
    devices = r.devices()
    dev = devices[0] if devices else 0
    source, execs = executions(r, dev)
    calls = {c: (a, b, re.sub(r"_v\d+$", "", r.strings.get(n, str(n))))
             for a, b, n, c in r.q("select start, end, nameId, correlationId from "
                                   "CUPTI_ACTIVITY_KIND_RUNTIME")}
    launches = sorted((a, b) for a, b, name in calls.values() if name == "cudaGraphLaunch")
    out: dict = {"device": dev, "source": source, "graph_executions": len(execs),
                 "cudaGraphLaunch_calls": len(launches),
                 "executions_matched": sum(1 for *_, c in execs
                                           if calls.get(c, (0, 0, ""))[2] == "cudaGraphLaunch"),
                 "nvtx_ranges": len(r.ranges("."))}
    if len(execs) <= SKIP + 1 or not launches:
        return out | {"error": "too few graph executions"}
    lo, hi = execs[SKIP][0], max(b for _, b, _ in execs)
    win = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    gaps = r.idle_gaps(lo, hi, dev)
    gap_ns = gaps[:, 1] - gaps[:, 0] if len(gaps) else np.zeros(0, dtype=np.int64)

    # the GPU operation that ends each gap, and when its launch call returned
    first_op: dict[int, int] = {}
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if r.has(t):
            for a, c in r.q(f"select start, correlationId from {t} where deviceId = ?", dev):
                first_op.setdefault(a, c)
    late = 0
    for a, b in gaps.tolist():
        call = calls.get(first_op.get(b, -1))
        if call is not None:
            late += max(0, min(b, call[1]) - a)

    steady = execs[SKIP:]
    leads = [a - calls[c][1] for a, _, c in steady if c in calls]
    starts = np.array([a for a, _, _ in steady], dtype=np.int64)
    l_starts = np.array([a for a, _ in launches], dtype=np.int64)
    loop_lo, loop_hi = launches[0][0], launches[-1][1]
    in_loop = [v for v in calls.values() if loop_lo <= v[0] <= loop_hi]
    syncs = [v for v in in_loop if re.search(SYNC, v[2])]
    allocs = [v for v in calls.values() if loop_lo <= v[0] < hi and re.search(ALLOC, v[2])]
    after = sorted(v for v in calls.values() if v[0] > loop_hi and re.search(SYNC, v[2]))
    copies = [m for m in r.memcpys(dev) if lo <= m["start"] < hi]
    copy_iv = np.array([(m["start"], m["end"]) for m in copies], dtype=np.int64).reshape(-1, 2)
    kcols = cols(r, "CUPTI_ACTIVITY_KIND_KERNEL")
    eager = r.q("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL where deviceId = ? and "
                "start >= ? and start < ?" + (" and (graphNodeId is null or graphNodeId = 0)"
                                               if "graphNodeId" in kcols else ""),
                dev, lo, hi)[0][0] if kcols else 0
    out |= {
        "steady_window_ns": [int(lo), int(hi)],
        "steady_executions": len(steady),
        "steady_window_ms": ms(win),
        "steady_busy_pct": pct(busy, win),
        "steady_idle_pct": pct(win - busy, win),
        "largest_gap_us": round(float(gap_ns.max()) / 1e3, 2) if len(gap_ns) else 0.0,
        "idle_gaps": int(len(gap_ns)),
        "idle_gaps_over_10us": int((gap_ns > 10_000).sum()),
        "host_late_idle_pct": pct(late, win),
        "execution_ms_median": ms(float(np.median([b - a for a, b, _ in steady]))),
        "gpu_period_us_median": round(float(np.median(np.diff(starts))) / 1e3, 2),
        "host_period_us_median": round(float(np.median(np.diff(l_starts))) / 1e3, 2),
        "host_loop_ms": ms(loop_hi - loop_lo),
        "launch_lead_ms_min": ms(min(leads)) if leads else None,
        "launch_lead_ms_median": ms(float(np.median(leads))) if leads else None,
        "sync_calls_in_loop": len(syncs),
        "alloc_calls": len(allocs),
        "loop_calls": dict(sorted(Counter(v[2] for v in in_loop).items())),
        "copies_in_window": dict(Counter(m["kind"] for m in copies)),
        "pageable_copies_in_window": sum(1 for m in copies
                                         if "Pageable" in (str(m["src"]) + str(m["dst"]))),
        "copy_pct": pct(clipped_ns(copy_iv, lo, hi), win),
        "eager_kernels_in_window": int(eager),
    }
    if after:
        a, b, name = after[0]
        out |= {"final_sync": name, "final_sync_ms": ms(b - a),
                "final_sync_gpu_busy_pct": pct(clipped_ns(u, max(a, lo), min(b, hi)),
                                               min(b, hi) - max(a, lo))
                if min(b, hi) > max(a, lo) else None}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
