"""Truth figures for cpp-event-sync, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: one NVTX push/pop range `iter` per iteration (300), each
holding one `solver_step` launch, one cudaEventRecord + cudaEventSynchronize and then
~100 us of host work. Steady state: from the start of the third `iter` range to the end
of the last.
The designed cause's share (sync_wait_pct): the GPU-idle time of the steady window that
lies between the start of a cudaEventSynchronize and the start of the next kernel (the
sync's wake-up, the host work it exposed, and the next launch), as a % of the window. Also: busy %,
the mean host work after each sync, the mean kernel time, the latency from range start
to kernel start.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, overlap_ns, pct, window_of  # noqa: E402

KERNEL = "solver_step"
SKIP = 2


def main() -> int:
    r = Report(sys.argv[1])
    iters = r.ranges(r"^iter$")
    result: dict = {"iterations": len(iters)}
    if len(iters) <= SKIP:
        print(json.dumps(result | {"error": "too few iter ranges"}))
        return 0
    lo, hi = window_of(iters, SKIP)
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    ks = [k for k in r.kernels() if k[2] == KERNEL]
    kstarts = np.array([k[0] for k in ks], dtype=np.int64)
    syncs = r.api_calls(r"^cudaEventSynchronize$", lo, hi)
    # From each sync until the next kernel starts: the GPU-idle part of that is the
    # wake-up, the exposed host work and the next launch.
    exposed = []
    for a, b, _, _ in syncs:
        i = int(np.searchsorted(kstarts, b, side="left"))
        nxt = int(kstarts[i]) if i < len(kstarts) else hi
        exposed.append((a, nxt))
    exposed_iv = np.array(exposed, dtype=np.int64).reshape(-1, 2)
    sync_idle = overlap_ns(gaps, exposed_iv, lo, hi) if len(gaps) else 0
    steady = iters[SKIP:]
    host_after = []
    for rg in steady:
        inside = [s for s in syncs if rg.start <= s[0] < rg.end]
        if inside:
            host_after.append(rg.end - inside[-1][1])
    kin = [k for k in ks if lo <= k[0] < hi]
    launch_lat = []
    for rg in steady:
        j = int(np.searchsorted(kstarts, rg.start, side="left"))
        if j < len(kstarts) and kstarts[j] < rg.end:
            launch_lat.append(int(kstarts[j]) - rg.start)
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_iterations": len(steady),
        "steady_ms": round(span / 1e6, 3),
        "us_per_iteration": round(span / len(steady) / 1e3, 2),
        "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
        "sync_wait_pct": pct(sync_idle, span),
        "event_syncs_in_window": len(syncs),
        "sync_call_us_mean": round(float(np.mean([b - a for a, b, _, _ in syncs])) / 1e3, 2)
        if syncs else 0.0,
        "host_after_sync_us_mean": round(float(np.mean(host_after)) / 1e3, 2)
        if host_after else 0.0,
        "range_start_to_kernel_us_mean": round(float(np.mean(launch_lat)) / 1e3, 2)
        if launch_lat else 0.0,
        "kernels_in_window": len(kin),
        "kernel_us_mean": round(float(np.mean([k[1] - k[0] for k in kin])) / 1e3, 2)
        if kin else 0.0,
        "kernels_total": len(ks),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
