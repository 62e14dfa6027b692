"""Truth figures for pub-cuda-simplestreams (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

NVIDIA's simpleStreams sample (--sync_method=4 --use_generic_memory: 100 repetitions).
Its phases, read from the kernels (all ``init_array``) and copies:
  * start-up: one timed 64 MiB D2H copy and one timed kernel (the first kernel);
  * the non-streamed loop: the kernels on the stream of the second kernel (the legacy
    default stream), each followed by a synchronous 64 MiB ``cudaMemcpy`` D2H
    (``nonstreamed_reps``);
  * the streamed loop: the kernels on the other streams after it, 4 a repetition, each
    stream's 16 MiB cudaMemcpyAsync D2H queued after the 4 kernels
    (``streamed_reps`` = kernels / 4).
``iterations_candidates``: 100 repetitions of each loop (200 in all), 501 kernels.

Steady window: from the first non-streamed kernel's start to the end of the last GPU
activity (both loops; the first timed copy and kernel are start-up). Figures of it and
of each loop (``nonstreamed``, ``streamed``): ``window_ms``, ``gpu_busy_pct``.
  * ``sync_wait_pct``: the GPU idle stretches that begin where the D2H copy of a
    synchronous ``cudaMemcpy`` call (joined on correlationId) ends (within 2 us: the
    host wakes from the blocking-sync wait, returns and launches the next kernel) up to
    the next GPU activity, summed, % of the window (the stretch after the loop's last
    copy is ``between_loops`` instead); ``sync_gap_us_median``;
    ``idle_after_memcpy_return_pct``: the narrower reading, from each cudaMemcpy call's
    return to the next GPU activity (``memcpy_return_lag_us_median``: from the copy's
    end to the call's return, the blocking-sync wake-up).
  * ``between_loops_ms``: the idle between the loops (the host fills the 64 MiB buffer
    with memset() and calls cudaMemset), ``between_loops_pct`` of the window;
    ``other_idle_pct``: the rest of the idle.
  * ``copy_pct`` / ``kernel_pct``: the union of copies / kernels, % of the window (the
    D2H copy engine is the busy resource); ``streamed_kernel_copy_overlap_pct``: in the
    streamed loop, the kernel time that ran while a copy did (the streams overlap).
  * ``d2h_dst``: host memory kind of the loops' copies; ``min_grid_blocks``;
    ``calls_in_window``: allocation / module-load calls starting in it (expect none);
    ``memcpy_call_ms_median``: one synchronous cudaMemcpy (the host blocked in it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, ms, overlap_ns, pct, union  # noqa: E402

TOUCH_NS = 2_000
ALLOC = r"^(cudaMalloc\w*|cudaFree\w*|cudaHostAlloc|cudaHostRegister|cudaHostUnregister)$"
LOAD = r"^(cuLibraryLoad\w*|cuModuleLoad\w*)$"


def figures(r: Report, lo: int, hi: int, d2h_ends: np.ndarray, u: np.ndarray,
            sync_hi: int) -> dict:
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    sync, lens = [], []
    for a, b in zip(u[:-1, 1].tolist(), u[1:, 0].tolist()):
        if b <= lo or a >= min(hi, sync_hi):
            continue
        k = int(np.searchsorted(d2h_ends, a + TOUCH_NS, "right")) - 1
        if k >= 0 and a - d2h_ends[k] <= TOUCH_NS:
            sync.append((a, b))
            lens.append(b - a)
    return {"window_ms": ms(win), "gpu_busy_pct": pct(busy, win),
            "gpu_idle_pct": pct(win - busy, win),
            "sync_wait_pct": pct(clipped_ns(iv(sync), lo, hi), win) if sync else 0.0,
            "sync_gaps": len(sync),
            "sync_gap_us_median": round(float(np.median(lens)) / 1e3, 1) if lens else None}


def main(path: str) -> dict:
    r = Report(path)
    ks = r.kernels()
    legacy = ks[1][3]
    ns = [k for k in ks[1:] if k[3] == legacy]
    st = [k for k in ks[1:] if k[3] != legacy and k[0] > ns[-1][0]]
    cps = r.memcpys()
    d2h = [m for m in cps if m["kind"] == "Device-to-Host"]
    sync_corr = {c for *_, c in r.q("select start, correlationId from "
                                    "CUPTI_ACTIVITY_KIND_RUNTIME where nameId in (select id "
                                    "from StringIds where value like 'cudaMemcpy\\_v%' "
                                    "escape '\\')")}
    sync_d2h = [m for m in d2h if m["corr"] in sync_corr]
    d2h_ends = np.array(sorted(m["end"] for m in sync_d2h), dtype=np.int64)
    u = union(r.gpu_intervals())
    lo, hi = ns[0][0], int(u[-1, 1])
    ns_hi = max(m["end"] for m in sync_d2h)
    st_lo = st[0][0]
    out: dict = {"kernels": len(ks), "nonstreamed_reps": len(ns), "streamed_reps": len(st) // 4,
                 "iterations_candidates": [len(ns), len(st) // 4, len(ns) + len(st) // 4]}
    out["steady"] = figures(r, lo, hi, d2h_ends, u, ns_hi)
    out["nonstreamed"] = figures(r, lo, ns_hi, d2h_ends, u, ns_hi)
    out["streamed"] = figures(r, st_lo, hi, d2h_ends, u, ns_hi)
    win = hi - lo

    # narrower reading: from each synchronous cudaMemcpy's return to the next GPU work
    starts = u[:, 0]
    after_ret, lags = 0, []
    memcpy_calls = [(a, b) for a, b, *_ in r.api_calls(r"^cudaMemcpy$", lo, hi)]
    for a, b in memcpy_calls[:-1]:
        j = int(np.searchsorted(starts, b, "left"))
        nxt = min(int(starts[j]), hi) if j < len(starts) else hi
        after_ret += max(0, nxt - b)
        k = int(np.searchsorted(d2h_ends, b, "right")) - 1
        if k >= 0 and d2h_ends[k] >= a:
            lags.append(b - int(d2h_ends[k]))
    out["steady"]["idle_after_memcpy_return_pct"] = pct(after_ret, win)
    out["memcpy_return_lag_us_median"] = round(float(np.median(lags)) / 1e3, 1)
    out["memcpy_call_ms_median"] = ms(float(np.median([b - a for a, b in memcpy_calls])))
    gaps = r.idle_gaps(lo, hi)
    between = [(a, b) for a, b in gaps.tolist() if a >= ns_hi and b <= st_lo + 1]
    between_ns = sum(b - a for a, b in between)
    out["between_loops_ms"] = ms(between_ns)
    out["between_loops_pct"] = pct(between_ns, win)
    out["other_idle_pct"] = round(out["steady"]["gpu_idle_pct"] - out["steady"]["sync_wait_pct"]
                                  - out["between_loops_pct"], 2)
    kiv = iv([(a, b) for a, b, *_ in ks])
    civ = iv([(m["start"], m["end"]) for m in cps])
    out["copy_pct"] = pct(clipped_ns(civ, lo, hi), win)
    out["kernel_pct"] = pct(clipped_ns(kiv, lo, hi), win)
    st_k = iv([(a, b) for a, b, *_ in st])
    out["streamed_kernel_copy_overlap_pct"] = pct(overlap_ns(st_k, civ, st_lo, hi),
                                                  clipped_ns(st_k, st_lo, hi))
    out["d2h_dst"] = sorted({m["dst"] for m in d2h if lo <= m["start"] < hi})
    out["min_grid_blocks"] = r.q("select min(gridX * gridY * gridZ) from "
                                 "CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    out["calls_in_window"] = {"allocation": len(r.api_calls(ALLOC, lo, hi)),
                              "module_load": len(r.api_calls(LOAD, lo, hi))}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
