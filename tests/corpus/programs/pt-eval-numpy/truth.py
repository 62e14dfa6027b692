"""Truth figures for pt-eval-numpy (and its fixed twin pt-eval-overlap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``batch N``. Steady state: batches 2.. (the first two
skipped), from the start of ``batch 2`` to the end of the last batch range.
Results-work share: the GPU idle stretches of the window that begin where a
device-to-host copy ends (the logits just came back and the host is busy with them),
summed, as a % of the window. Pageable-copy share: the time of the device-to-host copies
into pageable memory in the window. Also: the host time after the last CUDA call of
each batch (the numpy post-processing), median.
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
TOUCH_NS = 2_000          # a gap "begins where a copy ends" within 2 us


def main(path: str) -> dict:
    r = Report(path)
    batches = sorted(r.ranges(r"^batch \d+$"), key=lambda s: int(re.findall(r"\d+", s.name)[0]))
    out: dict = {"batches": len(batches)}
    if len(batches) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    lo, hi = window_of(batches, SKIP)
    window = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    d2h = [c for c in r.memcpys(dev)
           if re.search(r"(?i)device.?to.?host|dtoh", str(c["kind"])) or c["kind"] == "2"]
    d2h_in = [c for c in d2h if lo <= c["start"] < hi]
    d2h_ends = np.array(sorted(c["end"] for c in d2h), dtype=np.int64)
    gaps = r.idle_gaps(lo, hi, dev)
    results_gaps = []
    for a, b in gaps.tolist():
        if a <= lo:
            continue
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
        if k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
            results_gaps.append((a, b))
    results_ns = sum(b - a for a, b in results_gaps)
    pageable = [c for c in d2h_in if re.search(r"(?i)pageable", str(c["dst"])) or c["dst"] == "0"]
    pageable_ns = clipped_ns(np.array([(c["start"], c["end"]) for c in pageable],
                                      dtype=np.int64).reshape(-1, 2), lo, hi)
    # host time after the batch's last CUDA runtime call (the numpy work in pt-eval-numpy)
    host_after = []
    calls = r.api_calls(".", lo, hi)
    ends = np.array(sorted(b for _, b, *_ in calls), dtype=np.int64)
    for s in batches[SKIP:]:
        k = int(np.searchsorted(ends, s.end, side="right")) - 1
        if k >= 0 and ends[k] >= s.start:
            host_after.append(s.end - int(ends[k]))
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    out |= {
        "steady_batches": len(batches) - SKIP,
        "steady_window_ms": ms(window),
        "batch_ms_median": ms(float(np.median([s.ns for s in batches[SKIP:]]))),
        "steady_busy_pct": pct(busy, window),
        "steady_idle_pct": pct(window - busy, window),
        # the designed cause: GPU idle that starts when the logits arrive on the host
        "results_work_idle_pct": pct(results_ns, window),
        "results_gaps": len(results_gaps),
        "d2h_copies": len(d2h_in),
        "d2h_pageable_copies": len(pageable),
        "d2h_pinned_copies": sum(1 for c in d2h_in if re.search(r"(?i)pinned", str(c["dst"]))),
        "pageable_copy_pct": pct(pageable_ns, window),
        "d2h_copy_pct": pct(clipped_ns(np.array([(c["start"], c["end"]) for c in d2h_in],
                                                dtype=np.int64).reshape(-1, 2), lo, hi), window),
        "host_after_last_cuda_call_ms_median":
            ms(float(np.median(host_after))) if host_after else None,
        "host_after_last_cuda_call_pct": pct(sum(host_after), window),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
