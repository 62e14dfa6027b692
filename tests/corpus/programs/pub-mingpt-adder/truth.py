"""Truth figures for pub-mingpt-adder (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (minGPT projects/adder: 80 training iterations of the 3-layer gpt-nano, a
DataLoader with 4 workers and pin_memory, evaluation + torch.save at iteration 0) has
no NVTX ranges of its own (only cuBLAS's). Its iterations are found from the GPU work:
each one uploads its batch, x then y, with two host-to-device copies from pinned memory
(nothing else copies from pinned memory), and runs the loss's backward once
(``nll_loss_backward_reduce_cuda_kernel_2d``): ``steps`` counts the backward kernels,
``batch_uploads`` the pinned uploads. A step runs from its first upload to the next
step's first upload (the last to the end of the GPU work).

Per steady step (medians): ``step_ms_median``, ``step_busy_pct_median``,
``kernels_per_step`` (set of values, last step left out).

Steady window: from the 3rd step's first upload (index 2) to the end of the last GPU
work (the evaluation and the checkpoint of iteration 0 are before it). Figures of the
window (% of it): ``gpu_busy_pct``; idle stretches classified once, in this order:
``input_idle_pct``: those ending where a batch upload begins (the host fetching the
next batch from the DataLoader's queue, then the upload); ``sync_idle_pct``: those
beginning where a device-to-host copy ended (within 2 us: the loss.item() every 10
iterations); ``other_idle_pct``: the rest (gaps between launches). ``gaps_over_1ms``:
idle stretches over 1 ms; ``idle_in_gaps_under_100us_pct``.
Host side, in the window: the launching threads and their kernel launches
(``launches_by_thread``: main thread and autograd's engine thread), the main thread's
time blocked in pthread_cond_wait (waiting for autograd's engine to run the backward)
and pthread_cond_timedwait (waiting on the DataLoader's queue), as % of the window;
cudaMalloc/cudaFree/cudaHostAlloc calls, module loads, stream syncs; the processes and
streams with GPU work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, iv, ms, pct, union  # noqa: E402

SKIP = 2
TOUCH_NS = 2_000


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ks = r.kernels(dev)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    cps = r.memcpys(dev)
    ups = sorted(c["start"] for c in cps if c["kind"] == "Host-to-Device" and c["src"] == "Pinned")
    steps = ups[0::2]
    nbwd = sum(1 for k in ks if k[2].startswith("nll_loss_backward"))
    hi = int(max(k[1] for k in ks))
    lo = steps[SKIP]
    win = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    upset = set(ups)
    d2h_ends = np.array(sorted(c["end"] for c in cps if c["kind"] == "Device-to-Host"),
                        dtype=np.int64)
    gaps = r.idle_gaps(lo, hi, dev)
    cls = {"input": 0, "sync": 0, "other": 0}
    for a, b in gaps.tolist():
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
        if b in upset:
            cls["input"] += b - a
        elif k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
            cls["sync"] += b - a
        else:
            cls["other"] += b - a
    glen = gaps[:, 1] - gaps[:, 0]
    bounds = steps + [hi]
    per = np.array([(b - a, clipped_ns(u, a, b), int(((starts >= a) & (starts < b)).sum()))
                    for a, b in zip(bounds[SKIP:], bounds[SKIP + 1:])], dtype=np.int64)

    launches = r.launch_calls()
    main_tid = launches[0][3] if launches else None
    by_thread: dict[str, int] = {}
    for a, _b, _n, g, _c in launches:
        if lo <= a < hi:
            key = "main" if g == main_tid else str(g & THREAD_MASK)
            by_thread[key] = by_thread.get(key, 0) + 1
    waits = [c for c in r.osrt_calls(r"^pthread_cond_(timed)?wait$", lo, hi) if c[3] == main_tid]
    cw = iv([c for c in waits if c[2] == "pthread_cond_wait"])
    ctw = iv([c for c in waits if c[2] == "pthread_cond_timedwait"])
    api = r.api_calls(".", lo, hi)
    return {
        "steps": nbwd,
        "batch_uploads": len(ups),
        "kernels": len(ks),
        "steady_steps": len(steps) - SKIP,
        "steady_window_ms": ms(win),
        "step_ms_median": ms(float(np.median(per[:, 0]))),
        "step_busy_pct_median": round(float(np.median(100.0 * per[:, 1] / per[:, 0])), 2),
        "kernels_per_step": sorted({int(x) for x in per[:-1, 2]}),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "input_idle_pct": pct(cls["input"], win),
        "sync_idle_pct": pct(cls["sync"], win),
        "other_idle_pct": pct(cls["other"], win),
        "gaps_over_1ms": int((glen > 1_000_000).sum()),
        "idle_in_gaps_under_100us_pct": pct(int(glen[glen < 100_000].sum()), win),
        "launches_by_thread": by_thread,
        "main_cond_wait_pct": pct(clipped_ns(cw, lo, hi), win),
        "main_cond_timedwait_pct": pct(clipped_ns(ctw, lo, hi), win),
        "alloc_calls_in_window": sum(1 for c in api if c[2] in (
            "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost")),
        "module_loads_in_window": sum(1 for c in api if c[2].startswith(("cuLibraryLoad", "cuModuleLoad"))),
        "stream_sync_calls_in_window": sum(1 for c in api if c[2] == "cudaStreamSynchronize"),
        "pageable_copies_in_window": sum(1 for c in cps if lo <= c["start"] < hi
                                         and "Pageable" in (c["src"], c["dst"])),
        "first_step_ms": ms(steps[1] - steps[0]),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
        "streams": len({k[3] for k in ks}),
        "devices": len(r.devices()),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1) + "\n")
