"""Truth figures for pub2-pt-ddp-torchrun (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

pytorch/examples distributed/ddp-tutorial-series/multigpu_torchrun.py under torchrun, two
ranks: DDP over a Linear(20, 1), 10 epochs of 32 steps a rank (2,048 random samples,
DistributedSampler, batch 32), a snapshot (torch.save) by rank 0 after epochs 0 and 5.
No NVTX. Steps: each rank's step begins with the upload of its batch, a host-to-device
copy of 2,560 bytes (32 x 20 float32, from the DataLoader's pinned batch; the 128-byte
targets follow).

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

And ``input`` per device: the window's GPU idle time that ends where a batch upload
begins (within 2 us: the main thread fetching, collating and pinning the next batch,
num_workers=0) against the rest (``other_idle_pct``: launches, DDP and optimizer
Python); ``epoch_boundaries``: the steps over 3x the median (an epoch's start: the
sampler's set_epoch, the extra next(iter(...)) for the batch size, the print, rank 0's
snapshot) and their share of the window."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch_multi import (  # noqa: E402
    device_figures,
    gpu_ops,
    idle_split,
    is_nccl,
    nccl_split,
    pid_of,
    rank_of_pids,
)
from truthlib import Report, ms, pct  # noqa: E402

SKIP = 2                      # steps 0 and 1: start-up (first use of every kernel, NCCL)
BATCH_BYTES = 32 * 20 * 4      # one rank's batch of inputs: 32 x 20 float32
TOUCH_NS = 2_000


def step_starts(r: Report, dev: int) -> list[int]:
    """The rank's steps: the uploads of its batches (host-to-device, BATCH_BYTES)."""
    return [m["start"] for m in r.memcpys(dev)
            if m["kind"] == "Host-to-Device" and m["bytes"] == BATCH_BYTES]


def input_split(r: Report, lo: int, hi: int, starts: dict[int, list[int]]) -> dict:
    """Per device: idle in [lo, hi) that ends where a batch upload begins (the host
    loading the next batch) and the rest; the long steps (epoch boundaries)."""
    out = {}
    for dev, st in starts.items():
        up = np.array(st, dtype=np.int64)
        gaps = r.idle_gaps(lo, hi, dev)
        k = np.searchsorted(up, gaps[:, 1] - TOUCH_NS)
        hit = (k < len(up)) & (up[np.minimum(k, len(up) - 1)] <= gaps[:, 1] + TOUCH_NS)
        span = gaps[:, 1] - gaps[:, 0]
        d = np.diff(st[SKIP:])
        long_ = d > 3 * np.median(d)
        out[str(dev)] = {"input_idle_pct": pct(int(span[hit].sum()), hi - lo),
                         "other_idle_pct": pct(int(span[~hit].sum()), hi - lo),
                         "input_stretches": int(hit.sum()),
                         "epoch_boundaries": int(long_.sum()),
                         "epoch_boundaries_pct": pct(int(d[long_].sum()), hi - lo)}
    return out


def per_step(times: np.ndarray, st: list[int]) -> list[int]:
    """How many of the sorted *times* fall in each steady step [st[i], st[i + 1])."""
    return [int(np.searchsorted(times, b) - np.searchsorted(times, a))
            for a, b in zip(st[SKIP:], st[SKIP + 1:])]


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


def main(path: str) -> dict:
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
    out["input"] = input_split(r, lo, hi, starts)
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


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
