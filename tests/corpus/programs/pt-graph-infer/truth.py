"""Truth figures for pt-graph-infer: the graph executions are the iterations.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the rows of CUPTI_ACTIVITY_KIND_GRAPH_TRACE (one per cudaGraphLaunch of the
one captured graph) on the first device. Steady state: executions 3..N (the first two
skipped), from the start of the third to the end of the last. Busy: union of all GPU
work in that window. The launch gaps are the idle stretches between executions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, pct  # noqa: E402

SKIP = 2


def main(path: str) -> dict:
    r = Report(path)
    devices = r.devices()
    dev = devices[0] if devices else None
    graphs = r.graph_launches(dev) if dev is not None else []
    infer = r.ranges(r"^infer$")
    out: dict = {"device": dev, "graph_executions": len(graphs),
                 "graph_ids": sorted({g for *_, g in graphs}),
                 "infer_ranges": len(infer)}
    if len(graphs) <= SKIP:
        return out
    lo, hi = graphs[SKIP][0], graphs[-1][1]
    busy = r.busy_ns(lo, hi, dev)
    starts = np.array([a for a, _, _ in graphs], dtype=np.int64)
    ends = np.array([b for _, b, _ in graphs], dtype=np.int64)
    between = np.maximum(starts[SKIP + 1:] - ends[SKIP:-1], 0)
    durations = (ends - starts)[SKIP:]
    out |= {
        "steady_executions": len(graphs) - SKIP,
        "steady_window_ms": round((hi - lo) / 1e6, 3),
        "steady_busy_pct": pct(busy, hi - lo),
        "steady_idle_pct": pct((hi - lo) - busy, hi - lo),
        "replay_ms_median": round(float(np.median(durations)) / 1e6, 4),
        "gap_between_replays_us_median": round(float(np.median(between)) / 1e3, 2)
        if len(between) else 0.0,
        "gap_between_replays_us_max": round(float(between.max()) / 1e3, 2)
        if len(between) else 0.0,
    }
    if infer:
        inside = sum(1 for a, b, _ in graphs if a >= infer[0].start)
        out["executions_after_infer_start"] = inside
        out["infer_range_ms"] = round(infer[0].ns / 1e6, 3)
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
