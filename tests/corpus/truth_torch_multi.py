"""Readings shared by the corpus's two-GPU PyTorch truth scripts (plain sqlite3/numpy,
no gpugap): pt-ddp-uneven, pt-fsdp2-hostbound and pt-tensor-parallel (torchrun: two
processes, one GPU each) and pt-model-parallel and pt-pipeline-microbatch (one process
driving both GPUs).

GPU work is read as ops, (start, end, device, pid, correlationId, name) rows of every
kernel, copy and memset; each NVTX ``step N`` range's GPU work is the ops whose CUDA call
(any thread of the range's process) started inside the range.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from truthlib import THREAD_MASK, Range, Report, clipped_ns, iv, overlap_ns, pct


# --- two-GPU readings ---
def pid_of(gid: int) -> int:
    return (int(gid or 0) >> 24) & THREAD_MASK


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


# --- torchrun readings ---
def nccl_split(ops, lo: int, hi: int, devices) -> dict:
    """Pair the NCCL kernels of the two devices by order (each rank launches the same
    collectives in the same order; checked by name). A collective completes on both ranks
    together, so its shorter kernel is the transfer itself (intrinsic) and the longer
    one's excess is that rank's waiting for the other to join. Per device, over the pairs
    starting in [lo, hi): intrinsic %, waiting %, and the GPU time that was neither
    compute nor intrinsic communication (the waiting's tail end is taken as the intrinsic
    part: [end - intrinsic, end])."""
    win = hi - lo
    per = {d: sorted(o for o in ops if o[2] == d and is_nccl(o[5])) for d in devices}
    if len(devices) != 2 or len(per[devices[0]]) != len(per[devices[1]]) or any(
            a[5] != b[5] for a, b in zip(per[devices[0]], per[devices[1]], strict=False)):
        return {"paired": False}
    out: dict = {"paired": True, "pairs_in_window": 0}
    intr = {d: [] for d in devices}
    wait = {d: 0 for d in devices}
    for a, b in zip(per[devices[0]], per[devices[1]], strict=False):
        if not (lo <= a[0] < hi and lo <= b[0] < hi):
            continue
        out["pairs_in_window"] += 1
        n = min(a[1] - a[0], b[1] - b[0])
        for o in (a, b):
            intr[o[2]].append((o[1] - n, o[1]))
            wait[o[2]] += (o[1] - o[0]) - n
    for d in devices:
        comp = [o for o in ops if o[2] == d and not is_nccl(o[5]) and o[1] > lo and o[0] < hi]
        useful = clipped_ns(np.concatenate([iv(comp), np.array(intr[d], dtype=np.int64)
                                            .reshape(-1, 2)]), lo, hi)
        out[str(d)] = {
            "nccl_intrinsic_pct": pct(sum(e - s for s, e in intr[d]), win),
            "nccl_waiting_pct": pct(wait[d], win),
            "not_compute_nor_intrinsic_comm_pct": pct(win - useful, win),
        }
    return out


def idle_split(r: Report, ops, lo: int, hi: int, devices) -> dict:
    """Per device: its idle time in [lo, hi), split by whether the op that ended each
    idle stretch had already been launched (its CUDA call ended before the stretch began:
    the GPU waited for something else) or not (the GPU waited for the host's launch)."""
    ends = {}
    if r.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        for b, g, c in r.q("select end, globalTid, correlationId from "
                           "CUPTI_ACTIVITY_KIND_RUNTIME where correlationId is not null"):
            ends[(pid_of(g), c)] = b
    win = hi - lo
    out = {}
    for d in devices:
        mine = sorted(o for o in ops if o[2] == d and o[1] > lo and o[0] < hi)
        late = queued = 0
        edge = lo
        for a, b, _d, p, c, _n in mine:
            if a > edge:
                gap = a - max(edge, lo)
                call_end = ends.get((p, c))
                if call_end is not None and call_end <= edge:
                    queued += gap
                else:
                    late += gap
            edge = max(edge, b)
        out[str(d)] = {"idle_waiting_for_launch_pct": pct(late, win),
                       "idle_with_work_queued_pct": pct(queued, win)}
    return out


def host_readings(r: Report, steps_by_dev: dict) -> dict:
    """Per rank: the median over steady steps of the longest stretch of its step thread
    in neither a CUDA call nor an OS-runtime call (pure CPU work that launches nothing,
    e.g. numpy: --sample=none shows no more of it; waits such as pthread_cond_wait while
    autograd's thread runs backward are OS-runtime calls and do not count), and how far
    rank 1's host ran ahead of rank 0's (step start of rank 0 minus that of rank 1, at
    the first steady step, the median and the last)."""
    calls: dict[int, list[tuple[int, int]]] = {}
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API"):
        if r.has(t):
            for a, b, g in r.q(f"select start, end, globalTid from {t}"):
                calls.setdefault(g, []).append((a, b))
    for v in calls.values():
        v.sort()
    out: dict = {}
    for d, mine in steps_by_dev.items():
        gaps = []
        for s in mine[2:]:
            rows = [(a, b) for a, b in calls.get(s.gtid, []) if a < s.end and b > s.start]
            edge, best = s.start, 0
            for a, b in rows:
                best = max(best, a - edge)
                edge = max(edge, b)
            gaps.append(max(best, s.end - edge))
        out[str(d)] = {"longest_cpu_only_host_stretch_ms_median":
                       round(float(np.median(gaps)) / 1e6, 3) if gaps else None}
    if len(steps_by_dev) == 2:
        d0, d1 = sorted(steps_by_dev)
        n = min(len(steps_by_dev[d0]), len(steps_by_dev[d1]))
        lead = [(steps_by_dev[d0][i].start - steps_by_dev[d1][i].start) / 1e6
                for i in range(2, n)]
        if lead:
            out["rank1_host_ahead_ms"] = {"first": round(lead[0], 1),
                                          "median": round(float(np.median(lead)), 1),
                                          "last": round(lead[-1], 1)}
    return out


# --- the figures ---
def torchrun_figures(path: str, rank_extra: Callable[[Report, int, list[Range]], dict]
                     | None = None) -> dict:
    """The figures of a torchrun program (two processes, one GPU each; the rank of a
    process is the device its kernels ran on): per rank its steps, GPU step period and
    host step time; the steady window, from the earliest GPU start of step 2's work on any
    rank to the latest GPU end of the last step's work; per device its figures
    (device_figures), idle split, NCCL split and host readings; the late rank (least NCCL
    time) and the waiting one. *rank_extra*(report, pid, steady steps): more figures of a
    rank with steps."""
    r = Report(path)
    steps = r.ranges(r"^step \d+$")
    ops = gpu_ops(r)
    ranks = rank_of_pids(ops)
    out: dict = {"processes_with_gpu_work": len(ranks),
                 "devices_with_gpu_work": len({o[2] for o in ops})}
    per_rank: dict[int, dict] = {}
    lo, hi = None, None
    for pid, dev in sorted(ranks.items(), key=lambda kv: kv[1]):
        mine = [s for s in steps if pid_of(s.gtid) == pid]
        info: dict = {"pid": pid, "device": dev, "steps": len(mine)}
        if len(mine) >= 5:
            spans = step_gpu_spans(r, mine, ops)
            starts = [sp[dev][0] for sp in spans[2:] if dev in sp]
            ends = [sp[dev][1] for sp in spans[2:] if dev in sp]
            if starts:
                lo = min(starts[0], lo) if lo is not None else starts[0]
                hi = max(max(ends), hi) if hi is not None else max(ends)
                info["gpu_step_period_ms_median"] = round(
                    float(np.median(np.diff(starts))) / 1e6, 3) if len(starts) > 2 else None
            info["host_step_ms_median"] = round(
                float(np.median([s.ns for s in mine[2:]])) / 1e6, 3)
            if rank_extra is not None:
                info |= rank_extra(r, pid, mine[2:])
        per_rank[dev] = info
    out["iterations"] = per_rank.get(0, {}).get("steps", 0)
    out["ranks"] = {str(k): v for k, v in per_rank.items()}
    if lo is None or hi <= lo:
        return out
    win = hi - lo
    devices = sorted({o[2] for o in ops})
    figs = device_figures(ops, lo, hi, devices)
    n = max(1, max(v["steps"] for v in per_rank.values()) - 2)
    out |= {"steady_window_ms": round(win / 1e6, 3),
            "ms_per_step": round(win / n / 1e6, 3),
            "devices": figs}
    out["idle"] = idle_split(r, ops, lo, hi, devices)
    out["nccl_split"] = nccl_split(ops, lo, hi, devices)
    out["host"] = host_readings(r, {dev: [s for s in steps if pid_of(s.gtid) == info["pid"]]
                                    for dev, info in per_rank.items()})
    if len(figs) >= 2:
        by_nccl = sorted(figs, key=lambda d: figs[d]["nccl_pct"])
        late, waiting = by_nccl[0], by_nccl[-1]
        out["late_rank_by_nccl_time"] = int(late)
        out["waiting_rank"] = int(waiting)
        out["wait_share_pct"] = round(figs[waiting]["nccl_pct"] - figs[late]["nccl_pct"], 2)
        out["wait_share_exposed_pct"] = round(figs[waiting]["nccl_exposed_pct"]
                                              - figs[late]["nccl_exposed_pct"], 2)
        out["exposed_communication_pct_mean"] = round(
            float(np.mean([f["nccl_exposed_pct"] for f in figs.values()])), 2)
    return out


def one_process_figures(path: str, extra: Callable[[list, int, int, list[int]], dict]
                        | None = None) -> dict:
    """The figures of a program whose one process drives both GPUs: steps 2.. as the
    steady state, from the first GPU start of step 2's work to the last GPU end of the
    last step's work; per device its figures (device_figures) and GPU step period; the
    cross-device wait share per device. *extra*(ops, lo, hi, devices): more figures, put
    before the cross-device wait share."""
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
    if extra is not None:
        out |= extra(ops, lo, hi, devices)
    out["cross_device_wait_share_pct"] = {d: f["idle_while_other_busy_pct"]
                                          for d, f in figs.items()}
    return out
