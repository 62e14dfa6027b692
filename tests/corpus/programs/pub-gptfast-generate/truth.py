"""Truth figures for pub-gptfast-generate (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (gpt-fast generate.py, eager: 2 samples, each a prefill then 23 single-token
decode steps, static KV cache) has no NVTX ranges of its own (only CUB's and cuBLAS's).
Tokens are found from the kernels: every sampled token runs ``exponential_`` (sampling by
exponential noise + argmax), the one ``distribution_elementwise_grid_stride_kernel`` of a
token, and nothing else launches it: ``tokens`` counts them (2 x (1 from the prefill +
23 decode steps)). A token's segment runs from its sampling kernel to the next one's (so
it holds the next forward), the last to the end of the GPU work.

Per token (medians over the steady segments): ``token_ms_median``,
``token_busy_pct_median``; ``kernels_per_token``: the set of kernel counts of the
steady segments; ``first_decode_ms``: the 1st segment (it holds the first decode forward: cuDNN's
first SDPA plan for the decode shape) and the library loads it holds.

Steady window: from the 3rd sampling kernel (index 2) to the end of the last GPU work.
Figures of the window (% of it): ``gpu_busy_pct``; ``sync_idle_pct``: idle stretches
that begin where a device-to-host copy ended or that hold the return of a
cudaDeviceSynchronize/cudaStreamSynchronize (the per-sample timing syncs and tolist()),
each to the next GPU work; ``other_idle_pct``: the rest (gaps between launches);
``gaps_over_1ms``: idle stretches over 1 ms. Also in the window: library/module loads,
cudaMalloc/cudaFree calls, sync calls, pageable copies; processes and streams with GPU
work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, ms, pct, union  # noqa: E402

SKIP = 2
TOUCH_NS = 2_000


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ks = r.kernels(dev)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    marks = [k[0] for k in ks if k[2] == "distribution_elementwise_grid_stride_kernel"]
    hi = int(max(k[1] for k in ks))
    lo = marks[SKIP]
    win = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    cps = r.memcpys(dev)
    d2h_ends = np.array(sorted(c["end"] for c in cps if c["kind"] == "Device-to-Host"),
                        dtype=np.int64)
    api = r.api_calls(".", lo, hi)
    syncs = [c for c in api if c[2] in ("cudaDeviceSynchronize", "cudaStreamSynchronize")]
    sync_ret = np.array(sorted(b for _, b, *_ in syncs), dtype=np.int64)
    gaps = r.idle_gaps(lo, hi, dev)
    sync_ns = other_ns = 0
    for a, b in gaps.tolist():
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
        after_copy = k >= 0 and a - d2h_ends[k] <= TOUCH_NS
        holds_sync = bool(((sync_ret >= a) & (sync_ret < b)).any())
        if after_copy or holds_sync:
            sync_ns += b - a
        else:
            other_ns += b - a
    bounds = marks + [hi]
    per = np.array([(b - a, clipped_ns(u, a, b), int(((starts >= a) & (starts < b)).sum()))
                    for a, b in zip(bounds[SKIP:-1], bounds[SKIP + 1:-1])], dtype=np.int64)
    loads = r.api_calls(r"^(cuLibraryLoad|cuModuleLoad)")
    out = {
        "tokens": len(marks),
        "kernels": len(ks),
        "steady_tokens": len(marks) - SKIP,
        "steady_window_ms": ms(win),
        "token_ms_median": ms(float(np.median(per[:, 0]))),
        "token_busy_pct_median": round(float(np.median(100.0 * per[:, 1] / per[:, 0])), 2),
        "kernels_per_token": sorted({int(x) for x in per[:, 2]}),
        "first_decode_ms": ms(marks[1] - marks[0]),
        "first_decode_library_loads": sum(1 for a, *_ in loads if marks[0] <= a < marks[1]),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "sync_idle_pct": pct(sync_ns, win),
        "other_idle_pct": pct(other_ns, win),
        "gaps_over_1ms": int(((gaps[:, 1] - gaps[:, 0]) > 1_000_000).sum()),
        "idle_in_gaps_under_100us_pct": pct(int(sum(b - a for a, b in gaps.tolist()
                                                    if b - a < 100_000)), win),
        "sync_calls_in_window": len(syncs),
        "library_loads_in_window": sum(1 for a, *_ in loads if lo <= a < hi),
        "alloc_calls_in_window": sum(1 for c in api if c[2] in (
            "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost")),
        "pageable_copies_in_window": sum(1 for c in cps if lo <= c["start"] < hi
                                         and "Pageable" in (c["src"], c["dst"])),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
        "streams": len({k[3] for k in ks}),
        "devices": len(r.devices()),
    }
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1) + "\n")
