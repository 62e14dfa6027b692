"""Truth figures for cpp-pinned, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 100 steps, each one `consume` kernel on the compute
stream, one 64 MiB H2D and one 16 MiB D2H (pinned) on the copy stream; one NVTX range
`step N` (domain `pipeline`) per step around the host's enqueueing (the host runs
ahead, so these ranges are short and early: the GPU-side iterations are the kernels).
Steady state: from the start of the third `consume` kernel to the end of the last GPU
operation (the last download).
Figures: busy % (kernels and copies), kernel-only busy %, the share of copy time that a
kernel overlapped, gaps between consecutive kernels, copy bandwidths, memory kinds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, overlap_ns, pct  # noqa: E402

SKIP = 2
KERNEL = "consume"


def main() -> int:
    r = Report(sys.argv[1])
    steps = r.ranges(r"^step \d+$")
    ks = [k for k in r.kernels() if k[2] == KERNEL]
    result: dict = {"iterations": len(steps),
                    "step_range_domains": sorted({s.domain for s in steps}),
                    "kernels": len(ks)}
    if len(ks) <= SKIP:
        print(json.dumps(result | {"error": "too few consume kernels"}))
        return 0
    copies = r.memcpys()
    lo = ks[SKIP][0]
    hi = max([k[1] for k in ks] + [c["end"] for c in copies])
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    kiv = np.array([(k[0], k[1]) for k in ks], dtype=np.int64).reshape(-1, 2)
    civ = np.array([(c["start"], c["end"]) for c in copies], dtype=np.int64).reshape(-1, 2)
    kbusy = clipped_ns(kiv, lo, hi)
    copy_ns = clipped_ns(civ, lo, hi)
    hidden = overlap_ns(civ, kiv, lo, hi)
    steady = ks[SKIP:]
    kgaps = np.array([steady[i + 1][0] - steady[i][1] for i in range(len(steady) - 1)],
                     dtype=np.int64)
    inwin = [c for c in copies if lo <= c["start"] < hi]
    h2d = [c for c in inwin if c["kind"].startswith("Host")]
    d2h = [c for c in inwin if c["kind"].endswith("Host")]

    def gbs(rows: list[dict]) -> float:
        ns = sum(c["end"] - c["start"] for c in rows)
        return round(sum(c["bytes"] for c in rows) / ns, 2) if ns else 0.0

    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_kernels": len(steady),
        "steady_ms": round(span / 1e6, 3),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "kernel_busy_pct": pct(kbusy, span),
        "copy_time_hidden_under_kernels_pct": pct(hidden, copy_ns),
        "kernel_us_mean": round(float(np.mean([k[1] - k[0] for k in steady])) / 1e3, 1),
        "kernel_gap_us_mean": round(float(kgaps.mean()) / 1e3, 2) if len(kgaps) else 0.0,
        "kernel_gap_us_max": round(float(kgaps.max()) / 1e3, 2) if len(kgaps) else 0.0,
        "h2d_per_kernel": round(len(h2d) / len(steady), 2),
        "d2h_per_kernel": round(len(d2h) / len(steady), 2),
        "h2d_gb_s": gbs(h2d), "d2h_gb_s": gbs(d2h),
        "h2d_us_mean": round(float(np.mean([c["end"] - c["start"] for c in h2d])) / 1e3, 1)
        if h2d else 0.0,
        "host_memory_kinds": sorted({c["src"] for c in h2d} | {c["dst"] for c in d2h}),
        "streams": {"kernels": sorted({k[3] for k in ks}),
                    "copies": sorted({c["stream"] for c in copies})},
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
