"""Truth figures for pub-hf-generate (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (transformers' run_generation.py: one model.generate of 64 new tokens for 4
sequences, GPT-2 small, eager, fp32) has no NVTX ranges of its own (only CUB's and
cuBLAS's). Tokens are found from the kernels: every forward starts with the position
index (``cache_position``/``arange``), the one ``elementwise_kernel_with_index`` kernel of
a forward; ``tokens`` counts them (the prefill and 63 single-token forwards). Each token
ends with the sampling (one ``distribution_elementwise_grid_stride_kernel``: multinomial,
``multinomial_kernels``) and the stopping check (device-to-pinned copies of 1 byte, each
with a cudaStreamSynchronize).

Per token (from its arange kernel to the next one's, the last to the end of its GPU
work; medians over the steady tokens): ``token_ms_median``, ``token_busy_pct_median``,
``kernels_per_token`` (set of values over the steady tokens), ``syncs_per_token``.

Steady window: from the 3rd token's arange kernel (index 2) to the end of the last
kernel launched before the first device-to-pageable copy after the loop (the tolist()
of the results; the window ends at the last token's work). Figures of the window (% of
it): ``gpu_busy_pct``; ``sync_idle_pct``: idle stretches that begin where a
device-to-host copy ended (within 2 us: the stopping check's .item()-like read, the host
blocked in the sync until it lands), each up to the next GPU work; ``malloc_pct``: the
host time in cudaMalloc/cudaFree calls in the window (the caching allocator growing
under the KV cache's torch.cat), with their count; ``other_idle_pct``: the idle not in
a sync stretch (gaps between launches); ``gaps_over_1ms``: idle stretches over 1 ms.
Also: pageable copies in the window, module loads, syncs and their host time, processes and streams with GPU work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, ms, pct, union  # noqa: E402

SKIP = 2
TOUCH_NS = 2_000


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ks = r.kernels(dev)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    marks = [k[0] for k in ks if k[2] == "elementwise_kernel_with_index"]
    cps = r.memcpys(dev)
    after = [c["start"] for c in cps if c["kind"] == "Device-to-Host" and c["dst"] == "Pageable"
             and c["start"] > marks[-1]]
    stop = min(after) if after else None
    hi = int(max(k[1] for k in ks if stop is None or k[0] < stop))
    lo = marks[SKIP]
    win = hi - lo
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    d2h_ends = np.array(sorted(c["end"] for c in cps if c["kind"] == "Device-to-Host"),
                        dtype=np.int64)
    sync_ns = other_ns = 0
    gaps = r.idle_gaps(lo, hi, dev)
    for a, b in gaps.tolist():
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, side="right")) - 1
        if k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
            sync_ns += b - a
        else:
            other_ns += b - a
    api = r.api_calls(".", lo, hi)
    syncs = [c for c in api if c[2] == "cudaStreamSynchronize"]
    mallocs = [c for c in api if c[2] in ("cudaMalloc", "cudaFree")]
    bounds = marks + [hi]
    per = []
    for a, b in zip(bounds[SKIP:], bounds[SKIP + 1:]):
        per.append((b - a, clipped_ns(u, a, b), int(((starts >= a) & (starts < b)).sum()),
                    sum(1 for c in syncs if a <= c[0] < b)))
    p = np.array(per, dtype=np.int64)
    out = {
        "tokens": len(marks),
        "multinomial_kernels": sum(1 for k in ks if k[2].startswith("distribution_elementwise")),
        "kernels": len(ks),
        "steady_tokens": len(marks) - SKIP,
        "steady_window_ms": ms(win),
        "token_ms_median": ms(float(np.median(p[:, 0]))),
        "token_busy_pct_median": round(float(np.median(100.0 * p[:, 1] / p[:, 0])), 2),
        "kernels_per_token": sorted({int(x) for x in p[:-1, 2]}),
        "syncs_per_token": sorted({int(x) for x in p[:-1, 3]}),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "sync_idle_pct": pct(sync_ns, win),
        "other_idle_pct": pct(other_ns, win),
        "gaps_over_1ms": int(((gaps[:, 1] - gaps[:, 0]) > 1_000_000).sum()),
        "malloc_calls_in_window": len(mallocs),
        "malloc_pct": pct(clipped_ns(iv(mallocs), lo, hi), win),
        "stream_sync_calls_in_window": len(syncs),
        "stream_sync_pct": pct(clipped_ns(iv(syncs), lo, hi), win),
        "pageable_copies_in_window": sum(1 for c in cps if lo <= c["start"] < hi
                                         and "Pageable" in (c["src"], c["dst"])),
        "module_loads_in_window": sum(1 for c in api if c[2].startswith(("cuLibraryLoad", "cuModuleLoad"))),
        "first_token_ms": ms(marks[1] - marks[0]),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
        "streams": len({k[3] for k in ks}),
        "devices": len(r.devices()),
    }
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1) + "\n")
