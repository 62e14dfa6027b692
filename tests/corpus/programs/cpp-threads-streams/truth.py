"""Truth figures for cpp-threads-streams, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 4 worker threads, each launching 200 `worker_step`
kernels on its own stream (plus one short warm-up `worker_step` on main's stream before
the workers start). The worker streams are the streams that carry the designed number
of `worker_step` kernels; the warm-up stream is left out.
Steady state: the workers' kernels after the first 2 of each stream (skip = 2 x threads
kernels in start order), to the end of the last worker kernel.
Figures: busy % of the steady window (union of all GPU work), idle time and largest
gap, how many streams ran at once (time-weighted), the `worker K` ranges.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, pct, union  # noqa: E402

KERNEL = "worker_step"
THREADS = 4
PER_THREAD = 200
SKIP_PER_STREAM = 2


def concurrency_ns(per_stream: dict[int, np.ndarray], lo: int, hi: int) -> dict[int, int]:
    """Time in [lo, hi) during which exactly n worker streams had a kernel running."""
    edges = []
    for iv in per_stream.values():
        for a, b in union(iv).tolist():
            a, b = max(a, lo), min(b, hi)
            if b > a:
                edges += [(a, 1), (b, -1)]
    edges.sort()
    out: dict[int, int] = defaultdict(int)
    level, last = 0, lo
    for t, d in edges:
        if t > last:
            out[level] += t - last
        level += d
        last = t
    if hi > last:
        out[level] += hi - last
    return dict(out)


def main() -> int:
    r = Report(sys.argv[1])
    ks = [k for k in r.kernels() if k[2] == KERNEL]
    by_stream: dict[int, list] = defaultdict(list)
    for k in ks:
        by_stream[k[3]].append(k)
    workers = {s: v for s, v in by_stream.items() if len(v) >= PER_THREAD // 2}
    result: dict = {"kernels_total": len(ks), "worker_streams": len(workers),
                    "kernels_per_worker_stream": sorted(len(v) for v in workers.values()),
                    "worker_ranges": len(r.ranges(r"^worker \d+$"))}
    wk = sorted((k for v in workers.values() for k in v), key=lambda k: k[0])
    if len(wk) <= SKIP_PER_STREAM * max(len(workers), 1):
        print(json.dumps(result | {"error": "too few worker kernels"}))
        return 0
    lo = wk[SKIP_PER_STREAM * len(workers)][0]
    hi = max(k[1] for k in wk)
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    gap_ns = (gaps[:, 1] - gaps[:, 0]) if len(gaps) else np.zeros(0, dtype=np.int64)
    per_stream = {s: np.array([(k[0], k[1]) for k in v], dtype=np.int64).reshape(-1, 2)
                  for s, v in workers.items()}
    conc = concurrency_ns(per_stream, lo, hi)
    mean_conc = sum(n * t for n, t in conc.items()) / span if span else 0.0
    durations = np.array([k[1] - k[0] for k in wk], dtype=np.int64)
    launches = r.thread_of_launches()
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_ms": round(span / 1e6, 3),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "idle_gaps": int(len(gap_ns)),
        "largest_gap_us": round(float(gap_ns.max()) / 1e3, 2) if len(gap_ns) else 0.0,
        "kernel_us_median": round(float(np.median(durations)) / 1e3, 2),
        "kernel_us_min_max": [round(float(durations.min()) / 1e3, 2),
                              round(float(durations.max()) / 1e3, 2)],
        "mean_concurrent_streams": round(mean_conc, 3),
        "pct_time_by_concurrent_streams": {str(n): pct(t, span) for n, t in sorted(conc.items())},
        "launching_threads": len([g for g, n in launches.items() if n >= PER_THREAD // 2]),
        "designed_threads": THREADS, "designed_kernels_per_thread": PER_THREAD,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
