"""Truth figures for pub-cuda-asyncapi (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

NVIDIA's asyncAPI sample: no loop. The program's GPU work is one memset, one 64 MiB
host-to-device copy, one kernel and one 64 MiB device-to-host copy, all on the legacy
default stream; ``iterations`` = 0 (``kernels`` = 1: nothing repeats).

Work window: from the start of the first GPU activity (the memset) to the end of the
last (the D2H copy); there is no steady state beyond it. Figures of the window:
  * ``work_window_ms``, ``gpu_busy_pct`` (union of kernels, copies and memsets, % of the
    window), ``gpu_idle_pct``; ``idle_gaps``: every idle stretch, in order, with its
    length (us) and the GPU activities either side.
  * ``kernel_launch_call_us``: the cudaLaunchKernel call (the kernel's first launch, the
    module loaded lazily by the ``cuLibraryLoadData`` just before it, ``module_load_us``);
    ``launch_call_overlaps_h2d_us``: how much of that call ran while the H2D copy did
    (the call returns only once the copy is done); ``kernel_start_after_h2d_us``: from
    the H2D copy's end to the kernel's start (the GPU idle the lazy load left).
  * ``event_queries``: cudaEventQuery calls (the host's busy-wait: 1 = the GPU was done
    by the first query); ``syncs_in_window``: synchronisation calls starting in it;
    ``allocations_in_window``: cudaMalloc*/cudaFree*/cudaHostAlloc calls starting in it.
  * ``copy_kinds``: the copies' kind and host memory kind; ``kernel_grid_blocks``.
Process figures: ``process_span_ms`` (first to last CUDA API call), the window's share
of it (``work_share_of_process_pct``), ``startup_ms`` (first CUDA call to the first GPU
activity), ``cudaMallocHost_ms`` (the 64 MiB pinned allocation), ``after_work_ms`` (last
GPU activity to the last CUDA call: the CPU check of the results, frees).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, ms, pct, union  # noqa: E402

ALLOC = r"^(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cuMemAlloc\w*|cuMemFree\w*)$"
SYNC = r"^(cuda|cu)(Device|Stream|Event|Ctx)Synchronize$"


def main(path: str) -> dict:
    r = Report(path)
    ops = [(a, b, f"kernel {n}") for a, b, n, *_ in r.kernels()]
    ops += [(m["start"], m["end"], f"{m['kind']} {m['bytes']} B {m['src']}->{m['dst']}")
            for m in r.memcpys()]
    ops += [(a, b, f"memset {n} B") for a, b, n in
            r.q("select start, end, bytes from CUPTI_ACTIVITY_KIND_MEMSET")]
    ops.sort()
    lo, hi = ops[0][0], max(b for _, b, _ in ops)
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    u = union(r.gpu_intervals())
    gaps = []
    for (a0, b0), (a1, _) in zip(u[:-1].tolist(), u[1:].tolist()):
        before = next(n for a, b, n in reversed(ops) if b <= a1 and b == b0)
        after = next(n for a, b, n in ops if a == a1)
        gaps.append({"us": round((a1 - b0) / 1e3, 1), "after": before, "before": after})

    k = r.kernels()[0]
    launch = [c for c in r.launch_calls() if c[4] == k[4]][0]
    h2d = [m for m in r.memcpys() if m["kind"] == "Host-to-Device"][0]
    loads = r.api_calls(r"^(cuLibraryLoad\w*|cuModuleLoad\w*)$")
    calls = r.api_calls()
    grid = r.q("select gridX * gridY * gridZ from CUPTI_ACTIVITY_KIND_KERNEL")
    return {
        "iterations": 0,
        "kernels": len(r.kernels()),
        "kernel_grid_blocks": [g for (g,) in grid],
        "copy_kinds": sorted({f"{m['kind']} {m['src']}->{m['dst']}" for m in r.memcpys()}),
        "work_window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "idle_gaps": gaps,
        "kernel_launch_call_us": round((launch[1] - launch[0]) / 1e3, 1),
        "module_load_us": round(sum(b - a for a, b, *_ in loads if a < launch[0]) / 1e3, 1),
        "launch_call_overlaps_h2d_us": round(
            max(0, min(launch[1], h2d["end"]) - max(launch[0], h2d["start"])) / 1e3, 1),
        "kernel_start_after_h2d_us": round((k[0] - h2d["end"]) / 1e3, 1),
        "event_queries": len(r.api_calls(r"^cudaEventQuery$")),
        "syncs_in_window": len(r.api_calls(SYNC, lo, hi)),
        "allocations_in_window": len(r.api_calls(ALLOC, lo, hi)),
        "process_span_ms": ms(calls[-1][1] - calls[0][0]),
        "work_share_of_process_pct": pct(win, calls[-1][1] - calls[0][0]),
        "startup_ms": ms(lo - calls[0][0]),
        "cudaMallocHost_ms": ms(sum(b - a for a, b, *_ in r.api_calls(r"^cudaMallocHost$"))),
        "after_work_ms": ms(calls[-1][1] - hi),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
