"""Truth figures for pt-item-sync (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``train_step`` (default domain), one per step; their count
is ``iterations``. Every step ends with ``loss.item()`` (a 4-byte device-to-host copy,
then ``cudaStreamSynchronize``), so the ranges are synchronous: the GPU work a step
launches runs inside its range.

Steady window: from the start of the 3rd ``train_step`` range (index 2) to the end of
the last one (``steady_steps`` = N - 2). Figures of the window, on the device of the
first GPU work:
  * ``gpu_busy_pct``: the union of kernels, copies and memsets in the window, % of it;
    ``gpu_idle_pct`` = the rest.
  * ``sync_wait_pct`` (the designed cause): the GPU idle stretches (over the whole
    capture) that begin where a device-to-host copy ends (within 2 us: the loss just
    reached the host, which was blocked in the sync), each up to the next GPU work,
    clipped to the window and summed, % of the window (the last step's stretch runs to
    the window's end). ``sync_wait_gaps``: how many;
    ``sync_wait_gap_us_median``: their median length (unclipped).
  * ``idle_after_sync_return_pct``: the narrower reading, from each
    ``cudaStreamSynchronize`` return (calls ending in the window) to the next GPU work's
    start (GPU idle in between, clipped to the window), % of the window;
    ``sync_return_lag_us_median``: from the copy's end to the sync call's return.
  * ``other_idle_pct``: idle of the window not in a sync-wait stretch (launch gaps
    between kernels, and the gap where autograd's engine thread starts the backward);
    ``other_idle_gaps_over_20us``: how many such stretches last over 20 us.
Per steady step (medians): ``step_ms_median`` (the range's duration),
``step_period_ms_median`` (one range's start to the next one's), ``gpu_work_ms_median``
(the union of the GPU work in the step's range: its busy time),
``gpu_idle_ms_median`` (the range minus that). Launches per step: the CUDA calls of the
process (any thread: autograd's engine thread launches the backward) that start inside
the step's range, matched by correlationId (within the process) to the GPU work they
enqueued: ``kernels_per_step``, ``memsets_per_step``, ``memcpys_per_step`` (medians),
``launches_per_step`` (all three). Also: the host's time in ``cudaStreamSynchronize``
in the window, the device-to-host copies (count, memory kind) in the window, and the
first step's duration (start-up: cuBLAS initialisation).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, pct, union, window_of  # noqa: E402

SKIP = 2
TOUCH_NS = 2_000            # a gap "begins where a copy ends" within 2 us
OTHER_GAP_NS = 20_000


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def main(path: str) -> dict:
    r = Report(path)
    steps = r.ranges(r"^train_step$")
    out: dict = {"iterations": len(steps), "range": "train_step"}
    if len(steps) <= SKIP + 1:
        return out
    devices = r.devices()
    dev = devices[0] if devices else None
    pid = pid_of(steps[0].gtid)
    lo, hi = window_of(steps, SKIP)
    win = hi - lo
    steady = steps[SKIP:]

    gpu = r.gpu_intervals(dev)
    u = union(gpu)
    busy = clipped_ns(u, lo, hi)
    gpu_starts = u[:, 0]

    # idle stretches of the whole capture: [end of busy k, start of busy k+1)
    gap_a, gap_b = u[:-1, 1], u[1:, 0]
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host"]
    d2h_ends = np.array(sorted(m["end"] for m in d2h), dtype=np.int64)
    sync_gaps = []
    for a, b in zip(gap_a.tolist(), gap_b.tolist()):
        if b <= lo or a >= hi:
            continue
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
        if k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
            sync_gaps.append((a, b))
    sg = np.array(sync_gaps, dtype=np.int64).reshape(-1, 2)
    sync_ns = clipped_ns(sg, lo, hi)
    # the window's end (the last range's end) falls in the last step's sync-wait gap;
    # when no GPU work follows it in the capture, it is not among the gaps above: add it
    # (from its copy's end to hi)
    tail = 0
    last_in = u[(u[:, 0] < hi)]
    if len(last_in) and last_in[-1, 1] < hi:
        a = int(last_in[-1, 1])
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
        if k >= 0 and a - d2h_ends[k] <= TOUCH_NS and not any(x == a for x, _ in sync_gaps):
            tail = hi - max(a, lo)
            sync_ns += tail
    other_gaps = [(a, b) for a, b in r.idle_gaps(lo, hi, dev).tolist()
                  if clipped_ns(sg, a, b) == 0 and not (tail and b == hi)]
    other_ns = sum(b - a for a, b in other_gaps)

    # cudaStreamSynchronize (the .item()) of the steps' thread
    syncs = [(a, b) for a, b, name, g in r.api_calls(r"^cudaStreamSynchronize$")
             if g == steps[0].gtid]
    after_return = 0
    lags = []
    for a, b in syncs:
        if not lo <= b < hi:
            continue
        j = int(np.searchsorted(gpu_starts, b, side="left"))
        nxt = min(int(gpu_starts[j]), hi) if j < len(gpu_starts) else hi
        after_return += (nxt - b) - clipped_ns(u, b, nxt)
        k = int(np.searchsorted(d2h_ends, b, side="right")) - 1
        if k >= 0 and d2h_ends[k] >= a:
            lags.append(b - int(d2h_ends[k]))
    sync_iv = np.array(syncs, dtype=np.int64).reshape(-1, 2)

    # launches per step: CUDA calls of the process inside the range, by correlationId
    gpu_ops: dict = {}
    for t, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
                    ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"),
                    ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy")):
        if r.has(t):
            for c, gp in r.q(f"select correlationId, globalPid from {t}"):
                gpu_ops[(pid_of(gp), c)] = kind
    calls = r.q("select start, globalTid, correlationId from CUPTI_ACTIVITY_KIND_RUNTIME "
                "order by start")
    call_starts = np.array([c[0] for c in calls], dtype=np.int64)
    per_step = {"kernel": [], "memset": [], "memcpy": []}
    for s in steady:
        i0 = int(np.searchsorted(call_starts, s.start, "left"))
        i1 = int(np.searchsorted(call_starts, s.end, "left"))
        n = {"kernel": 0, "memset": 0, "memcpy": 0}
        for _, g, c in calls[i0:i1]:
            kind = gpu_ops.get((pid_of(g), c))
            if kind and pid_of(g) == pid:
                n[kind] += 1
        for k, v in n.items():
            per_step[k].append(v)
    launches = [a + b + c for a, b, c in zip(*per_step.values())]

    work = [clipped_ns(u, s.start, s.end) for s in steady]
    periods = [b.start - a.start for a, b in zip(steady, steady[1:])]
    d2h_in = [m for m in d2h if lo <= m["start"] < hi]
    out |= {
        "steady_steps": len(steady),
        "steady_window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "sync_wait_pct": pct(sync_ns, win),
        "sync_wait_gaps": int(len(sg)) + (1 if tail else 0),
        "sync_wait_gap_us_median": round(float(np.median(sg[:, 1] - sg[:, 0])) / 1e3, 2)
        if len(sg) else None,
        "idle_after_sync_return_pct": pct(after_return, win),
        "sync_return_lag_us_median": round(float(np.median(lags)) / 1e3, 2) if lags else None,
        "other_idle_pct": pct(other_ns, win),
        "other_idle_gaps_over_20us": sum(1 for a, b in other_gaps if b - a > OTHER_GAP_NS),
        "step_ms_median": ms(float(np.median([s.ns for s in steady]))),
        "step_period_ms_median": ms(float(np.median(periods))),
        "gpu_work_ms_median": ms(float(np.median(work))),
        "gpu_idle_ms_median": ms(float(np.median([s.ns - w for s, w in zip(steady, work)]))),
        "kernels_per_step": int(np.median(per_step["kernel"])),
        "memsets_per_step": int(np.median(per_step["memset"])),
        "memcpys_per_step": int(np.median(per_step["memcpy"])),
        "launches_per_step": int(np.median(launches)),
        "launches_per_step_min_max": [int(min(launches)), int(max(launches))],
        "stream_sync_calls": sum(1 for a, _ in syncs if lo <= a < hi),
        "stream_sync_pct": pct(clipped_ns(sync_iv, lo, hi), win),
        "d2h_copies": len(d2h_in),
        "d2h_dst": sorted({m["dst"] for m in d2h_in}),
        "first_step_ms": ms(steps[0].ns),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
