"""Truth figures for ext-b4-graph_sync (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch4/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
the CUDA-graph executions (count, median duration, median start-to-start interval),
the busy share from replay 10 to 499, the kernel rows, the cudaStreamSynchronize
calls.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch4"
README = {
    "graph_executions": 500,
    "graph_us": 23,
    "interval_us_median": 36.5,
    "idle_between_replays_us": 13.5,
    "replays": "10-499",
    "busy_pct": 61.5,
    "kernel_table_rows": 0,
    "tell_first": "The graph replays are the iterations; the GPU idles ~38% because the host synchronizes after every replay."
}


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    g = np.array([(a, b) for a, b, _ in r.graph_launches(0)], dtype=np.int64)
    m["graph_executions"] = len(g)
    m["graph_us_median"] = round(float(np.median(g[:, 1] - g[:, 0])) / 1e3, 2)
    m["interval_us_median"] = round(float(np.median(np.diff(g[:, 0]))) / 1e3, 2)
    lo, hi = int(g[10, 0]), int(g[499, 1])
    m["replays_10_499"] = {"window_ms": ms(hi - lo), "busy_pct": pct(r.busy_ns(lo, hi, 0), hi - lo)}
    m["kernel_rows"] = r.q("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL")[0][0] \
        if r.has("CUPTI_ACTIVITY_KIND_KERNEL") else 0
    m["stream_syncs"] = len(r.api_calls(r"^cudaStreamSynchronize$"))
    return {"program": "ext-b4-graph_sync", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
