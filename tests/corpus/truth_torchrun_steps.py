"""The truth of a two-rank torchrun job without NVTX (the pub2-pt-* programs), shared:
each program's truth.py says where its steps begin (a marker kernel or upload per rank).
Plain sqlite3/numpy; no gpugap.

Figures (the two-GPU readings of truth_torch_multi.py, over the steady window: from the
earliest start of step 2 on either rank to the latest start of the last step):
  * per rank (= device, torchrun's LOCAL_RANK): ``steps``, ``first_step_ms``,
    ``step_ms_median`` / ``step_ms_max`` (step start to step start, steps 2..),
    ``kernels_per_step`` and ``nccl_kernels_per_step`` (medians), ``streams_with_kernels``;
  * ``devices``: per device busy %, compute (non-NCCL) busy %, NCCL kernel time % and
    its exposed part (NCCL time with no other work of the device under it), idle while
    the other device is busy; ``idle``: the idle split into waiting for the host's launch
    and waiting with work queued; ``nccl_split``: the NCCL kernels paired across the ranks
    (the shorter of a pair is the transfer, the longer one's excess its rank's wait for
    the other); ``late_rank_by_nccl_time`` (least NCCL time), ``waiting_rank``,
    ``wait_share_pct`` (the NCCL time % of the waiting rank minus the late one's),
    ``exposed_communication_pct_mean``, ``busy_pct_mean``,
    ``idle_waiting_for_launch_pct_mean``;
  * ``window_counts`` per rank: allocation calls, module loads, stream / device / event
    synchronisations, device-to-host copies (all, into pageable memory) in the window.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from truth_torch_multi import (
    device_figures,
    gpu_ops,
    idle_split,
    is_nccl,
    nccl_split,
    pid_of,
    rank_of_pids,
)
from truthlib import Report, ms

SKIP = 2                      # steps 0 and 1: start-up (first use of every kernel, NCCL)
RANDOM = re.compile(r"distribution|random", re.IGNORECASE)


def random_batch_starts(r: Report, dev: int) -> list[int]:
    """The rank's iterations: each begins with the random batch the loop draws on the GPU
    (a ``distribution_*`` kernel). Parameter initialisation on the GPU also draws random
    numbers, with other kernels: the loop's is told by its full (demangled) name and grid,
    those of the last random kernel the device ran (nothing random runs after the loop)."""
    rows = r.q("select start, demangledName, shortName, gridX, gridY, gridZ from "
               "CUPTI_ACTIVITY_KIND_KERNEL where deviceId = ? order by start", dev)
    rnd = [(a, dn, (gx, gy, gz)) for a, dn, sn, gx, gy, gz in rows
           if RANDOM.search(r.strings.get(sn, ""))]
    if not rnd:
        return []
    key = rnd[-1][1:]
    return [a for a, dn, g in rnd if (dn, g) == key]


def per_step(times: np.ndarray, st: list[int]) -> list[int]:
    """How many of the sorted *times* fall in each steady step [st[i], st[i + 1])."""
    return [int(np.searchsorted(times, b) - np.searchsorted(times, a))
            for a, b in zip(st[SKIP:], st[SKIP + 1:], strict=False)]


def window_counts(r: Report, pid: int, dev: int, lo: int, hi: int) -> dict:
    """The rank's CUDA calls starting in [lo, hi) that are causes of their own
    (allocations, module loads, synchronisations), and its copies to the host (all,
    and those into pageable memory: torch.save, .cpu())."""
    calls = [(a, name) for a, _b, name, g in r.api_calls(".", lo, hi) if pid_of(g) == pid]
    count = lambda rx: sum(1 for _, n in calls if re.search(rx, n))  # noqa: E731
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host" and lo <= m["start"] < hi]
    return {"alloc_calls": count(r"^(cudaMalloc|cudaFree|cudaHostAlloc|cudaMallocHost|"
                                 r"cudaFreeHost|cuMemAlloc|cuMemFree|cuMemCreate|cuMemMap)"),
            "module_loads": count(r"^(cuLibraryLoad|cuModuleLoad|cudaLibraryLoad)"),
            "stream_syncs": count(r"^cudaStreamSynchronize$"),
            "device_event_syncs": count(r"^(cudaDeviceSynchronize|cudaEventSynchronize)$"),
            "d2h_copies": len(d2h),
            "d2h_pageable_copies": sum(1 for m in d2h if m["dst"] == "Pageable")}


def job_figures(path: str, step_starts: Callable[[Report, int], list[int]],
                extra: Callable[[Report, int, int, dict[int, list[int]]], dict] | None = None
                ) -> dict:
    """The figures of a torchrun job without NVTX (module doc), its steps per rank from
    *step_starts*; *extra*(report, lo, hi, starts) adds a program's own over the steady
    window."""
    r = Report(path)
    ops = gpu_ops(r)
    ranks = rank_of_pids(ops)                       # pid -> device (LOCAL_RANK)
    devices = sorted({o[2] for o in ops})
    out: dict = {"processes_with_gpu_work": len(ranks), "devices_with_gpu_work": len(devices),
                 "ranks": {}}
    starts: dict[int, list[int]] = {}
    for pid, dev in sorted(ranks.items(), key=lambda kv: kv[1]):
        st = step_starts(r, dev)
        starts[dev] = st
        info: dict = {"pid": pid, "device": dev, "steps": len(st)}
        if len(st) > SKIP + 2:
            k = np.array(sorted(o[0] for o in ops if o[2] == dev and o[5][0] != "["),
                         dtype=np.int64)
            nc = np.array(sorted(o[0] for o in ops if o[2] == dev and is_nccl(o[5])),
                          dtype=np.int64)
            info |= {"first_step_ms": ms(st[1] - st[0]),
                     "step_ms_median": ms(float(np.median(np.diff(st[SKIP:])))),
                     "step_ms_max": ms(float(np.max(np.diff(st[SKIP:])))),
                     "kernels_per_step": int(np.median(per_step(k, st))),
                     "nccl_kernels_per_step": int(np.median(per_step(nc, st))),
                     "streams_with_kernels": len({x[3] for x in r.kernels(dev)})}
        out["ranks"][str(dev)] = info
    out["iterations"] = len(starts.get(devices[0], [])) if devices else 0
    if len(starts) < 2 or min(len(v) for v in starts.values()) <= SKIP + 2:
        return out
    # Steady window: from the earliest start of step SKIP on any rank to the latest start
    # of the last step (whole steps only; the last step and what follows it left out).
    lo = min(v[SKIP] for v in starts.values())
    hi = max(v[-1] for v in starts.values())
    figs = device_figures(ops, lo, hi, devices)
    out |= {"steady_steps": min(len(v) for v in starts.values()) - 1 - SKIP,
            "steady_window_ms": ms(hi - lo), "devices": figs,
            "idle": idle_split(r, ops, lo, hi, devices),
            "nccl_split": nccl_split(ops, lo, hi, devices),
            "window_counts": {str(d): window_counts(r, p, d, lo, hi) for p, d in ranks.items()}}
    if extra is not None:
        out |= extra(r, lo, hi, starts)
    by_nccl = sorted(figs, key=lambda d: figs[d]["nccl_pct"])
    late, waiting = by_nccl[0], by_nccl[-1]
    out |= {"late_rank_by_nccl_time": int(late), "waiting_rank": int(waiting),
            "wait_share_pct": round(figs[waiting]["nccl_pct"] - figs[late]["nccl_pct"], 2),
            "exposed_communication_pct_mean": round(
                float(np.mean([f["nccl_exposed_pct"] for f in figs.values()])), 2),
            "busy_pct_mean": round(float(np.mean([f["busy_pct"] for f in figs.values()])), 2),
            "idle_waiting_for_launch_pct_mean": round(float(np.mean(
                [v["idle_waiting_for_launch_pct"] for v in out["idle"].values()])), 2)}
    return out
