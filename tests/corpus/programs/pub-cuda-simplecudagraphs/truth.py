"""Truth figures for pub-cuda-simplecudagraphs (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

NVIDIA's simpleCudaGraphs sample. The capture traces CUDA graphs at graph level
(CUPTI_ACTIVITY_KIND_GRAPH_TRACE): each execution is one row, its nodes (the 64 MiB H2D
copy, memsets, the reduce kernels, the 8-byte D2H copy, the host node) are not listed
(``kernel_rows`` = 0). Iterations: the graph executions (``graph_executions``, by
graphId in ``executions_by_graph``: 4 executable graphs, 3 launches each).

Window: from the first execution's start to the last one's end (all GPU work of the
program). Figures of it: ``window_ms``, ``gpu_busy_pct`` (union of the executions and
any other GPU activity), ``gpu_idle_pct``, ``largest_gap_us`` and where it falls
(``largest_gap_after_execution``: how many executions precede it: the host builds and
instantiates the stream-captured graphs there), ``gaps_over_50us``.
``execution_ms``: first, median and max execution; ``graph_launch_call_ms_median``: the
host's time in one cudaGraphLaunch (the launches block the host, the GPU stays busy);
``calls_in_window``: stream synchronisations, allocations (cudaMalloc/cudaFree/
cudaHostAlloc) and module loads starting in the window; ``launching_threads``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, ms, pct  # noqa: E402


def main(path: str) -> dict:
    r = Report(path)
    ex = r.graph_launches()
    lo, hi = ex[0][0], ex[-1][1]
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    lens = gaps[:, 1] - gaps[:, 0]
    g = int(np.argmax(lens))
    dur = [b - a for a, b, _ in ex]
    launches = r.api_calls(r"^cudaGraphLaunch$")
    return {
        "kernel_rows": len(r.kernels()),
        "graph_executions": len(ex),
        "executions_by_graph": {str(k): v for k, v in sorted(Counter(i for *_, i in ex).items())},
        "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "largest_gap_us": round(float(lens[g]) / 1e3, 1),
        "largest_gap_after_execution": sum(1 for a, *_ in ex if a < gaps[g, 0]),
        "gaps_over_50us": int((lens > 50_000).sum()),
        "execution_ms": {"first": ms(dur[0]), "median": ms(float(np.median(dur))),
                         "max": ms(max(dur))},
        "graph_launch_call_ms_median": ms(float(np.median([b - a for a, b, *_ in launches]))),
        "calls_in_window": {
            "sync": len(r.api_calls(r"Synchronize$", lo, hi)),
            "allocation": len(r.api_calls(r"^(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc)$",
                                          lo, hi)),
            "module_load": len(r.api_calls(r"^(cuLibraryLoad\w*|cuModuleLoad\w*)$", lo, hi))},
        "launching_threads": len({gt & THREAD_MASK for *_, gt in launches}),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
