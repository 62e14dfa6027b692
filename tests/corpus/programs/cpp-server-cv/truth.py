"""Truth figures for cpp-server-cv, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: one NVTX range `request` per served request (200) on the
serving (main, GPU-launching) thread, around its 4 `serve_stage` launches and the
cudaStreamSynchronize; between ranges that thread waits on a condition variable
(pthread_cond_wait) for the producer thread, which sleeps 5 ms between requests.
Steady state: from the start of the third `request` range to the end of the last.

The designed cause's share, cond_wait_pct: the GPU-idle time of the steady window during
which the serving thread was inside pthread_cond_wait (or a timed/clock variant), as a
% of the window. Also: busy %, the request period, GPU time per request, the time the
serving thread spent in the waits, and the producer's sleeps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, iv, overlap_ns, pct, window_of  # noqa: E402

SKIP = 2
KERNEL = "serve_stage"
WAITS = r"^pthread_cond_(wait|timedwait|clockwait)"
SLEEPS = r"^(nanosleep|clock_nanosleep|usleep)"


def main() -> int:
    r = Report(sys.argv[1])
    reqs = r.ranges(r"^request$")
    result: dict = {"iterations": len(reqs)}
    if len(reqs) <= SKIP:
        print(json.dumps(result | {"error": "too few request ranges"}))
        return 0
    lo, hi = window_of(reqs, SKIP)
    span = hi - lo
    steady = reqs[SKIP:]
    n = len(steady)
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    main_tid = steady[0].gtid
    waits = [c for c in r.osrt_calls(WAITS, lo - 10**9, hi) if c[3] == main_tid
             and c[1] > lo]
    wait_iv = iv(waits)
    wait_idle = overlap_ns(gaps, wait_iv, lo, hi) if len(gaps) else 0
    sleeps = [c for c in r.osrt_calls(SLEEPS, lo, hi) if c[3] != main_tid]
    starts = np.array([rg.start for rg in steady], dtype=np.int64)
    ks = [k for k in r.kernels() if k[2] == KERNEL and lo <= k[0] < hi]
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_requests": n,
        "steady_ms": round(span / 1e6, 3),
        "request_period_us_mean": round(float(np.diff(starts).mean()) / 1e3, 1)
        if n > 1 else 0.0,
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "cond_wait_pct": pct(wait_idle, span),
        "cond_waits_in_window": len(waits),
        "cond_wait_us_mean": round(float(np.mean([b - a for a, b, *_ in waits])) / 1e3, 1)
        if waits else 0.0,
        "wait_names": sorted({c[2] for c in waits}),
        "request_range_us_mean": round(float(np.mean([rg.ns for rg in steady])) / 1e3, 1),
        "kernels_per_request": round(len(ks) / n, 2),
        "gpu_us_per_request": round(sum(k[1] - k[0] for k in ks) / n / 1e3, 1),
        "producer_sleeps_in_window": len(sleeps),
        "producer_sleep_us_mean": round(float(np.mean([b - a for a, b, *_ in sleeps])) / 1e3, 1)
        if sleeps else 0.0,
        "osrt_table": r.has("OSRT_API"),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
