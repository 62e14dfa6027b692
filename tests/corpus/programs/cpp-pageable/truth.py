"""Truth figures for cpp-pageable, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: one NVTX range `step N` per step (100), each holding a
64 MiB H2D copy from pageable memory, one `consume` kernel, a 16 MiB D2H copy to
pageable memory and a cudaStreamSynchronize. Steady state: from the start of the third
`step` range to the end of the last.

The designed cause's share, pageable_pct: the time of the steady window that the
pageable copies hold, i.e. the copies' own GPU time (memcpy rows whose host side is
Pageable) plus the GPU-idle time during which the launching thread sat inside a
cudaMemcpy* call (the driver staging through its bounce buffer), as a % of the window.
pageable_idle_pct is the GPU-idle part alone. Also: busy %, kernel time per step, each
direction's copy time, bandwidth and call time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, overlap_ns, pct, window_of  # noqa: E402

SKIP = 2
KERNEL = "consume"


def direction_stats(rows: list[dict], n: int) -> dict:
    if not rows:
        return {"count": 0}
    ns = sum(c["end"] - c["start"] for c in rows)
    nbytes = sum(c["bytes"] for c in rows)
    return {"count": len(rows), "per_step": round(len(rows) / n, 2),
            "us_mean": round(ns / len(rows) / 1e3, 1),
            "mib_mean": round(nbytes / len(rows) / 2**20, 2),
            "gb_s": round(nbytes / ns, 2) if ns else 0.0,
            "kinds": sorted({f'{c["src"]}->{c["dst"]}' for c in rows})}


def main() -> int:
    r = Report(sys.argv[1])
    steps = r.ranges(r"^step \d+$")
    result: dict = {"iterations": len(steps)}
    if len(steps) <= SKIP:
        print(json.dumps(result | {"error": "too few step ranges"}))
        return 0
    lo, hi = window_of(steps, SKIP)
    span = hi - lo
    n = len(steps) - SKIP
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    copies = [c for c in r.memcpys() if lo <= c["start"] < hi]
    pageable = [c for c in copies if "Pageable" in (c["src"], c["dst"])]
    copy_iv = np.array([(c["start"], c["end"]) for c in pageable],
                       dtype=np.int64).reshape(-1, 2)
    main_tid = steps[SKIP].gtid
    calls = [c for c in r.api_calls(r"^cudaMemcpy", lo, hi) if c[3] == main_tid]
    call_iv = iv(calls)
    copy_ns = clipped_ns(copy_iv, lo, hi)
    idle_in_calls = overlap_ns(gaps, call_iv, lo, hi) if len(gaps) else 0
    ks = [k for k in r.kernels() if k[2] == KERNEL and lo <= k[0] < hi]
    h2d = [c for c in pageable if c["kind"].startswith("Host")]
    d2h = [c for c in pageable if c["kind"].endswith("Host")]
    syncs = [c for c in r.api_calls(r"^cudaStreamSynchronize$", lo, hi) if c[3] == main_tid]
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_steps": n,
        "steady_ms": round(span / 1e6, 3), "ms_per_step": round(span / n / 1e6, 3),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "pageable_pct": pct(copy_ns + idle_in_calls, span),
        "pageable_copy_time_pct": pct(copy_ns, span),
        "pageable_idle_pct": pct(idle_in_calls, span),
        "copies_in_window": len(copies), "pageable_copies_in_window": len(pageable),
        "kernel_pct": pct(clipped_ns(np.array([(k[0], k[1]) for k in ks], dtype=np.int64)
                                     .reshape(-1, 2), lo, hi), span),
        "kernel_us_mean": round(float(np.mean([k[1] - k[0] for k in ks])) / 1e3, 1)
        if ks else 0.0,
        "h2d": direction_stats(h2d, n), "d2h": direction_stats(d2h, n),
        "memcpy_call_us_mean": round(float(np.mean([b - a for a, b, *_ in calls])) / 1e3, 1)
        if calls else 0.0,
        "stream_sync_us_mean": round(float(np.mean([b - a for a, b, *_ in syncs])) / 1e3, 1)
        if syncs else 0.0,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
