"""Truth figures for cpp-graph-replay, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 300 cudaGraphLaunch calls of one graph of 30 kernel
nodes, nothing else on the GPU but a memset before and a 4-byte copy after.
Iterations: the graph executions (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, graph-level
tracing, nsys's default); if the capture traced nodes instead, the graph's kernels
(those with a graphNodeId) grouped 30 at a time. Steady state: from the start of the
third execution to the end of the last.
Figures: executions, cudaGraphLaunch calls, busy % of the steady window, mean execution
time, mean gap between executions, largest idle gap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, pct  # noqa: E402

NODES = 30
SKIP = 2


def node_replays(r: Report) -> list[tuple[int, int]]:
    """Node-level tracing: the graph's kernels, NODES per replay, in start order."""
    if not r.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        return []
    cols = {c[1] for c in r.q("pragma table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    if "graphNodeId" not in cols:
        return []
    rows = r.q("select start, end from CUPTI_ACTIVITY_KIND_KERNEL where graphNodeId is not "
               "null and graphNodeId != 0 order by start")
    out = []
    for i in range(0, len(rows) - NODES + 1, NODES):
        chunk = rows[i:i + NODES]
        out.append((chunk[0][0], max(b for _, b in chunk)))
    return out


def main() -> int:
    r = Report(sys.argv[1])
    graphs = r.graph_launches()
    source = "graph"
    execs = [(a, b) for a, b, _ in graphs]
    if not execs:
        execs, source = node_replays(r), "graph-nodes"
    launches = r.api_calls(r"^cudaGraphLaunch$")
    result: dict = {"source": source, "graph_executions": len(execs),
                    "graph_ids": sorted({g for _, _, g in graphs}),
                    "cudaGraphLaunch_calls": len(launches)}
    if len(execs) <= SKIP:
        print(json.dumps(result | {"error": "too few graph executions"}))
        return 0
    lo = execs[SKIP][0]
    hi = max(b for _, b in execs)
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    gap_ns = (gaps[:, 1] - gaps[:, 0]) if len(gaps) else np.zeros(0, dtype=np.int64)
    steady = execs[SKIP:]
    durs = np.array([b - a for a, b in steady], dtype=np.int64)
    between = np.array([steady[i + 1][0] - steady[i][1] for i in range(len(steady) - 1)],
                       dtype=np.int64)
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_executions": len(steady),
        "steady_ms": round(span / 1e6, 3),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "execution_us_mean": round(float(durs.mean()) / 1e3, 2),
        "gap_between_executions_us_mean": round(float(between.mean()) / 1e3, 3)
        if len(between) else 0.0,
        "largest_gap_us": round(float(gap_ns.max()) / 1e3, 2) if len(gap_ns) else 0.0,
        "designed_us_per_replay": 900,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
