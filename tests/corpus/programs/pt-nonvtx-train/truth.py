"""Truth figures for pt-nonvtx-train: steps counted by their one nll_loss_forward kernel.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the program has no NVTX; each of its 200 steps computes the cross-entropy
loss once, i.e. runs exactly one ``nll_loss_forward`` kernel, and nothing else in the
program does. Steady state: from the third of those kernels to the end of the last GPU
work (the last step's backward and optimizer). Launch-bound share: the GPU idle time of
that window (no syncs, copies or data loading in the loop).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, pct, union  # noqa: E402

SKIP = 2


def main(path: str) -> dict:
    r = Report(path)
    devs = r.devices()
    dev = devs[0] if devs else None
    ks = r.kernels(dev)
    if r.has("CUPTI_ACTIVITY_KIND_KERNEL"):      # the demangled names, for the marker
        names = {c: r.strings.get(n, "") for c, n in r.q(
            "select correlationId, demangledName from CUPTI_ACTIVITY_KIND_KERNEL")}
    else:
        names = {}
    marks = [k for k in ks if re.search(r"nll_loss_forward", k[2] + " " + names.get(k[4], ""))]
    out: dict = {"steps": len(marks), "kernels": len(ks),
                 "nvtx_ranges": len(r.ranges("."))}
    if len(marks) <= SKIP:
        return out
    lo = marks[SKIP][0]
    hi = max(b for _, b, *_ in ks)
    window = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    in_window = [k for k in ks if k[0] >= lo]
    period = np.diff([m[0] for m in marks[SKIP:]])
    out |= {
        "steady_steps": len(marks) - SKIP,
        "steady_window_ms": round(window / 1e6, 3),
        "step_ms_median": round(float(np.median(period)) / 1e6, 4) if len(period) else None,
        "kernels_per_step": round(len(in_window) / (len(marks) - SKIP), 1),
        "kernels_before_first_step": sum(1 for k in ks if k[0] < marks[0][0]),
        "steady_busy_pct": pct(busy, window),
        # the designed cause: all of the window's GPU idle is waiting for launches
        "launch_bound_idle_pct": pct(window - busy, window),
        "sync_calls_in_window": len(r.api_calls(r"Synchronize|Memcpy", lo, hi)),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
