"""Truth figures for cupy-sync, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the kernel ``churn_sum`` (one per iteration, the program launches nothing
else of that name). Steady window: from the start of the 3rd churn_sum to the start of
the last (iterations 2 .. N-2, each from its kernel's start to the next kernel's start).
Sync-wait share: the GPU idle time of the window from the end of each device-to-host
copy (the host was synchronised by that copy) to the start of the next churn_sum (the
host returns, checks, then enqueues the memset and the kernel: the GPU stays drained
until they arrive), as % of the window. Also reported: the idle between a kernel's end
and the start of the synchronous copy already queued behind it (the driver's pageable
D2H path, ~9 us), and the whole idle share, all of which follows from the per-iteration
synchronous copy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, pct  # noqa: E402

KERNEL = "churn_sum"


def is_d2h(kind: str) -> bool:
    k = kind.lower().replace(" ", "").replace("-", "")
    return k in ("2", "dtoh") or "devicetohost" in k or k.startswith("dtoh")


def main(path: str) -> dict:
    r = Report(path)
    ks = [k for k in r.kernels() if k[2] == KERNEL]
    out: dict = {"iterations": len(ks), "kernel": KERNEL}
    if len(ks) < 5:
        return out
    lo, hi = ks[2][0], ks[-1][0]
    win = hi - lo
    dev = r.devices()[0] if r.devices() else None
    busy = r.busy_ns(lo, hi, dev)
    gaps = r.idle_gaps(lo, hi, dev)
    d2h_ends = np.array(sorted(m["end"] for m in r.memcpys() if is_d2h(m["kind"])),
                        dtype=np.int64)
    starts_all = np.array([k[0] for k in ks], dtype=np.int64)
    ends_all = np.array([k[1] for k in ks], dtype=np.int64)
    gpu_iv = r.gpu_intervals(dev)
    after_sync = 0
    n_after = 0
    before_copy = 0
    for e in d2h_ends.tolist():
        if e < lo or e >= hi:
            continue
        j = np.searchsorted(starts_all, e, side="left")
        if j >= len(starts_all):
            continue
        nxt = int(starts_all[j])
        if nxt > hi:
            continue
        after_sync += (nxt - e) - clipped_ns(gpu_iv, e, nxt)   # drained: copy end -> kernel
        n_after += 1
    d2h_starts = np.array(sorted(m["start"] for m in r.memcpys() if is_d2h(m["kind"])),
                          dtype=np.int64)
    for ke in ends_all.tolist():
        if ke < lo or ke >= hi:
            continue
        j = np.searchsorted(d2h_starts, ke, side="left")
        if j < len(d2h_starts) and d2h_starts[j] <= hi:
            cs = int(d2h_starts[j])
            before_copy += (cs - ke) - clipped_ns(gpu_iv, ke, cs)
    sync_calls = r.api_calls(r"(Memcpy|Synchronize)", lo, hi)
    sync_iv = iv(sync_calls)
    kdur = np.array([b - a for a, b, *_ in ks[2:-1]], dtype=np.int64)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    out |= {
        "steady_iterations": len(ks) - 3,
        "steady_window_ms": round(win / 1e6, 3),
        "us_per_iteration": round(float(np.median(np.diff(starts[2:]))) / 1e3, 2),
        "kernel_us_median": round(float(np.median(kdur)) / 1e3, 2),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "idle_after_d2h_sync_pct": pct(after_sync, win),
        "idle_gaps_after_sync": n_after,
        "idle_kernel_end_to_copy_pct": pct(before_copy, win),
        "host_in_sync_calls_pct": pct(clipped_ns(sync_iv, lo, hi), win),
        "d2h_copies": int(len(d2h_ends)),
        "first_iteration_ms": round((ks[1][0] - ks[0][0]) / 1e6, 3),
    }
    out["sync_wait_share_pct"] = out["idle_after_d2h_sync_pct"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
