"""Truth figures for pub-pt-dcgan (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (pytorch/examples dcgan/main.py, --dataset fake, 4 epochs of 16 iterations,
cudnn.benchmark on) has no NVTX ranges. Its loop is found from the copies and kernels:

* Iterations: every iteration starts with the upload of the real batch (a host-to-device
  copy from pageable memory of 3,145,728 B: 64 x 3 x 64 x 64 float32, or 1,966,080 B
  for each epoch's last batch of 40 images); ``batches``: the first copy of each;
  ``iterations``: those whose segment runs an optimizer kernel (all of them).
* Epochs: each ends with its 40-image batch; ``iterations_per_epoch``.
* First use: ``iteration_0`` and ``iteration_15`` (the first 40-image batch: a new
  shape): length, cudaDeviceSynchronize/cudaEventSynchronize calls (cudnn.benchmark
  timing algorithms) and allocation calls in each.

Steady window: epochs 2 and 3 whole, from the upload of epoch 2's first batch to the
upload of epoch 4's first batch (``steady_iterations``): each epoch in it holds its
first iteration's two save_image PNGs (grids copied to pageable memory, encoded on the
host), its torch.save of both state_dicts, and the next epoch's DataLoader start-up
(2 new workers). Other views, same figures: ``epochs_2_to_4`` (to the last upload),
``within_epoch_2`` (epoch 2's 2nd to 15th iteration: no PNG, checkpoint or worker
start-up).

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
Per steady step (medians): ``step_ms_median`` (one step start to the next),
``kernels_per_step``. ``kernels``: all kernels of the capture.
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


SIZES = (3_145_728, 1_966_080)   # batches of 64 and each epoch's last of 40 (x 3 x 64 x 64 float32)
LAST = 1_966_080
VIEW = ("steady_window_ms", "gpu_busy_pct", "input_idle_pct", "input_host_pct",
        "save_idle_pct", "sync_idle_pct", "launch_idle_pct")


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ups, train = batch_steps(r, SIZES, dev)
    its = [m["start"] for m, t in zip(ups, train) if t]
    out: dict = {"kernels": len(r.kernels(dev)), "batches": len(ups), "iterations": len(its)}
    last = [i for i, m in enumerate(ups) if m["bytes"] == LAST]
    first = [0] + [i + 1 for i in last if i + 1 < len(ups)]
    out["epochs"] = len(first)
    out["iterations_per_epoch"] = [b - a for a, b in zip(first, first[1:] + [len(ups)])]
    if len(first) < 4 or len(its) != len(ups):
        return out
    # first use: iteration 0 and the first 40-image batch (cudnn.benchmark times every
    # algorithm for each new shape): their length, and the syncs and allocations in them
    ends = [m["start"] for m in ups[1:]] + [max(k[1] for k in r.kernels(dev))]
    for i in (0, last[0]):
        a, b = ups[i]["start"], ends[i]
        c = window_counts(r, a, b, dev)
        out[f"iteration_{i}"] = {"ms": ms(b - a),
                                 "device_event_syncs": c["device_event_syncs_in_window"],
                                 "alloc_calls": c["alloc_calls_in_window"]}
    # steady window: epochs 2 and 3, whole (upload of epoch 2's first batch to upload of
    # epoch 4's first batch): each holds its PNGs, its checkpoint and the next epoch's
    # worker start-up
    lo, hi = ups[first[1]]["start"], ups[first[3]]["start"]
    out["steady_iterations"] = first[3] - first[1]
    out |= idle_figures(r, lo, hi, dev, ups)
    out |= step_medians(r, [m["start"] for m in ups[first[1]:first[3] + 1]], dev)
    out |= window_counts(r, lo, hi, dev)
    # other views: epochs 2-4 to the last upload; epoch 2 without its first and last
    # iterations (no PNG, checkpoint or worker start-up in it)
    alt = idle_figures(r, lo, ups[-1]["start"], dev, ups)
    out["epochs_2_to_4"] = {k: alt[k] for k in VIEW}
    inner = idle_figures(r, ups[first[1] + 1]["start"], ups[last[1]]["start"], dev, ups)
    out["within_epoch_2"] = {k: inner[k] for k in VIEW}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
