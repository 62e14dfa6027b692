"""Truth figures for pub-nanogpt-sample (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (nanoGPT sample.py: 2 samples of 64 new tokens, no KV cache, each token a
full forward over the growing sequence) has no NVTX ranges of its own. Tokens are found
from the kernels: every forward starts with the position index ``torch.arange``, the
one ``elementwise_kernel_with_index`` kernel of a forward, and nothing else launches it:
``tokens`` counts them, ``kernels_per_token`` (set of values) the kernels from one to
the next. Token i of the run is sample i // 64, sequence length i % 64 + 1.

Per token (from its arange kernel to the next one's, the last to the end of the GPU
work): its length, its GPU busy share, its ``cuLibraryLoadData`` calls (cuDNN loading a
kernel binary it has just generated for this sequence length) and the time of the
GPU idle stretches that hold such a call (``setup``: from the embedding kernels to the
first attention kernel, the host builds cuDNN's SDPA plan for the new length, ~42 ms
with no CUDA call, then loads the generated kernel). Summaries per sample
(``sample1_*`` = tokens 0-63, ``sample2_*`` = tokens 64-127; medians).

Steady window: from the 3rd token's arange kernel (index 2) to the end of the last GPU
work. Figures of the window (% of it): ``gpu_busy_pct``; ``setup_idle_pct`` (the idle
stretches holding a cuLibraryLoadData call: the per-length cuDNN setup);
``other_idle_pct`` (the rest: gaps between launches, the tolist/decode between the
samples); ``sample1_time_pct`` (the window's time before token 64). The second sample
alone (tokens 64-127, from its first arange to the end): ``sample2_window_ms``,
``sample2_busy_pct``, ``sample2_idle_pct`` (its gaps between launches).
Also, in the window: cudaStreamSynchronize calls and their host time (% of window),
pageable copies (count), cudaMalloc/cudaFree calls, module loads, processes and
streams with GPU work.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, ms, pct, union  # noqa: E402

SKIP = 2
PER_SAMPLE = 64


def main(path: str) -> dict:
    r = Report(path)
    dev = r.devices()[0]
    ks = r.kernels(dev)
    starts = np.array([k[0] for k in ks], dtype=np.int64)
    end_all = int(max(k[1] for k in ks))
    marks = [k[0] for k in ks if k[2] == "elementwise_kernel_with_index"]
    bounds = marks + [end_all]
    u = union(r.gpu_intervals(dev))
    loads = np.array(sorted(a for a, *_ in r.api_calls(r"^cuLibraryLoadData$")),
                     dtype=np.int64)
    per = []
    for a, b in zip(bounds, bounds[1:]):
        gaps = r.idle_gaps(a, b, dev)
        setup = sum(int(y - x) for x, y in gaps.tolist()
                    if ((loads >= x) & (loads < y)).any())
        per.append({"ms": b - a, "busy": clipped_ns(u, a, b), "setup": setup,
                    "loads": int(((loads >= a) & (loads < b)).sum()),
                    "kernels": int(((starts >= a) & (starts < b)).sum())})
    out: dict = {"tokens": len(marks), "kernels": len(ks),
                 "kernels_per_token": sorted({p["kernels"] for p in per})}

    def summary(ps: list[dict]) -> dict:
        return {"tokens": len(ps),
                "token_ms_median": ms(float(np.median([p["ms"] for p in ps]))),
                "busy_pct_median": round(float(np.median(
                    [100.0 * p["busy"] / p["ms"] for p in ps])), 2),
                "setup_ms_median": ms(float(np.median([p["setup"] for p in ps]))),
                "tokens_with_library_load": sum(1 for p in ps if p["loads"]),
                "total_ms": ms(sum(p["ms"] for p in ps))}

    out["sample1"] = summary(per[:PER_SAMPLE])
    out["sample2"] = summary(per[PER_SAMPLE:])

    lo, hi = marks[SKIP], end_all
    win = hi - lo
    busy = clipped_ns(u, lo, hi)
    setup = sum(p["setup"] for p, a in zip(per, bounds) if a >= lo)
    s2 = bounds[PER_SAMPLE]
    s2_busy = clipped_ns(u, s2, hi)
    api = r.api_calls(".", lo, hi)
    syncs = [c for c in api if c[2] == "cudaStreamSynchronize"]
    cps = [c for c in r.memcpys(dev) if lo <= c["start"] < hi]
    out |= {
        "steady_tokens": len(marks) - SKIP,
        "steady_window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "setup_idle_pct": pct(setup, win),
        "other_idle_pct": pct(win - busy - setup, win),
        "sample1_time_pct": pct(s2 - lo, win),
        "sample2_window_ms": ms(hi - s2),
        "sample2_busy_pct": pct(s2_busy, hi - s2),
        "sample2_idle_pct": pct(hi - s2 - s2_busy, hi - s2),
        "library_loads_in_window": sum(1 for c in api if c[2] == "cuLibraryLoadData"),
        "module_loads_in_window": sum(1 for c in api if c[2].startswith("cuModuleLoad")),
        "stream_sync_calls_in_window": len(syncs),
        "stream_sync_pct": pct(clipped_ns(iv(syncs), lo, hi), win),
        "pageable_copies_in_window": sum(1 for c in cps if "Pageable" in (c["src"], c["dst"])),
        "alloc_calls_in_window": sum(1 for c in api if c[2] in (
            "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost")),
        "processes_with_gpu_work": len(r.processes_with_gpu_work()),
        "streams": len({k[3] for k in ks}),
        "devices": len(r.devices()),
    }
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1) + "\n")
