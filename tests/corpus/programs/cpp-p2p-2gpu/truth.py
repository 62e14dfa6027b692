"""Truth figures for cpp-p2p-2gpu, from the export alone (sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 100 iterations, each one `stage1` kernel and one peer
copy on GPU 0's stream, then one `stage2` kernel on GPU 1's stream, ordered by events
both ways; one NVTX range `iter N` per iteration around the host's enqueueing (the
host runs ahead: the GPU-side iterations are the stage kernels). The two devices are
told apart by the kernels they ran (`stage1`: the first stage's device, `stage2`: the
second's), not by assuming ids. Steady state: from the start of the third `stage1`
kernel to the end of the last `stage2` kernel.

The designed cause's share, per device, cross_wait_pct: the time in the steady window
during which that device was idle while the other device was busy (kernels or copies),
as a % of the window. queued_idle_pct: the part of the device's idle time after which
its next kernel had already been launched by the host before the idle stretch began
(work queued, held by the other GPU). Also: busy % per device, copy kind/size/bandwidth.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, overlap_ns, pct  # noqa: E402

SKIP = 2


def kernels_by_device(r: Report, name: str) -> list[tuple[int, int, int, int]]:
    """(start, end, deviceId, correlationId) of the kernels called *name*, by start."""
    if not r.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        return []
    ids = [i for i, v in r.strings.items() if v == name]
    if not ids:
        return []
    marks = ",".join(str(int(i)) for i in ids)
    return r.q("select start, end, deviceId, correlationId from CUPTI_ACTIVITY_KIND_KERNEL "
               f"where shortName in ({marks}) order by start")


def main() -> int:
    r = Report(sys.argv[1])
    iters = r.ranges(r"^iter \d+$")
    s1 = kernels_by_device(r, "stage1")
    s2 = kernels_by_device(r, "stage2")
    result: dict = {"iterations": len(iters), "stage1_kernels": len(s1),
                    "stage2_kernels": len(s2), "devices": r.devices()}
    if len(s1) <= SKIP or len(s2) <= SKIP:
        print(json.dumps(result | {"error": "too few stage kernels"}))
        return 0
    d1 = max({k[2] for k in s1}, key=lambda d: sum(k[2] == d for k in s1))
    d2 = max({k[2] for k in s2}, key=lambda d: sum(k[2] == d for k in s2))
    lo, hi = s1[SKIP][0], max(k[1] for k in s2)
    span = hi - lo
    launch_start = dict(r.q("select correlationId, start from CUPTI_ACTIVITY_KIND_RUNTIME")
                        ) if r.has("CUPTI_ACTIVITY_KIND_RUNTIME") else {}
    per_device = {}
    for dev, other, ks in ((d1, d2, s1), (d2, d1, s2)):
        mine, theirs = r.gpu_intervals(dev), r.gpu_intervals(other)
        busy = r.busy_ns(lo, hi, dev)
        gaps = r.idle_gaps(lo, hi, dev)
        cross = overlap_ns(gaps, theirs, lo, hi) if len(gaps) else 0
        kstarts = np.array([k[0] for k in ks], dtype=np.int64)
        queued = 0
        for a, b in gaps.tolist():
            j = int(np.searchsorted(kstarts, b, side="left"))
            if j < len(ks):
                called = launch_start.get(ks[j][3])
                if called is not None and called <= a:
                    queued += b - a
        per_device[str(dev)] = {
            "stage": "stage1" if ks is s1 else "stage2",
            "busy_pct": pct(busy, span), "idle_pct": pct(span - busy, span),
            "cross_wait_pct": pct(cross, span),
            "queued_idle_pct": pct(queued, span),
            "kernel_us_mean": round(float(np.mean([k[1] - k[0] for k in ks
                                                   if lo <= k[0] < hi])) / 1e3, 1),
            "ops": int(len(mine)),
        }
    copies = [c for c in r.memcpys() if lo <= c["start"] < hi]
    cns = sum(c["end"] - c["start"] for c in copies)
    result |= {
        "steady_window_ns": [int(lo), int(hi)], "steady_ms": round(span / 1e6, 3),
        "steady_iterations": len(s1) - SKIP,
        "ms_per_iteration": round(span / max(len(s1) - SKIP, 1) / 1e6, 3),
        "stage1_device": int(d1), "stage2_device": int(d2),
        "per_device": per_device,
        "copies_in_window": len(copies),
        "copy_kinds": sorted({c["kind"] for c in copies}),
        "copy_devices": sorted({c["device"] for c in copies}),
        "copy_us_mean": round(cns / len(copies) / 1e3, 1) if copies else 0.0,
        "copy_gb_s": round(sum(c["bytes"] for c in copies) / cns, 1) if cns else 0.0,
        "host_syncs_in_loop": len([c for c in r.api_calls(r"Synchronize$")
                                   if iters and iters[0].start <= c[0] < iters[-1].end]),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
