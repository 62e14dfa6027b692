"""Truth figures for pt-adamw-loop: launch-bound steps dominated by the optimizer.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step N``; nested ``forward``, ``backward``, ``optimizer``.
Steady state: step 2 to the last step (from the start of ``step 2`` to the end of
the last step).
Kernels of a phase: those whose launch call (any thread: backward launches come from
the autograd engine's thread) starts inside the phase's range. Launch-bound share: the
GPU idle time of the window (there is no sync, copy or data loading in the loop); the
optimizer's part: the GPU idle time inside the ``optimizer`` ranges.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, pct, union, window_of  # noqa: E402

SKIP = 2


def main(path: str) -> dict:
    r = Report(path)
    steps = sorted(r.ranges(r"^step \d+$"), key=lambda s: int(re.findall(r"\d+", s.name)[0]))
    out: dict = {"steps": len(steps)}
    if len(steps) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    lo, hi = window_of(steps, SKIP)
    window = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    launches = np.array(sorted(a for a, *_ in r.api_calls(r"LaunchKernel", lo, hi)),
                        dtype=np.int64)

    def count_in(rs) -> int:
        return int(sum(np.searchsorted(launches, x.end) - np.searchsorted(launches, x.start)
                       for x in rs))

    def idle_in(rs) -> int:
        return sum(x.ns - clipped_ns(u, x.start, x.end) for x in rs)

    phases = {}
    for name in ("forward", "backward", "optimizer"):
        rs = [x for x in r.ranges(rf"^{name}$") if lo <= x.start < hi]
        phases[name] = {"ranges": len(rs), "ms_median": round(float(np.median([x.ns for x in rs]))
                                                              / 1e6, 3) if rs else None,
                        "time_pct": pct(sum(x.ns for x in rs), window),
                        "idle_pct": pct(idle_in(rs), window),
                        "launches_per_step": round(count_in(rs) / len(rs), 1) if rs else None}
    n = len(steps) - SKIP
    out |= {
        "steady_steps": n,
        "steady_window_ms": round(window / 1e6, 3),
        "step_ms_median": round(float(np.median([s.ns for s in steps[SKIP:]])) / 1e6, 3),
        "steady_busy_pct": pct(busy, window),
        # the designed cause: the GPU idle between launches, all of the window's idle
        "launch_bound_idle_pct": pct(window - busy, window),
        "kernel_launches_per_step": round(len(launches) / n, 1),
        "phases": phases,
        "sync_calls_in_window": len(r.api_calls(r"Synchronize|Memcpy", lo, hi)),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
