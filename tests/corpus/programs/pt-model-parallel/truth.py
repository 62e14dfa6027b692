"""Truth figures for pt-model-parallel, from the export alone (sqlite3 + numpy, no gpugap).

Iterations: the NVTX ranges ``step N`` (one process drives both GPUs). The host runs
ahead of the GPUs (no sync in the loop), so each step's GPU work is found through its
CUDA calls: the kernels, copies and memsets whose launching call (any thread of the
process: autograd's device threads launch backward work) started inside the step's
range. Steady window: from the first GPU start of step 2's work to the last GPU end of
the last step's work. Per device: busy %, and the time it was idle while the other
device was busy (cross-device wait: its queued work waits for the other GPU), as % of
the window; the verdict's share is that figure (designed ~45 % on each GPU).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, pct, union  # noqa: E402

# --- two-GPU readings (the same block in every two-GPU truth script of this corpus) ---
PID_MASK = 0xFFFFFF


def pid_of(gid: int) -> int:
    return (int(gid or 0) >> 24) & PID_MASK


def gpu_ops(r: Report) -> list[tuple[int, int, int, int, int, str]]:
    """(start, end, device, pid, correlationId, name) of every kernel, copy and memset."""
    rows: list[tuple[int, int, int, int, int, str]] = []
    if r.has("CUPTI_ACTIVITY_KIND_KERNEL"):
        for a, b, d, g, c, n in r.q("select start, end, deviceId, globalPid, correlationId, "
                                    "shortName from CUPTI_ACTIVITY_KIND_KERNEL"):
            rows.append((a, b, d, pid_of(g), c or 0, r.strings.get(n, str(n))))
    for t, label in (("CUPTI_ACTIVITY_KIND_MEMCPY", "[memcpy]"),
                     ("CUPTI_ACTIVITY_KIND_MEMSET", "[memset]")):
        if r.has(t):
            for a, b, d, g, c in r.q(f"select start, end, deviceId, globalPid, correlationId "
                                     f"from {t}"):
                rows.append((a, b, d, pid_of(g), c or 0, label))
    return sorted(rows)


def is_nccl(name: str) -> bool:
    return "nccl" in name.lower()


def iv(rows) -> np.ndarray:
    return np.array([(a, b) for a, b, *_ in rows], dtype=np.int64).reshape(-1, 2)


def overlap_ns(a: np.ndarray, b: np.ndarray, lo: int, hi: int) -> int:
    """Time inside [lo, hi) covered by both unions."""
    ua, ub = union(a), union(b)
    total, j = 0, 0
    for s, e in ua.tolist():
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        while j < len(ub) and ub[j, 1] <= s:
            j += 1
        k = j
        while k < len(ub) and ub[k, 0] < e:
            total += max(0, min(e, int(ub[k, 1])) - max(s, int(ub[k, 0])))
            k += 1
    return total


def rank_of_pids(ops) -> dict[int, int]:
    """pid -> the device most of its kernels ran on (torchrun: LOCAL_RANK = device)."""
    count: dict[int, dict[int, int]] = {}
    for _, _, d, p, _, name in ops:
        if not name.startswith("["):
            count.setdefault(p, {}).setdefault(d, 0)
            count[p][d] += 1
    return {p: max(c, key=c.get) for p, c in count.items()}


def step_gpu_spans(r: Report, steps, ops) -> list[dict[int, tuple[int, int]]]:
    """For each NVTX step range: {device: (first start, last end)} of the GPU work whose
    CUDA call (any thread of the range's process) started inside the range."""
    calls = r.q("select start, globalTid, correlationId from CUPTI_ACTIVITY_KIND_RUNTIME "
                "where correlationId is not null") if r.has("CUPTI_ACTIVITY_KIND_RUNTIME") else []
    by_pid: dict[int, list[tuple[int, int]]] = {}
    for a, g, c in calls:
        by_pid.setdefault(pid_of(g), []).append((a, c))
    arr = {p: np.array(sorted(v), dtype=np.int64) for p, v in by_pid.items()}
    op_by_key: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for a, b, d, p, c, _ in ops:
        op_by_key.setdefault((p, c), []).append((a, b, d))
    out = []
    for s in steps:
        p = pid_of(s.gtid)
        spans: dict[int, tuple[int, int]] = {}
        rows = arr.get(p)
        if rows is not None and len(rows):
            i0 = np.searchsorted(rows[:, 0], s.start, side="left")
            i1 = np.searchsorted(rows[:, 0], s.end, side="left")
            for c in rows[i0:i1, 1].tolist():
                for a, b, d in op_by_key.get((p, c), ()):
                    lo, hi = spans.get(d, (a, b))
                    spans[d] = (min(lo, a), max(hi, b))
        out.append(spans)
    return out


def device_figures(ops, lo: int, hi: int, devices) -> dict:
    """Per device in [lo, hi): busy %, the other devices' busy time over this one's idle
    time (cross-device wait) %, NCCL kernel time % and its part not under other work."""
    win = hi - lo
    out = {}
    for d in devices:
        mine = [o for o in ops if o[2] == d and o[1] > lo and o[0] < hi]
        others = [o for o in ops if o[2] != d and o[1] > lo and o[0] < hi]
        busy = clipped_ns(iv(mine), lo, hi)
        other_busy = clipped_ns(iv(others), lo, hi)
        both = overlap_ns(iv(mine), iv(others), lo, hi)
        nccl = [o for o in mine if is_nccl(o[5])]
        rest = [o for o in mine if not is_nccl(o[5])]
        nccl_ns = clipped_ns(iv(nccl), lo, hi)
        nccl_hidden = overlap_ns(iv(nccl), iv(rest), lo, hi)
        out[str(d)] = {
            "busy_pct": pct(busy, win),
            "idle_pct": pct(win - busy, win),
            "idle_while_other_busy_pct": pct(other_busy - both, win),
            "compute_busy_pct": pct(clipped_ns(iv(rest), lo, hi), win),
            "nccl_pct": pct(nccl_ns, win),
            "nccl_exposed_pct": pct(nccl_ns - nccl_hidden, win),
            "nccl_kernels": len(nccl),
        }
    return out
# --- end of the two-GPU readings ---


def main(path: str) -> dict:
    r = Report(path)
    steps = r.ranges(r"^step \d+$")
    out: dict = {"iterations": len(steps)}
    if len(steps) < 5:
        return out
    ops = gpu_ops(r)
    spans = step_gpu_spans(r, steps, ops)
    devices = sorted({o[2] for o in ops})
    kept = [s for s in spans[2:] if s]
    if not kept or not spans[2]:
        return out
    lo = min(a for a, _ in spans[2].values())
    hi = max(b for s in kept for _, b in s.values())
    win = hi - lo
    figs = device_figures(ops, lo, hi, devices)
    period = {}
    for d in devices:
        starts = [s[d][0] for s in spans[2:] if d in s]
        if len(starts) > 2:
            period[str(d)] = round(float(np.median(np.diff(starts))) / 1e6, 3)
    peer = [o for o in ops if o[5] == "[memcpy]" and lo <= o[0] < hi]
    out |= {
        "steady_iterations": len(steps) - 2,
        "steady_window_ms": round(win / 1e6, 3),
        "ms_per_step": round(win / (len(steps) - 2) / 1e6, 3),
        "gpu_step_period_ms_median": period,
        "devices": figs,
        "copies_in_window": len(peer),
        "host_step_ms_median": round(float(np.median([s.ns for s in steps[2:]])) / 1e6, 3),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
    }
    out["cross_device_wait_share_pct"] = {d: f["idle_while_other_busy_pct"]
                                          for d, f in figs.items()}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
