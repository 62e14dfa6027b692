"""Readings shared by twin single-GPU PyTorch truth scripts (plain sqlite3/numpy, no
gpugap): pt-eval-numpy and pt-eval-overlap (results work after each batch), and
pt-dynamic-compile and pt-inductor-first (the steps that compile). Each script's
docstring says what it checks.
"""

from __future__ import annotations

import re

import numpy as np
from truthlib import Report, clipped_ns, ms, pct, union, window_of

SKIP = 2
TOUCH_NS = 2_000          # a gap "begins where a copy ends" within 2 us
MODULE_LOAD = r"^cu(Module|Library)Load|^cudaLibraryLoad"


def eval_batches_figures(path: str) -> dict:
    """pt-eval-numpy and pt-eval-overlap (see their truth.py): the steady batches' busy
    and idle, the idle that begins where a device-to-host copy ends (results work), the
    pageable copies, and the host time after each batch's last CUDA call."""
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


def compile_steps_figures(path: str) -> dict:
    """pt-dynamic-compile and pt-inductor-first (see their truth.py): the steps that
    compile (over 10 times the median steady step and over 1 s), the evidence in each,
    and the steady compiling steps' time beyond the median step."""
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
