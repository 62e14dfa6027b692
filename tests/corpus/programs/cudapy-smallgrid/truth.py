"""Truth figures for cudapy-smallgrid, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the NVTX ranges ``solve`` of the domain ``solver`` (one per launch) and,
on the GPU, the kernels ``solve`` (one per launch). Steady window: from the start of the
3rd ``solve`` kernel to the end of the last. Small-grid share: the SM time of the window
left idle = 100 - busy % x (SMs the grid can occupy / SMs of the device), the grid read
from the kernel rows (gridX*gridY*gridZ blocks, at most one SM each when blocks <= SMs)
and the SM count from TARGET_INFO_GPU (132 when absent).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, pct  # noqa: E402

KERNEL = "solve"


def main(path: str) -> dict:
    r = Report(path)
    ranges = r.ranges(r"^solve$", domain="solver")
    out: dict = {"iterations": len(ranges)}
    dev = r.devices()[0] if r.devices() else None
    ks = [k for k in r.kernels(dev) if k[2] == KERNEL]
    out["solve_kernels"] = len(ks)
    if len(ks) < 5:
        return out
    lo, hi = ks[2][0], ks[-1][1]
    win = hi - lo
    busy = r.busy_ns(lo, hi, dev)
    grids = r.q("select gridX * gridY * gridZ, blockX * blockY * blockZ, count(*) from "
                "CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName "
                "where s.value = ? group by 1, 2 order by 3 desc", KERNEL)
    blocks, threads = (int(grids[0][0]), int(grids[0][1])) if grids else (None, None)
    sms = 132
    if r.has("TARGET_INFO_GPU"):
        rows = r.q("select smCount from TARGET_INFO_GPU where smCount is not null")
        if rows:
            sms = int(rows[0][0])
    used = min(blocks or sms, sms) / sms
    busy_pct = pct(busy, win)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    ends = np.array([k[1] for k in ks], dtype=np.int64)
    gaps_us = (starts[3:] - ends[2:-1]) / 1e3
    out |= {
        "steady_launches": len(ks) - 2,
        "steady_window_ms": round(win / 1e6, 3),
        "kernel_ms_median": round(float(np.median(ends[2:] - starts[2:])) / 1e6, 3),
        "gap_between_kernels_us_median": round(float(np.median(gaps_us)), 2),
        "grid_blocks": blocks, "block_threads": threads, "sm_count": sms,
        "sms_used_pct": round(100.0 * used, 2),
        "gpu_busy_pct": busy_pct,
        "sm_time_idle_pct": round(100.0 - busy_pct * used, 2),
        "host_syncs": len(r.api_calls(r"Synchronize")),
        "ranges_end_before_last_kernel_starts": sum(1 for x in ranges if x.end < ks[-1][0]),
    }
    out["small_grid_share_pct"] = out["sm_time_idle_pct"]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
