"""Truth figures for pt-dynamic-compile: the steps that compile, and what they cost.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step N``. Steady state: steps 2..59 (from the start of
``step 2`` to the end of the last step). A compiling step: one lasting over 10 times the
median steady step and over 1 s (compilation is seconds of host work; nothing else
in the program takes that long). Evidence per compiling step: the longest stretch of
the step with no CUDA call from its thread (Dynamo/Inductor working), the module loads
in it (the new Triton kernels), and its GPU idle. Compilation share: the steady
compiling steps' time beyond the median step, as a % of the window.
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
MODULE_LOAD = r"^cu(Module|Library)Load|^cudaLibraryLoad"


def main(path: str) -> dict:
    r = Report(path)
    steps = sorted(r.ranges(r"^step \d+$"), key=lambda s: int(re.findall(r"\d+", s.name)[0]))
    out: dict = {"steps": len(steps)}
    if len(steps) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    u = union(r.gpu_intervals(dev))
    lo, hi = window_of(steps, SKIP)
    window = hi - lo
    median = float(np.median([s.ns for s in steps[SKIP:]]))
    slow = [i for i, s in enumerate(steps) if s.ns > max(10 * median, 1e9)]
    details = []
    for i in slow:
        s = steps[i]
        calls = [c for c in r.api_calls(".", s.start, s.end) if c[3] == s.gtid]
        edges = np.array([s.start] + [b for _, b, *_ in calls] + [s.end], dtype=np.int64)
        starts = np.array([s.start] + [a for a, *_ in calls] + [s.end], dtype=np.int64)
        # gap between the end of one call and the start of the next
        ends_sorted = np.sort(edges[:-1])
        starts_sorted = np.sort(starts[1:])
        gaps = starts_sorted - ends_sorted
        details.append({"step": i, "ms": round(s.ns / 1e6, 1),
                        "longest_gap_without_cuda_calls_ms": round(float(gaps.max()) / 1e6, 1)
                        if len(gaps) else None,
                        "module_loads": len(r.api_calls(MODULE_LOAD, s.start, s.end)),
                        "gpu_idle_pct": pct(s.ns - clipped_ns(u, s.start, s.end), s.ns)})
    steady_slow = [i for i in slow if i >= SKIP]
    extra = sum(steps[i].ns - median for i in steady_slow)
    out |= {
        "compile_steps": slow,
        "steady_compile_hits": len(steady_slow),
        "compile_details": details,
        "steady_window_ms": round(window / 1e6, 3),
        "step_ms_median": round(median / 1e6, 3),
        "steady_busy_pct": pct(clipped_ns(u, lo, hi), window),
        # the designed cause: the steady recompiles' extra time
        "compilation_pct": pct(extra, window),
        "normal_steps_busy_pct": pct(
            sum(clipped_ns(u, s.start, s.end) for i, s in enumerate(steps)
                if i >= SKIP and i not in slow),
            sum(s.ns for i, s in enumerate(steps) if i >= SKIP and i not in slow)),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
