"""Truth figures for ext-b4-share_gpu (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Prints the figures batch4/README.md states for this report (``readme``: quoted, as
measured there with plain SQL on the untrimmed export) beside those simple to recompute
here on the committed (trimmed) capture (``measured``; times in ms, shares in %):
the GEMM kernels (over 5 ms) per process: count and duration (min, median, max); the
sum of each process's kernel-time union over the union of all (2: fully interleaved);
the GPU's busy share from the first GEMM to the last; the step ranges of both
processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct, union  # noqa: E402,F401

S = r"^step \d+$"
SOURCE = "README.md of batch4"
README = {
    "processes": 2,
    "gpu_busy_pct": 100,
    "gemm_ms_alone": "21-22",
    "gemm_ms_shared": "47-49",
    "kernel_interval_overlap": 1.95,
    "tell_first": "GPU 0 is shared by two processes and time-sliced: each gets about half, so each GEMM takes twice as long."
}

def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def main(path: str) -> dict:
    r = Report(path)
    m: dict = {}
    k = r.q("select start, end, globalPid from CUPTI_ACTIVITY_KIND_KERNEL where deviceId = 0 "
             "and end - start > 5000000")
    pids = sorted({pid_of(g) for *_, g in k})
    m["processes_with_gemms"] = len(pids)
    per = []
    for p in pids:
        d = [b - a for a, b, g in k if pid_of(g) == p]
        per.append({"gemms": len(d), "ms_min": ms(min(d)), "ms_median": ms(float(np.median(d))),
                    "ms_max": ms(max(d))})
    m["per_process"] = per
    a = np.array([(s, e) for s, e, _ in k], dtype=np.int64)
    u = sum(int((x[:, 1] - x[:, 0]).sum()) for x in
            [union(np.array([(s, e) for s, e, g in k if pid_of(g) == p], dtype=np.int64)) for p in pids])
    ua = union(a)
    m["process_intervals_over_union"] = round(u / float((ua[:, 1] - ua[:, 0]).sum()), 2)
    lo, hi = int(ua[0, 0]), int(ua[-1, 1])
    m["gemm_span"] = {"window_ms": ms(hi - lo), "busy_pct": pct(r.busy_ns(lo, hi, 0), hi - lo)}
    m["step_ranges"] = len(r.ranges(S))
    return {"program": "ext-b4-share_gpu", "source": SOURCE, "readme": README, "measured": m}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
