"""Truth figures for pub-pt-siamese (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (pytorch/examples siamese_network/main.py, one epoch) has no NVTX ranges of
its own (only cuBLAS's). Its loop is found from the copies and kernels:

* Batches: every batch starts with the upload of its first images from pinned memory (a
  host-to-device copy of 200,704 B: 64 x 1 x 28 x 28 float32; a test batch's is
  3,136,000 B: 1,000 pairs), then the second images and the targets. ``batches``: the
  first copy of each batch (a copy of those sizes under 1 ms after the previous one is
  of the same batch).
* Training steps: batches whose segment (to the next batch's upload) runs an optimizer
  kernel (``multi_tensor_apply_kernel``: Adadelta's foreach path): ``train_steps``; the
  others are the test pass's: ``eval_batches``.

Steady window: from the upload of the 3rd training step (index 2) to the upload of the
last one (``steady_steps`` whole steps; the last step and the test pass left out).

Figures of the steady window (% of it; the same readings in every pub-pt-* truth
script of this batch):
  * ``gpu_busy_pct``: the union of kernels, copies and memsets; ``gpu_idle_pct`` the rest.
  * The window's GPU idle stretches, each classified once, in this order:
    ``input_idle_pct``: stretches that end where a batch upload begins (the GPU waited
    for the next batch from the DataLoader); ``save_idle_pct``: stretches that begin
    where a copy to pageable host memory ends or end where one begins (torch.save,
    save_image); ``sync_idle_pct``: stretches that begin where a copy to pinned memory
    ended, within 2 us (a .item(): the host was blocked in the sync, then launches
    again); ``launch_idle_pct``: the rest (gaps between launches while the host runs
    Python and launches); ``*_stretches``: how many of each.
  * ``input_host_pct``: the host's side of the input: the uploading thread's blocking
    OS calls (waits, polls, reads, forks: the DataLoader's queue and worker start-up)
    inside the input stretches.
  * In the window: allocation calls (cudaMalloc/cudaFree/cudaHostAlloc kin), module
    loads and unloads, cudaStreamSynchronize and cudaDevice/EventSynchronize calls,
    copies through pageable memory (count, and their time in % of the window),
    device-to-host copies. Whole capture: streams with kernels, processes that launched
    GPU work.
Per steady step (medians): ``step_ms_median`` (one training upload to the next),
``kernels_per_step``. ``first_step_ms``: the first training step (start-up: cuDNN/cuBLAS
first use, lazy module loads). ``kernels``: all kernels of the capture.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, ms, pct, union  # noqa: E402

TOUCH_NS = 2_000                  # a stretch "begins where a copy ends" within 2 us
BLOCKING = r"wait|poll|select|recv|read|futex|sleep|fork"     # the host blocked (OS calls)
OPTIMIZER = "multi_tensor_apply_kernel"                         # foreach optimizer / norm


def batch_steps(r: Report, sizes: tuple, dev) -> tuple[list, list]:
    """The first host-to-device copy of each batch (copies of *sizes* bytes; one under
    1 ms after the previous one belongs to the same batch), and for each whether an
    optimizer kernel runs before the next batch's copy (a training step)."""
    cps = [m for m in r.memcpys(dev) if m["kind"] == "Host-to-Device" and m["bytes"] in sizes]
    ups = [m for i, m in enumerate(cps) if i == 0 or m["start"] - cps[i - 1]["start"] > 1_000_000]
    opt = np.array([k[0] for k in r.kernels(dev) if k[2] == OPTIMIZER], dtype=np.int64)
    edges = [m["start"] for m in ups] + [1 << 62]
    train = [bool(np.searchsorted(opt, b) > np.searchsorted(opt, a)) for a, b in zip(edges, edges[1:])]
    return ups, train


def idle_figures(r: Report, lo: int, hi: int, dev, uploads: list) -> dict:
    """GPU busy share of [lo, hi) and its idle stretches, each classified once, in this
    order: input (ends where a batch upload in *uploads* begins), save (begins where a
    copy to pageable host memory ends, or ends where one begins), sync (begins where a
    copy to pinned memory ended: a .item()), launch (the rest). input_host: the
    uploading thread's blocking OS calls (BLOCKING) inside the input stretches."""
    win = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    d2h = [m for m in r.memcpys(dev) if m["kind"] == "Device-to-Host"]
    arr = lambda xs: np.array(sorted(xs), dtype=np.int64)  # noqa: E731
    pin_end = arr(m["end"] for m in d2h if m["dst"] != "Pageable")
    pg_end = arr(m["end"] for m in d2h if m["dst"] == "Pageable")
    pg_start = arr(m["start"] for m in d2h if m["dst"] == "Pageable")
    up = arr(m["start"] for m in uploads)

    def near(xs, t):
        k = int(np.searchsorted(xs, t - TOUCH_NS))
        return k < len(xs) and xs[k] <= t + TOUCH_NS
    sums = dict.fromkeys(("input", "save", "sync", "launch"), 0)
    n = dict.fromkeys(sums, 0)
    input_gaps = []
    for a, b in r.idle_gaps(lo, hi, dev).tolist():
        c = ("input" if near(up, b) else "save" if near(pg_end, a) or near(pg_start, b)
             else "sync" if a > lo and near(pin_end, a) else "launch")
        sums[c] += b - a
        n[c] += 1
        if c == "input":
            input_gaps.append((a, b))
    corr = dict(r.q("select correlationId, globalTid from CUPTI_ACTIVITY_KIND_RUNTIME"))
    tids = [corr.get(m["corr"]) for m in uploads]
    tid = max(set(tids), key=tids.count) if tids else None
    waits = np.array([(a, b) for a, b, _, g in r.osrt_calls(BLOCKING) if g == tid],
                     dtype=np.int64).reshape(-1, 2)
    host = sum(clipped_ns(waits, a, b) for a, b in input_gaps)
    out = {"steady_window_ms": ms(win), "gpu_busy_pct": pct(busy, win),
           "gpu_idle_pct": pct(win - busy, win), "input_host_pct": pct(host, win)}
    out |= {f"{k}_idle_pct": pct(v, win) for k, v in sums.items()}
    out |= {f"{k}_stretches": v for k, v in n.items()}
    return out


def window_counts(r: Report, lo: int, hi: int, dev) -> dict:
    """Calls starting in [lo, hi) (allocation, module loads and unloads, syncs), the
    pageable copies in it (% of the window), its device-to-host copies, the streams with
    kernels and the processes that launched GPU work (whole capture)."""
    c = r.call_time_by_name(r.api_calls(".", lo, hi))
    grab = lambda rx: sum(v[0] for k, v in c.items() if re.search(rx, k))  # noqa: E731
    cps = [m for m in r.memcpys(dev) if lo <= m["start"] < hi]
    pg = np.array([(m["start"], m["end"]) for m in cps if "Pageable" in (m["src"], m["dst"])],
                  dtype=np.int64).reshape(-1, 2)
    return {
        "alloc_calls_in_window": grab(r"^(cudaMalloc|cudaFree|cudaHostAlloc|cudaMallocHost|"
                                      r"cudaFreeHost|cuMemAlloc|cuMemFree)"),
        "module_loads_in_window": grab(r"^(cuLibraryLoad|cuModuleLoad|cudaLibraryLoad)"),
        "module_unloads_in_window": grab(r"^(cuLibraryUnload|cuModuleUnload)"),
        "stream_syncs_in_window": grab(r"^cudaStreamSynchronize$"),
        "device_event_syncs_in_window": grab(r"^(cudaDeviceSynchronize|cudaEventSynchronize)$"),
        "pageable_copies_in_window": len(pg),
        "pageable_copy_pct": pct(clipped_ns(pg, lo, hi), hi - lo),
        "d2h_copies_in_window": sum(1 for m in cps if m["kind"] == "Device-to-Host"),
        "streams_with_kernels": len({k[3] for k in r.kernels(dev)}),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
    }


def step_medians(r: Report, starts: list, dev) -> dict:
    """Medians over consecutive step starts: the step's length and its kernels."""
    ks = np.array([k[0] for k in r.kernels(dev)], dtype=np.int64)
    d = np.diff(starts)
    nk = [int(np.searchsorted(ks, b) - np.searchsorted(ks, a)) for a, b in zip(starts, starts[1:])]
    return {"step_ms_median": ms(float(np.median(d))), "kernels_per_step": int(np.median(nk))}


SIZES = (200_704, 3_136_000)   # training and test image batches
SKIP = 2


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ups, train = batch_steps(r, SIZES, dev)
    steps = [m["start"] for m, t in zip(ups, train) if t]
    out: dict = {"kernels": len(r.kernels(dev)), "batches": len(ups),
                 "train_steps": len(steps), "eval_batches": len(ups) - len(steps)}
    if len(steps) <= SKIP + 2:
        return out
    lo, hi = steps[SKIP], steps[-1]
    out["steady_steps"] = len(steps) - 1 - SKIP
    out |= idle_figures(r, lo, hi, dev, ups)
    out |= step_medians(r, steps[SKIP:], dev)
    out |= window_counts(r, lo, hi, dev)
    out["first_step_ms"] = ms(steps[1] - steps[0])
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
