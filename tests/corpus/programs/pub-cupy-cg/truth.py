"""Truth figures for pub-cupy-cg (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

CuPy's examples/cg/cg.py with --max-iter 1000. Three trials; each builds a 2000x2000
float64 SPD system on the host (NumPy; an integer ``A @ A.T``), runs fit() with NumPy (the
CPU fit, GPU idle), uploads A and b (cupy.asarray: 32 MB and 16 kB host-to-device copies
from CuPy's pinned staging buffer), runs the same fit() with CuPy (the GPU fit), then
cupy.asnumpy(x) (a 16 kB device-to-host copy). One process, one CUDA thread, legacy
default stream only; no NVTX ranges of the program's own (only CCCL's
``cub::DeviceReduce::Sum`` around each CUB sum and cuBLAS's ``cublasCreate_v2``).

Timer syncs: the cudaStreamSynchronize calls whose previous CUDA call on the thread
(cudaStreamIsCapturing and cuKernelGetName skipped) is not a cudaMemcpyAsync: the
``timer()`` brackets, four per trial (CPU fit open/close, GPU fit open/close; 12 in all).
  * ``cpu_fits[i].timer_s``: the CPU fit's closing sync's end - opening sync's end (what
    cg.py's timer measures); ``open_sync_ms``: the opening sync call (trial 1: context
    creation). The trace cannot see inside the NumPy fit (no CPU sampling).
  * ``gpu_fits[i].timer_ms``: the same for the GPU fit; ``close_sync_us``: its closing
    sync call; ``gpu_done_before_close_sync``: the window's end precedes that call.
GPU fit window: from the start of the first GPU op after the opening sync's end (the
``zeros_like`` memset) to the end of the last GPU op before the closing sync's end.

Figures of a window (each GPU fit, ``steady``, ``fit1_post_compile``):
  * ``window_ms``; ``iterations``: the 1-byte device-to-host copies starting in it (the
    ``if xp.linalg.norm(r1) < tol`` read of each iteration; no fit converged: 1000 each);
  * ``kernels``; ``kernels_per_iteration``: median (and min, max) of the number of kernels
    starting between two consecutive reads' starts; ``kernels_per_iteration_by_name``;
  * ``iteration_us_median``: median of the differences of consecutive reads' starts (for
    ``steady``, one value per fit: the fits run at different paces);
  * ``gpu_busy_pct``: union of kernels, copies and memsets in the window, % of it;
    ``gpu_idle_pct`` the rest, split three ways (each ``*_pct`` of the window, with the
    number of stretches ``*_gaps`` and their median ``*_gap_us_median``):
      - ``first_use``: idle stretches in which a cuModuleLoad*/cuLibraryLoad*/
        cuLibraryGetKernel call starts (cuBLAS's lazy load, CuPy's NVRTC compile + load,
        CUB's lazy kernel fetch);
      - ``after_read``: stretches that begin at the end of a 1-byte read (within 2 us) up
        to the next GPU op: the host returns from the blocking read, compares in Python,
        and dispatches and launches the next op;
      - ``launch``: all other stretches: between ops launched back to back (the host's
        Python/CuPy dispatch of each op); ``launch_gap_hist`` counts them under 10, 50,
        100 us and at or above 100 us; ``launch_gap_longest_ms``.
  * ``kernel_us_median`` by kernel name (``kernel`` is cuBLAS's gemvx, the two
    ``xp.dot(A, p)``; DeviceReduceSingleTileKernel is CUB's sum in the ``inner``s and the
    norm; the others are CuPy elementwise kernels); ``kernel_us_sum_per_iteration``;
  * ``launch_call_us_median``: cuLaunchKernel (CuPy's kernels) and cudaLaunchKernel (CUB,
    cuBLAS) calls starting in the window;
  * ``launch_after_prev_end_pct``: of the window's kernels after its first, % whose launch
    call (same correlationId) began after the previous GPU op had ended (the GPU waited
    for the host); ``queue_delay_us_median``: kernel start - its launch call's start;
  * ``host_per_iteration_us``: medians of the read's cudaMemcpyAsync call (destination
    pageable: the call returns after the copy), of the cudaStreamSynchronize after it, and
    their sum; ``calls_per_iteration``: CUDA calls starting in the window by name /
    iterations; ``module_loads``: load calls (as in first_use) starting in the window.
Steady window (``steady``): GPU fits 2 and 3, their two windows summed (no load, compile
or allocation call in them). ``fit1_post_compile``: fit 1 from the first GPU op after its
last cuModuleLoadData (the ``less`` kernel) to its end: compile-free, but slower.

First use (``first_use``): ``calls``: every load/unload call by name (count, total ms,
``in_fits``: the GPU fits they start in, 0 = outside any); ``gaps``: fit 1's first_use
stretches (start s, ms, the load calls in them, the next kernel); ``gap_s``: their sum;
``cublas_create_ms``: the NVTX range cublasCreate_v2; ``osrt_in_compile_gaps``: the main
thread's OS runtime calls (the capture keeps those of 10 us or more) in the stretches
holding a cuModuleLoadData, by name (file I/O of NVRTC and CuPy's kernel cache);
``child_process_calls``: fork/exec/spawn/wait calls in fit 1 (an external compiler).

Program (``program``): ``report_span_s`` (ANALYSIS_DETAILS duration), ``gpu_span_s``
(first to last GPU op), ``gpu_busy_ms`` and ``gpu_busy_pct`` of the span; ``host_gaps``:
the GPU-idle stretches of 1 s or more (report start to the first GPU op; between GPU
fits), each with the CPU fit in it (``cpu_fit_s``) and the rest (``other_host_s``: the
previous trial's check, building A and b, and before trial 1 start-up and imports);
``cpu_fit_pct``, ``gpu_fit_pct``, ``other_pct``: CPU fit timers, GPU fit timers, and the
rest, % of the span; ``context_sync_ms``: the first sync (CUDA context creation).
Copies: ``copies``, each copy other than the 1-byte reads in time order (direction,
bytes, source and destination memory kind from ENUM_CUDA_MEM_KIND, us, GB/s); ``reads``:
count, bytes, kind, median us. ``sync_calls``: counts of the synchronizing calls;
``sync_rows``: CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows by their syncType's label in
ENUM_CUPTI_SYNC_TYPE and the API call with the same correlationId.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, ms, pct, union  # noqa: E402

TOUCH_NS = 2_000
LOAD = r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cuLibraryGetKernel)$"
SKIP_BACK = ("cudaStreamIsCapturing", "cuKernelGetName")
GAP_KINDS = ("first_use", "after_read", "launch")


def us(ns: float) -> float:
    return round(float(ns) / 1e3, 2)


def med(xs) -> float:
    return us(np.median(xs)) if len(xs) else 0.0


def main(path: str) -> dict:
    r = Report(path)
    ks = r.kernels()
    kst = np.array([k[0] for k in ks], dtype=np.int64)
    cps = r.memcpys()
    gi = r.gpu_intervals()
    u = union(gi)
    api = r.api_calls()
    launches = r.launch_calls()
    call_of = {c: (a, b) for a, b, _, _, c in launches}
    loads = r.api_calls(LOAD)
    load_st = np.array(sorted(a for a, *_ in loads), dtype=np.int64)
    assert len({g for *_, g in api}) == 1  # one CUDA thread: correlation ids are unique

    # -- the timer's syncs ------------------------------------------------------------------
    timer, prev = [], None
    for a, b, n, _ in api:
        if n == "cudaStreamSynchronize" and prev != "cudaMemcpyAsync":
            timer.append((a, b))
        if n not in SKIP_BACK:
            prev = n
    assert len(timer) == 12, len(timer)
    trials = [timer[i:i + 4] for i in range(0, 12, 4)]

    reads = [m for m in cps if m["kind"] == "Device-to-Host" and m["bytes"] == 1]
    rst = np.array(sorted(m["start"] for m in reads), dtype=np.int64)
    rend = np.array(sorted(m["end"] for m in reads), dtype=np.int64)
    gpu_starts, gpu_ends = np.sort(gi[:, 0]), np.sort(gi[:, 1])

    def classify(lo: int, hi: int) -> dict[str, list[int]]:
        cls: dict[str, list[int]] = {c: [] for c in GAP_KINDS}
        for a, b in r.idle_gaps(lo, hi).tolist():
            j = int(np.searchsorted(load_st, a))
            k = int(np.searchsorted(rend, a + TOUCH_NS, "right")) - 1
            if j < len(load_st) and load_st[j] < b:
                cls["first_use"].append(b - a)
            elif k >= 0 and a - rend[k] <= TOUCH_NS:
                cls["after_read"].append(b - a)
            else:
                cls["launch"].append(b - a)
        return cls

    def stats(wins: list[tuple[int, int]]) -> dict:
        def inside(a: int) -> bool:
            return any(lo <= a < hi for lo, hi in wins)

        win = sum(hi - lo for lo, hi in wins)
        busy = sum(r.busy_ns(lo, hi) for lo, hi in wins)
        gaps: dict[str, list[int]] = {c: [] for c in GAP_KINDS}
        per_it, periods, kin = [], [], []
        for lo, hi in wins:
            for c, xs in classify(lo, hi).items():
                gaps[c] += xs
            rs = rst[(rst >= lo) & (rst < hi)]
            per_it += [int(np.searchsorted(kst, y) - np.searchsorted(kst, x))
                       for x, y in zip(rs, rs[1:])]
            periods.append(np.diff(rs))
            kin += ks[int(np.searchsorted(kst, lo)):int(np.searchsorted(kst, hi))]
        n_it = int(sum(((rst >= lo) & (rst < hi)).sum() for lo, hi in wins))
        lg = np.array(gaps["launch"], dtype=np.int64)
        by_name = defaultdict(list)
        for a, b, n, *_ in kin:
            by_name[n].append(b - a)
        after, qdel = 0, []
        for i, (a, b, n, s, c) in enumerate(kin):
            la = call_of[c][0]
            qdel.append(a - la)
            if i:  # the previous GPU op (kernel, copy or memset) ended at gpu_ends[j]
                j = int(np.searchsorted(gpu_ends, a, "right")) - 1
                after += int(la >= gpu_ends[j])
        lcalls = defaultdict(list)
        for a, b, n, _, c in launches:
            if inside(a):
                lcalls[n].append(b - a)
        calls = Counter(n for a, b, n, _ in api if inside(a))
        mc = [b - a for a, b, n, _ in api if n == "cudaMemcpyAsync" and inside(a)]
        ss = [b - a for a, b, n, _ in api if n == "cudaStreamSynchronize" and inside(a)
              and any(lo <= b <= hi for lo, hi in wins)]
        out = {
            "window_ms": ms(win),
            "iterations": n_it,
            "kernels": len(kin),
            "kernels_per_iteration": float(np.median(per_it)),
            "kernels_per_iteration_min_max": [min(per_it), max(per_it)],
            "kernels_per_iteration_by_name": {n: round(len(v) / n_it, 3)
                                              for n, v in sorted(by_name.items())},
            "iteration_us_median": [med(p) for p in periods] if len(wins) > 1
            else med(periods[0]),
            "gpu_busy_pct": pct(busy, win),
            "gpu_idle_pct": pct(win - busy, win),
            "launch_gap_hist": {"lt10us": int((lg < 10_000).sum()),
                                "lt50us": int((lg < 50_000).sum()),
                                "lt100us": int((lg < 100_000).sum()),
                                "ge100us": int((lg >= 100_000).sum())},
            "launch_gap_longest_ms": ms(lg.max()) if len(lg) else 0.0,
            "kernel_us_median": {n: med(v) for n, v in sorted(by_name.items())},
            "kernel_us_sum_per_iteration": us(sum(b - a for a, b, *_ in kin) / n_it),
            "launch_call_us_median": {n: med(v) for n, v in sorted(lcalls.items())},
            "launch_after_prev_end_pct": pct(after, len(kin) - 1),
            "queue_delay_us_median": med(qdel),
            "host_per_iteration_us": {"read_memcpy_call": med(mc), "stream_sync_call": med(ss),
                                      "sum": round(med(mc) + med(ss), 2)},
            "calls_per_iteration": {n: round(v / n_it, 3) for n, v in sorted(calls.items())},
            "module_loads": int(sum(inside(a) for a in load_st.tolist())),
            "allocation_calls": sum(1 for a, b, n, _ in api if inside(a) and
                                    n.startswith(("cudaMalloc", "cudaFree", "cudaHostAlloc"))),
        }
        for c, xs in gaps.items():
            out[f"{c}_pct"] = pct(sum(xs), win)
            out[f"{c}_gaps"] = len(xs)
            out[f"{c}_gap_us_median"] = med(xs)
        return out

    gpu_fits, cpu_fits, windows = [], [], []
    for (c0, c1), (_, c3), (_, g1), (g2, g3) in trials:
        cpu_fits.append({"timer_s": round((c3 - c1) / 1e9, 3), "open_sync_ms": ms(c1 - c0)})
        lo = int(gpu_starts[np.searchsorted(gpu_starts, g1)])
        hi = int(gpu_ends[np.searchsorted(gpu_ends, g3, "right") - 1])
        windows.append((lo, hi))
        f = {"timer_ms": ms(g3 - g1), "start_s": round(lo / 1e9, 3),
             "close_sync_us": us(g3 - g2), "gpu_done_before_close_sync": bool(hi <= g2)}
        f.update(stats([(lo, hi)]))
        gpu_fits.append(f)

    steady = {"fits": [2, 3]}
    steady.update(stats(windows[1:]))
    last_compile = max(a for a, b, n, _ in loads
                       if n == "cuModuleLoadData" and windows[0][0] <= a < windows[0][1])
    pc_lo = int(gpu_starts[np.searchsorted(gpu_starts, last_compile)])
    fit1_post = {"start_s": round(pc_lo / 1e9, 3)}
    fit1_post.update(stats([(pc_lo, windows[0][1])]))

    # -- first use ------------------------------------------------------------------------
    def fit_of(a: int) -> int:
        return next((i + 1 for i, (lo, hi) in enumerate(windows) if lo <= a < hi), 0)

    tot = defaultdict(lambda: [0, 0, set()])
    for a, b, n, _ in r.api_calls(r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cuLibraryGetKernel"
                                  r"|cuModuleUnload\w*|cuLibraryUnload\w*)$"):
        tot[n][0] += 1
        tot[n][1] += b - a
        tot[n][2].add(fit_of(a))
    fu_gaps, compile_iv = [], []
    for a, b in r.idle_gaps(*windows[0]).tolist():
        inn = Counter(n for x, y, n, _ in loads if a <= x < b)
        if not inn:
            continue
        nxt = ks[int(np.searchsorted(kst, b))][2]
        fu_gaps.append({"start_s": round(a / 1e9, 3), "ms": ms(b - a),
                        "loads": dict(sorted(inn.items())), "next_kernel": nxt})
        if "cuModuleLoadData" in inn:
            compile_iv.append((a, b))
    main_tid = api[0][3]
    osrt = Counter(n for a, b, n, g in r.osrt_calls()
                   if g == main_tid and any(x <= a < y for x, y in compile_iv))
    cre = r.ranges(r"^cublasCreate")
    first_use = {
        "calls": {n: {"count": v[0], "ms": ms(v[1]), "in_fits": sorted(v[2])}
                  for n, v in sorted(tot.items())},
        "gaps": fu_gaps,
        "gap_s": round(sum(g["ms"] for g in fu_gaps) / 1e3, 3),
        "compile_gaps": len(compile_iv),
        "compile_gap_ms_median": ms(np.median([y - x for x, y in compile_iv])),
        "cublas_create_ms": ms(cre[0].ns) if cre else None,
        "osrt_in_compile_gaps": dict(sorted(osrt.items())),
        "child_process_calls": len(r.osrt_calls(
            r"^(fork|vfork|clone\w*|posix_spawn\w*|exec\w*|waitpid|wait4|system|popen)$",
            *windows[0])),
    }

    # -- program --------------------------------------------------------------------------
    t0, _, span = r.q("select startTime, stopTime, duration from ANALYSIS_DETAILS")[0]
    edges = [(t0, int(u[0, 0]))] + [(int(u[i, 1]), int(u[i + 1, 0])) for i in range(len(u) - 1)
                                    if u[i + 1, 0] - u[i, 1] >= 1_000_000_000]
    assert len(edges) == 3
    host_gaps = [{"from_s": round(a / 1e9, 3), "s": round((b - a) / 1e9, 3),
                  "cpu_fit_s": cpu_fits[k]["timer_s"],
                  "other_host_s": round((b - a) / 1e9 - cpu_fits[k]["timer_s"], 3)}
                 for k, (a, b) in enumerate(edges)]
    busy_all = int((u[:, 1] - u[:, 0]).sum())
    cpu_tot = sum(c3 - c1 for (_, c1), (_, c3), *_ in trials)
    gpu_tot = sum(g3 - g1 for _, _, (_, g1), (_, g3) in trials)
    program = {
        "report_span_s": round(span / 1e9, 3),
        "gpu_span_s": round((int(u[-1, 1]) - int(u[0, 0])) / 1e9, 3),
        "gpu_busy_ms": ms(busy_all),
        "gpu_busy_pct": pct(busy_all, span),
        "host_gaps": host_gaps,
        "cpu_fit_pct": pct(cpu_tot, span),
        "gpu_fit_pct": pct(gpu_tot, span),
        "other_pct": pct(span - cpu_tot - gpu_tot, span),
        "context_sync_ms": ms(trials[0][0][1] - trials[0][0][0]),
        "kernels_total": len(ks),
    }

    # -- copies and syncs -------------------------------------------------------------------
    copies = [{"dir": m["kind"], "bytes": m["bytes"], "src": m["src"], "dst": m["dst"],
               "fit": fit_of(m["start"]), "us": us(m["end"] - m["start"]),
               "GBps": round(m["bytes"] / max(m["end"] - m["start"], 1), 2)}
              for m in cps if m["bytes"] != 1]
    read_info = {"count": len(reads), "bytes": sorted({m["bytes"] for m in reads}),
                 "kind": sorted({f'{m["kind"]} {m["src"]}->{m["dst"]}' for m in reads}),
                 "us_median": med([m["end"] - m["start"] for m in reads]),
                 "per_fit": [int(((rst >= lo) & (rst < hi)).sum()) for lo, hi in windows]}
    stype = r.enum("ENUM_CUPTI_SYNC_TYPE")
    names = {c: re.sub(r"_v\d+$", "", r.strings.get(n, str(n)))
             for c, n in r.q("select correlationId, nameId from CUPTI_ACTIVITY_KIND_RUNTIME")}
    sync_rows = Counter(f"{stype.get(t, t)} <- {names.get(c, '?')}" for t, c in r.q(
        "select syncType, correlationId from CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"))
    counts = Counter(n for *_, n, _ in api)
    return {
        "gpu_fits": gpu_fits,
        "cpu_fits": cpu_fits,
        "steady": steady,
        "fit1_post_compile": fit1_post,
        "first_use": first_use,
        "program": program,
        "copies": copies,
        "reads": read_info,
        "sync_rows": dict(sorted(sync_rows.items())),
        "sync_calls": {n: counts[n] for n in sorted(counts)
                       if "Synchronize" in n or n.startswith(("cudaMemcpy", "cudaEventQuery"))},
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
