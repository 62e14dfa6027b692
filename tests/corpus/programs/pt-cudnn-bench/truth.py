"""Truth figures for pt-cudnn-bench: 40 `train_step` ranges of the `trainer` domain.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges named ``train_step`` in the domain ``trainer`` (the nvtx
package's annotate; all share one name). Steady state: ranges 3..40 (the first two
skipped), from the start of the third to the end of the last; because the host runs
ahead of the GPU (no sync in the loop), the window is extended to the end of the GPU
work launched inside it. Busy: union of GPU work in that window. Also: the first
step's length against the median (cuDNN's benchmarking) and the steady cudaMalloc calls;
for the first step (warm-up, outside the steady window): its GPU busy %, its sync calls
(cuDNN times candidate algorithms) and its library loads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, pct, union, window_of  # noqa: E402

SKIP = 2


def main(path: str) -> dict:
    r = Report(path)
    steps = r.ranges(r"^train_step$", domain="trainer")
    out: dict = {"steps": len(steps), "domains": sorted(set(r.domains().values())),
                 "train_step_ranges_any_domain": len(r.ranges(r"^train_step$"))}
    if len(steps) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    u = union(r.gpu_intervals(dev))
    lo, hi_host = window_of(steps, SKIP)
    # GPU work launched by the last step ends after its range: follow it
    corr = {c for (c,) in r.q("select correlationId from CUPTI_ACTIVITY_KIND_RUNTIME "
                              "where start >= ? and start < ?", lo, hi_host)} \
        if r.has("CUPTI_ACTIVITY_KIND_RUNTIME") else set()
    ends = [b for b, c in r.q("select end, correlationId from CUPTI_ACTIVITY_KIND_KERNEL")
            if c in corr] if r.has("CUPTI_ACTIVITY_KIND_KERNEL") else []
    hi = max([hi_host] + ends)
    window = hi - lo
    median = float(np.median([s.ns for s in steps[SKIP:]]))
    out |= {
        "steady_steps": len(steps) - SKIP,
        "steady_window_ms": round(window / 1e6, 3),
        "gpu_tail_after_last_range_ms": round((hi - hi_host) / 1e6, 3),
        "steady_busy_pct": pct(clipped_ns(u, lo, hi), window),
        "step_ms_median_host": round(median / 1e6, 3),
        "gpu_ms_per_step": round(clipped_ns(u, lo, hi) / (len(steps) - SKIP) / 1e6, 3),
        "first_step_ms": round(steps[0].ns / 1e6, 3),
        "first_step_over_median": round(steps[0].ns / median, 1) if median else None,
        "steady_malloc_calls": len(r.api_calls(r"^cu(da)?Malloc|^cuMemCreate", lo, hi)),
        "steady_sync_calls": len(r.api_calls(r"Synchronize", lo, hi_host)),
        "steady_library_loads": len(r.api_calls(r"^cu(Library|Module)Load", lo, hi)),
        "first_step_gpu_busy_pct": pct(clipped_ns(u, steps[0].start, steps[0].end),
                                       steps[0].ns),
        "first_step_sync_calls": len(r.api_calls(r"Synchronize", steps[0].start,
                                                 steps[0].end)),
        "first_step_library_loads": len(r.api_calls(r"^cu(Library|Module)Load",
                                                    steps[0].start, steps[0].end)),
        "first_step_library_load_ms": round(sum(b - a for a, b, *_ in r.api_calls(
            r"^cu(Library|Module)Load", steps[0].start, steps[0].end)) / 1e6, 3),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
