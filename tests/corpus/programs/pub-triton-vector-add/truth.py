"""Truth figures for pub-triton-vector-add (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (Triton tutorial 01 as a script) compiles its add kernel at the first call,
runs a unit test, then benchmarks 3 sizes x 2 providers (triton, torch) with
triton.testing.do_bench. It has no NVTX ranges of its own (only CUB's). Every do_bench
call synchronises the device exactly 3 times (cudaDeviceSynchronize: after its first
call, after the 5-call estimate, after the timed loop) and nothing else in the program
calls cudaDeviceSynchronize: ``device_syncs`` / 3 = ``benchmarks``. Per benchmark:
  * estimate: from the 1st sync's return to the 2nd's;
  * loop: from the 2nd sync's return to the 3rd's (warm-up calls, then the timed calls:
    each a 256 MB L2-clearing ``zero_`` (the FillFunctor<int> kernel of 65536 blocks,
    ``flush_kernels``), an event, the measured call, an event);
  * pause: from the 3rd sync's return to the next benchmark's 1st sync's return (the
    host reads the events' elapsed times and summarises, makes the next inputs and
    runs the next benchmark's first call).

Benchmark window: from the first do_bench's first sync return to the last one's last
sync return (start-up, the JIT compile of add_kernel and the unit test are before it).
Figures of the window (% of it): ``gpu_busy_pct``, ``flush_busy_pct`` (the clearing
kernels); ``loop_time_pct`` / ``loop_idle_pct`` (idle inside the loops: the GPU waiting
for the host's next launch: zero_, event records, the Triton or torch launch);
``estimate_idle_pct``; ``pause_idle_pct``, of which ``compile_idle_pct`` (pause idle
stretches that hold a posix_spawn/waitpid (ptxas) or a cuModuleLoadData call: a kernel
compiled and loaded); ``loop_busy_pct`` (each loop's busy share, in order).
Also: compilation evidence before and in the window (``waitpid_calls``: child-process
waits, ``module_loads``: cuModuleLoadData, by before/in window), cuLibraryLoadData
calls in the window (lazy loading of library kernels) and their time, pageable copies
and cudaMalloc/cudaFree calls in the window, the streams with kernels, the smallest grid of the Triton kernel,
processes with GPU work, the threads that launched GPU work.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, ms, pct, union  # noqa: E402

TRITON_KERNEL = "add_kernel"


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ds = [(a, b) for a, b, *_ in r.api_calls(r"^cudaDeviceSynchronize$")]
    nb = len(ds) // 3
    lo, hi = ds[0][1], ds[3 * nb - 1][1]
    win = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    rows = r.q("select start, end, demangledName, gridX, streamId from "
               "CUPTI_ACTIVITY_KIND_KERNEL order by start")
    ks = [(a, b, r.strings.get(n, str(n)), gx, s) for a, b, n, gx, s in rows]
    flush = iv([(a, b) for a, b, n, gx, _ in ks
                if re.search(r"FillFunctor<int>", n) and gx >= 65536])
    spawn = [(a, b) for a, b, *_ in r.osrt_calls(r"^(posix_spawn|waitpid|fork)$")]
    mload = [(a, b) for a, b, *_ in r.api_calls(r"^cuModuleLoadData")]
    marks = np.array(sorted(a for a, _ in spawn + mload), dtype=np.int64)

    loops = [(ds[3 * i + 1][1], ds[3 * i + 2][1]) for i in range(nb)]
    ests = [(ds[3 * i][1], ds[3 * i + 1][1]) for i in range(nb)]
    pauses = [(ds[3 * i + 2][1], ds[3 * i + 3][1]) for i in range(nb - 1)]

    def idle(a: int, b: int) -> int:
        return (b - a) - clipped_ns(u, a, b)

    compile_idle = 0
    for a, b in pauses:
        for x, y in r.idle_gaps(a, b, dev).tolist():
            if ((marks >= x) & (marks < y)).any():
                compile_idle += y - x
    api = r.api_calls(".", lo, hi)
    tk = [gx for _, _, n, gx, _ in ks if n == TRITON_KERNEL]
    return {
        "device_syncs": len(ds),
        "benchmarks": nb,
        "kernels": len(ks),
        "flush_kernels": len(flush),
        "bench_window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "flush_busy_pct": pct(clipped_ns(flush, lo, hi), win),
        "loop_time_pct": pct(sum(b - a for a, b in loops), win),
        "loop_idle_pct": pct(sum(idle(a, b) for a, b in loops), win),
        "loop_busy_pct": [pct(clipped_ns(u, a, b), b - a) for a, b in loops],
        "loop_ms": [ms(b - a) for a, b in loops],
        "estimate_idle_pct": pct(sum(idle(a, b) for a, b in ests), win),
        "pause_time_pct": pct(sum(b - a for a, b in pauses), win),
        "pause_idle_pct": pct(sum(idle(a, b) for a, b in pauses), win),
        "compile_idle_pct": pct(compile_idle, win),
        "waitpid_calls": {"before_window": sum(1 for a, _ in spawn if a < lo),
                          "in_window": sum(1 for a, _ in spawn if lo <= a < hi)},
        "module_loads": {"before_window": sum(1 for a, _ in mload if a < lo),
                         "in_window": sum(1 for a, _ in mload if lo <= a < hi)},
        "library_loads_in_window": sum(1 for c in api if c[2] == "cuLibraryLoadData"),
        "library_load_ms_in_window": ms(sum(c[1] - c[0] for c in api if c[2] == "cuLibraryLoadData")),
        "pageable_copies_in_window": sum(1 for c in r.memcpys(dev) if lo <= c["start"] < hi
                                         and "Pageable" in (c["src"], c["dst"])),
        "alloc_calls_in_window": sum(1 for c in api if c[2] in ("cudaMalloc", "cudaFree")),
        "triton_kernels": len(tk),
        "triton_grid_min": min(tk) if tk else None,
        "launching_threads": len(r.thread_of_launches()),
        "streams": len({k[4] for k in ks}),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
        "devices": len(r.devices()),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1) + "\n")
