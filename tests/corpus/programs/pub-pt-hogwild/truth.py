"""Truth figures for pub-pt-hogwild (plain sqlite3/numpy through truthlib, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

The program (pytorch/examples mnist_hogwild, --cuda --epochs 1) has no NVTX ranges. The
main process puts the CNN on the GPU, spawns two training processes that share it (CUDA
IPC) and train one epoch each (200 batches of 64) at the same time on the one GPU, joins
them, then runs the test pass itself (upstream passes the training kwargs to the test
loader, so the test pass runs 157 batches of 64, not 10 of 1000). Every DataLoader has one
worker process and a pin-memory thread.

Times: integer ns of the session clock; ``*_s`` figures are seconds after ``t0``, the
first GPU activity (kernel, copy or memset) of the report. A process's "ops" are its
kernels, copies and memsets (CUPTI rows whose globalPid is that process); its "busy" time
is the union of its ops. Percentages are of the window they are named after.

Processes and steps
* ``processes_with_gpu_work``: pids with any GPU op; ``per_process[pid]``: ``kernels``,
  ``copies``, ``memsets``, ``gpu_busy_ms`` (union of its ops, whole report),
  ``first_gpu_s`` / ``last_gpu_s`` (its first op start / last op end), ``first_cuda_call_s``
  / ``last_cuda_call_s`` (its CUDA runtime/driver calls), ``role``: ``train`` for a
  process that runs the optimizer (``multi_tensor_apply_kernel``: SGD's foreach path),
  else ``main``; ``training_processes``: how many have role train; ``t0_ns``: t0.
* A training step: from the start of one of the process's batch uploads (host-to-device
  copy of 200,704 B = 64x1x28x28 float32) to the start of its next one; the last step is
  left out of every step statistic (no end mark). ``steps``: uploads of the process;
  ``steps_with_backward``: steps whose segment holds an ``nll_loss_backward`` kernel;
  ``first_step_ms``: step 0 (cold: cuDNN/cuBLAS modules loaded lazily);
  ``first_upload_s`` / ``last_upload_s``; ``step_ms_median_all_but_first``: median over
  steps 1.. of the whole run (alone and shared alike).
* ``concurrent_window``: [lo, hi) with lo = the 3rd upload (index 2) of the training
  process that starts later, hi = the last upload of the training process that finishes
  first (its last step left out): both processes train in steady state throughout.
  ``steps_in_window`` / ``step_ms_median`` / ``step_ms_p90`` / ``kernels_per_step``
  (median kernels starting in a step) over the steps lying wholly inside it.

Concurrent window (``window``)
* ``gpu_busy_pct``: union of every process's ops; ``busy_pct[pid]``: union of that
  process's ops; ``sum_over_union``: sum of the per-process busy over the union busy (1.0
  = the processes' work never overlaps); ``kernel_overlap_pct``: time when kernels of both
  training processes run at once (``kernel_overlap_ns`` too); ``op_overlap_us``: the same
  for all their ops (copies too).
* ``idle[pid]``: the idle stretches of the process's OWN ops in the window, each classed
  once, in this order: ``input`` (ends where one of its batch uploads begins, within 2 us:
  waiting for the DataLoader), ``short`` (under 100 us: between launches), ``other``;
  ``*_pct`` of the window, ``*_n`` stretches; ``*_other_busy_pct``: share of that class's
  time during which the other training process had ops on the GPU; ``idle_pct``: all
  three (100 - ``busy_pct[pid]``); ``input_gap_ms_median``: median input stretch.
* ``host_wait[pid]``: OS runtime calls of the blocking kind (name matches wait, poll,
  select, recv, read, futex, sleep, fork; OSRT keeps calls >= 10 us) inside the process's
  idle stretches: ``main_thread_*_pct``: of the uploading thread (the process's main
  thread), % of the class's idle time; ``all_launchers_*_pct``: time when every thread
  of the process that launched kernels (main + autograd ``pt_autograd_0``) was in such a
  call at once; ``*_idle``: all idle stretches together; ``blocking_calls``: the main
  thread's blocking calls in the window by name (count, ms).
* ``loader``: per DataLoader worker process (main thread named pt_data_worker; its main
  thread makes one ``posix_fallocate64`` per batch: the batch's shared-memory buffer):
  ``batches``, ``first_s``, ``feeds`` (the GPU process whose first batch upload is the
  first one after the worker's first batch), ``batches_in_window`` and
  ``period_ms_median_in_window`` (median time between consecutive batches in the window),
  ``period_ms_median_alone`` (the same inside the alone stretch of the process it feeds,
  when there is one).

Alone vs shared (``alone_vs_shared``)
* For kernels both training processes run every step (``COMPARE``), from each process's
  3rd step on: ``with_other_n`` / ``with_other_us_median``: instances during which a
  kernel of the other training process was running (overlap > 0); ``without_other_*``:
  the others; ``alone_stretch_us_median``: instances in a process's alone stretch.
* Alone stretch: a training process's steps (from its 3rd on) that lie wholly before the
  other's first op or wholly after its last op; ``alone_steps[pid]``, their
  ``step_ms_median`` / ``p90``, ``alone_span_s`` (first step start, last step end),
  ``window_step_ms_median`` (as in ``training``); ``launch_to_start_us_median`` (kernel start minus the
  start of its launch call, same process and correlationId) in the alone stretch and in
  the concurrent window.

Test pass (``test_pass``): the main process's ops after both training processes' last
op; window from its first op to its last op's end: ``window_ms``, ``gpu_busy_pct``,
``batches`` (uploads of 200,704 B or 50,176 B: the last one of 16 images),
``batch_ms_median``, ``kernels``, ``kernels_per_batch``, ``start_s`` / ``end_s``,
``input_idle_pct`` (idle stretches ending at an upload),
``copies``: count by "kind src->dst bytes" (memory kinds through ENUM_CUDA_MEM_KIND).

Whole report (``report``): ``span_s`` (ANALYSIS_DETAILS duration), ``gpu_span_s`` (first
to last GPU op), ``gpu_busy_pct`` of the GPU span, ``gpu_idle_between_train_and_test_s``
(last training op end to the test pass's first op), ``module_loads[pid]``:
cuModuleLoad* / cuLibraryLoad* calls (count, ms) starting before / in / after the
concurrent window, ``last_end_s`` (end of its last load);
``module_loads_in_window`` (all processes); ``model_upload``: the main process's copies
before any training op (count, bytes, kinds).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, overlap_ns, pct, union  # noqa: E402

BATCH = 200_704                  # 64 x 1 x 28 x 28 float32
LAST_TEST = 50_176               # 16 x 1 x 28 x 28 float32
SKIP = 2
TOUCH_NS = 2_000
SHORT_NS = 100_000
OPTIMIZER = "multi_tensor_apply_kernel"
BACKWARD = "nll_loss_backward_reduce_cuda_kernel_2d"
BLOCKING = r"wait|poll|select|recv|read|futex|sleep|fork"
LOAD = r"^(cuModuleLoad\w*|cuLibraryLoad\w*)$"
COMPARE = ("implicit_convolve_sgemm",                                   # conv1 forward
           "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_"
           "stage3_warpsize1x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",  # conv2 fwd
           "wgrad_alg0_engine")                                           # conv1 weight grad
TABLES = ("KERNEL", "MEMCPY", "MEMSET")


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def arr(rows) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[start, end) rows covered by both union(a) and union(b)."""
    ua, ub = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(ua) and j < len(ub):
        s, e = max(ua[i, 0], ub[j, 0]), min(ua[i, 1], ub[j, 1])
        if e > s:
            out.append((s, e))
        if ua[i, 1] < ub[j, 1]:
            i += 1
        else:
            j += 1
    return arr(out)


def covered(u: np.ndarray, spans: list[tuple[int, int]]) -> int:
    """Time of union(u) inside the stretches *spans* (disjoint), summed."""
    u = union(u)
    if not len(u) or not spans:
        return 0
    cum = np.r_[0, np.cumsum(u[:, 1] - u[:, 0])]

    def f(t: np.ndarray) -> np.ndarray:          # covered time before t
        k = np.searchsorted(u[:, 0], t, "right")
        km = np.maximum(k - 1, 0)
        part = np.clip(np.minimum(t, u[km, 1]) - u[km, 0], 0, None)
        return np.where(k > 0, cum[km] + part, 0)
    sp = np.array(spans, dtype=np.int64)
    return int((f(sp[:, 1]) - f(sp[:, 0])).sum())


def gaps(u: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """Idle stretches of the union *u* inside [lo, hi)."""
    u = u[(u[:, 1] > lo) & (u[:, 0] < hi)]
    e = np.clip(u, lo, hi)
    s, t = np.r_[lo, e[:, 1]], np.r_[e[:, 0], hi]
    return [(a, b) for a, b in zip(s.tolist(), t.tolist()) if b > a]


def near(xs: np.ndarray, t: int) -> bool:
    k = int(np.searchsorted(xs, t - TOUCH_NS))
    return k < len(xs) and xs[k] <= t + TOUCH_NS


def med_ms(x) -> float | None:
    return ms(float(np.median(x))) if len(x) else None


def p90_ms(x) -> float | None:
    return ms(float(np.percentile(x, 90))) if len(x) else None


def med_us(x) -> float | None:
    return round(float(np.median(x)) / 1e3, 2) if len(x) else None


def main(path: str) -> dict:
    r = Report(path)
    # ---- GPU ops per process -------------------------------------------------------
    ops: dict[int, np.ndarray] = {}
    count: dict[int, Counter] = defaultdict(Counter)
    for t in TABLES:
        for a, b, g in r.q(f"select start, end, globalPid from CUPTI_ACTIVITY_KIND_{t}"):
            count[pid_of(g)][t] += 1
            ops.setdefault(pid_of(g), []).append((a, b))
    ops = {p: arr(v) for p, v in ops.items()}
    pids = sorted(ops)
    t0 = min(int(v[:, 0].min()) for v in ops.values())
    rel = lambda t: round((t - t0) / 1e9, 3)  # noqa: E731
    kern: dict[int, list] = defaultdict(list)       # (start, end, name, corr)
    for a, b, n, c, g in r.q("select start, end, shortName, correlationId, globalPid "
                             "from CUPTI_ACTIVITY_KIND_KERNEL order by start"):
        kern[pid_of(g)].append((a, b, r.strings.get(n, str(n)), c))
    kiv = {p: arr([(a, b) for a, b, *_ in kern[p]]) for p in pids}
    kinds, mem = r.enum("ENUM_CUDA_MEMCPY_OPER"), r.enum("ENUM_CUDA_MEM_KIND")
    cps = [{"start": a, "end": b, "bytes": n, "kind": kinds.get(k, str(k)),
            "src": mem.get(s_, str(s_)), "dst": mem.get(d_, str(d_)), "corr": c, "pid": pid_of(g)}
           for a, b, n, k, s_, d_, c, g in r.q(
               "select start, end, bytes, copyKind, srcKind, dstKind, correlationId, globalPid "
               "from CUPTI_ACTIVITY_KIND_MEMCPY order by start")]
    calls: dict[int, list] = defaultdict(list)      # CUDA calls (start, end, name, gtid)
    for c in r.api_calls("."):
        calls[pid_of(c[3])].append(c)
    train = [p for p in pids if any(k[2] == OPTIMIZER for k in kern[p])]
    per = {}
    for p in pids:
        per[str(p)] = {
            "role": "train" if p in train else "main",
            "kernels": count[p]["KERNEL"], "copies": count[p]["MEMCPY"],
            "memsets": count[p]["MEMSET"],
            "gpu_busy_ms": ms(int((union(ops[p])[:, 1] - union(ops[p])[:, 0]).sum())),
            "first_gpu_s": rel(int(ops[p][:, 0].min())),
            "last_gpu_s": rel(int(ops[p][:, 1].max())),
            "first_cuda_call_s": rel(calls[p][0][0]) if calls[p] else None,
            "last_cuda_call_s": rel(max(c[1] for c in calls[p])) if calls[p] else None}
    out: dict = {"t0_ns": t0, "processes_with_gpu_work": len(pids), "per_process": per,
                 "training_processes": len(train)}
    if len(train) != 2:
        return out

    # ---- training steps ------------------------------------------------------------
    ups = {p: np.array(sorted(m["start"] for m in cps if m["pid"] == p and m["bytes"] == BATCH
                              and m["kind"] == "Host-to-Device"), dtype=np.int64)
           for p in train}
    late = max(train, key=lambda p: ups[p][SKIP])
    early_end = min(train, key=lambda p: ups[p][-1])
    lo, hi = int(ups[late][SKIP]), int(ups[early_end][-1])
    win = hi - lo
    other = {train[0]: train[1], train[1]: train[0]}
    tr = {}
    for p in train:
        s = ups[p]
        kst = np.array([k[0] for k in kern[p]], dtype=np.int64)
        bst = np.array([k[0] for k in kern[p] if k[2] == BACKWARD], dtype=np.int64)
        seg = list(zip(s.tolist(), s[1:].tolist()))
        inw = [(a, b) for a, b in seg if a >= lo and b <= hi]
        d = [b - a for a, b in inw]
        nk = [int(np.searchsorted(kst, b) - np.searchsorted(kst, a)) for a, b in inw]
        edges = s.tolist() + [int(ops[p][:, 1].max()) + 1]
        tr[str(p)] = {
            "steps": len(s),
            "steps_with_backward": sum(int(np.searchsorted(bst, b) > np.searchsorted(bst, a))
                                       for a, b in zip(edges, edges[1:])),
            "first_upload_s": rel(int(s[0])), "last_upload_s": rel(int(s[-1])),
            "first_step_ms": ms(int(s[1] - s[0])),
            "steps_in_window": len(inw), "step_ms_median": med_ms(d), "step_ms_p90": p90_ms(d),
            "kernels_per_step": int(np.median(nk)),
            "step_ms_median_all_but_first": med_ms(np.diff(s)[1:])}
    out["training"] = tr
    out["concurrent_window"] = {"lo_s": rel(lo), "hi_s": rel(hi), "ms": ms(win),
                                "starts_with_3rd_step_of": late, "ends_at_last_step_of": early_end}

    # ---- the concurrent window -----------------------------------------------------
    allops = np.concatenate(list(ops.values()))
    ubusy = clipped_ns(allops, lo, hi)
    own = {p: clipped_ns(ops[p], lo, hi) for p in pids}
    a, b = train
    w = {"gpu_busy_pct": pct(ubusy, win),
         "busy_pct": {str(p): pct(own[p], win) for p in pids},
         "sum_over_union": round(sum(own.values()) / ubusy, 4) if ubusy else None,
         "kernel_overlap_pct": pct(overlap_ns(kiv[a], kiv[b], lo, hi), win),
         "kernel_overlap_ns": overlap_ns(kiv[a], kiv[b], lo, hi),
         "op_overlap_us": round(overlap_ns(ops[a], ops[b], lo, hi) / 1e3, 1)}
    # idle of each training process's own ops, and its host's waits
    launch_threads = {p: sorted({c[3] for c in calls[p]
                                 if re.match(r"^(cudaLaunchKernel\w*|cuLaunchKernel\w*)$", c[2])})
                      for p in train}
    corr_tid = {}
    for p in train:
        ids = {c: g for c, g in r.q("select correlationId, globalTid from "
                                    "CUPTI_ACTIVITY_KIND_RUNTIME where (globalTid >> 24) & ? = ?",
                                    THREAD_MASK, p)}
        tids = [ids.get(m["corr"]) for m in cps if m["pid"] == p and m["bytes"] == BATCH]
        corr_tid[p] = max(set(tids), key=tids.count)
    osrt = defaultdict(list)
    for s_, e_, n, g in r.osrt_calls(BLOCKING):
        osrt[g].append((s_, e_, n))
    idle, host = {}, {}
    for p in train:
        u = union(ops[p])
        uo = union(ops[other[p]])
        cls = {"input": [], "short": [], "other": []}
        for s_, e_ in gaps(u, lo, hi):
            c = "input" if near(ups[p], e_) else "short" if e_ - s_ < SHORT_NS else "other"
            cls[c].append((s_, e_))
        d = {}
        for c, g in cls.items():
            tot = sum(e_ - s_ for s_, e_ in g)
            d[f"{c}_pct"] = pct(tot, win)
            d[f"{c}_n"] = len(g)
            d[f"{c}_other_busy_pct"] = pct(covered(uo, g), tot)
        d["idle_pct"] = pct(sum(e_ - s_ for g in cls.values() for s_, e_ in g), win)
        d["input_gap_ms_median"] = med_ms([e_ - s_ for s_, e_ in cls["input"]])
        idle[str(p)] = d
        mt = corr_tid[p]
        mw = arr([(s_, e_) for s_, e_, _ in osrt[mt]])
        allw = None
        for g in launch_threads[p]:
            x = arr([(s_, e_) for s_, e_, _ in osrt[g]])
            allw = x if allw is None else intersect(allw, x)
        h = {"launching_threads": len(launch_threads[p]),
             "main_thread_is_launcher": mt in launch_threads[p]}
        for c, g in list(cls.items()) + [("idle", [x for v in cls.values() for x in v])]:
            tot = sum(e_ - s_ for s_, e_ in g)
            h[f"main_thread_{c}_pct"] = pct(covered(mw, g), tot)
            h[f"all_launchers_{c}_pct"] = pct(covered(allw, g), tot)
        bc = defaultdict(lambda: [0, 0])
        for s_, e_, n in osrt[mt]:
            if lo <= s_ < hi:
                bc[n][0] += 1
                bc[n][1] += e_ - s_
        h["blocking_calls"] = {n: [v[0], ms(v[1])] for n, v in sorted(bc.items())}
        host[str(p)] = h
    w["idle"] = idle
    w["host_wait"] = host
    # DataLoader workers: one posix_fallocate64 per batch
    workers = {pid_of(g) for g, n in r.q("select globalTid, nameId from ThreadNames")
               if r.strings.get(n) == "pt_data_worker" and (g & THREAD_MASK) == pid_of(g)}
    fall = [(s_, g) for s_, e_, n, g in r.osrt_calls(r"^posix_fallocate64$")]
    loader = {}
    for q in sorted(workers):
        fa = sorted(s_ for s_, g in fall if pid_of(g) == q and (g & THREAD_MASK) == q)
        if not fa:
            continue
        nxt = {p: min((c["start"] for c in cps if c["pid"] == p and c["bytes"] == BATCH
                       and c["kind"] == "Host-to-Device" and c["start"] >= fa[0]), default=None)
               for p in pids}
        feeds = min((p for p in nxt if nxt[p] is not None), key=lambda p: nxt[p])
        inw = [t for t in fa if lo <= t < hi]
        loader[str(q)] = {"batches": len(fa), "first_s": rel(fa[0]), "feeds": feeds,
                          "batches_in_window": len(inw),
                          "period_ms_median_in_window": med_ms(np.diff(inw)) if len(inw) > 1 else None}
    w["loader"] = loader
    out["window"] = w

    # ---- alone vs shared -----------------------------------------------------------
    lone = {}
    av: dict = {}
    for p in train:
        q = other[p]
        f, l_ = int(ops[q][:, 0].min()), int(ops[q][:, 1].max())
        s = ups[p][SKIP:]
        seg = [(x, y) for x, y in zip(s.tolist(), s[1:].tolist()) if y <= f or x >= l_]
        lone[p] = seg
        lc = {c: g for c, g in r.q("select correlationId, start from CUPTI_ACTIVITY_KIND_RUNTIME "
                                   "where (globalTid >> 24) & ? = ?", THREAD_MASK, p)}
        lat_alone, lat_win = [], []
        for k in kern[p]:
            if k[3] not in lc:
                continue
            if any(x <= k[0] < y for x, y in seg):
                lat_alone.append(k[0] - lc[k[3]])
            elif lo <= k[0] < hi:
                lat_win.append(k[0] - lc[k[3]])
        av[str(p)] = {"alone_steps": len(seg),
                      "alone_step_ms_median": med_ms([y - x for x, y in seg]),
                      "alone_step_ms_p90": p90_ms([y - x for x, y in seg]),
                      "alone_span_s": [rel(seg[0][0]), rel(seg[-1][1])] if seg else None,
                      "window_step_ms_median": tr[str(p)]["step_ms_median"],
                      "launch_to_start_us_median_alone": med_us(lat_alone),
                      "launch_to_start_us_median_window": med_us(lat_win)}
    kd = {}
    for name in COMPARE:
        with_o, without, alone = [], [], []
        for p in train:
            uo = union(kiv[other[p]])
            for k in kern[p]:
                if k[2] != name or k[0] < ups[p][SKIP]:
                    continue
                j = int(np.searchsorted(uo[:, 1], k[0], "right"))
                hit = j < len(uo) and uo[j, 0] < k[1]
                (with_o if hit else without).append(k[1] - k[0])
                if any(x <= k[0] < y for x, y in lone[p]):
                    alone.append(k[1] - k[0])
        kd[name[:40]] = {"with_other_n": len(with_o), "with_other_us_median": med_us(with_o),
                         "without_other_n": len(without),
                         "without_other_us_median": med_us(without),
                         "alone_stretch_n": len(alone), "alone_stretch_us_median": med_us(alone)}
    av["kernels"] = kd
    for q, d in loader.items():
        seg = lone.get(d["feeds"], [])
        if seg:
            fa = sorted(s_ for s_, g in fall if pid_of(g) == int(q) and (g & THREAD_MASK) == int(q)
                        and seg[0][0] <= s_ < seg[-1][1])
            d["period_ms_median_alone"] = med_ms(np.diff(fa)) if len(fa) > 1 else None
    out["alone_vs_shared"] = av

    # ---- test pass -----------------------------------------------------------------
    main_p = [p for p in pids if p not in train]
    tend = max(int(ops[p][:, 1].max()) for p in train)
    tp = {}
    model_upload = None
    if main_p:
        m = main_p[0]
        mo = ops[m][ops[m][:, 0] >= tend]
        if len(mo):
            tlo, thi = int(mo[:, 0].min()), int(mo[:, 1].max())
            tcps = [c for c in cps if c["pid"] == m and c["start"] >= tend]
            tup = np.array(sorted(c["start"] for c in tcps if c["kind"] == "Host-to-Device"
                                  and c["bytes"] in (BATCH, LAST_TEST)), dtype=np.int64)
            g = gaps(union(mo), tlo, thi)
            inp = sum(e_ - s_ for s_, e_ in g if near(tup, e_))
            tk = [k for k in kern[m] if k[0] >= tend]
            tp = {"start_s": rel(tlo), "end_s": rel(thi), "window_ms": ms(thi - tlo),
                  "gpu_busy_pct": pct(clipped_ns(allops, tlo, thi), thi - tlo),
                  "batches": len(tup), "batch_ms_median": med_ms(np.diff(tup)),
                  "kernels": len(tk), "kernels_per_batch": round(len(tk) / max(len(tup), 1), 2),
                  "input_idle_pct": pct(inp, thi - tlo),
                  "copies": dict(sorted(Counter(f"{c['kind']} {c['src']}->{c['dst']} {c['bytes']}"
                                                for c in tcps).items()))}
            first_train = min(int(ops[p][:, 0].min()) for p in train)
            pre = [c for c in cps if c["pid"] == m and c["start"] < first_train]
            model_upload = {
                "copies": len(pre), "bytes": sum(c["bytes"] for c in pre),
                "kinds": sorted({f"{c['kind']} {c['src']}->{c['dst']}" for c in pre})}
    out["test_pass"] = tp

    # ---- whole report --------------------------------------------------------------
    u = union(allops)
    span = r.q("select duration from ANALYSIS_DETAILS")[0][0]
    loads = {}
    for p in sorted(calls):
        lc_ = [c for c in calls[p] if re.search(LOAD, c[2])]
        if not lc_:
            continue
        grp = {"before": [c for c in lc_ if c[0] < lo], "in": [c for c in lc_ if lo <= c[0] < hi],
               "after": [c for c in lc_ if c[0] >= hi]}
        loads[str(p)] = {k: [len(v), ms(sum(c[1] - c[0] for c in v))] for k, v in grp.items()}
        loads[str(p)]["last_end_s"] = rel(max(c[1] for c in lc_))
    out["report"] = {
        "span_s": round(span / 1e9, 3),
        "gpu_span_s": rel(int(u[-1, 1])),
        "gpu_busy_pct": pct(int((u[:, 1] - u[:, 0]).sum()), int(u[-1, 1] - u[0, 0])),
        "gpu_busy_ms": ms(int((u[:, 1] - u[:, 0]).sum())),
        "gpu_idle_between_train_and_test_s": round((int(mo[:, 0].min()) - tend) / 1e9, 3)
        if tp else None,
        "model_upload": model_upload,
        "module_loads": loads,
        "module_loads_in_window": sum(v["in"][0] for v in loads.values()),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
