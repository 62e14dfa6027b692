"""Truth figures for pub-cuda-jacobigraphs (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

NVIDIA's jacobiCudaGraphs sample, method 0 (cudaGraphExecKernelNodeSetParams). The CPU
solves the system first (GPU idle), then one stream (non-blocking) runs the GPU loop:
per iteration cudaGraphExecKernelNodeSetParams, cudaGraphLaunch, cudaStreamSynchronize.
The capture traces CUDA graphs at graph level: each execution of the 3-node graph
(memset, JacobiMethod kernel, 8-byte D2H memcpy to a host stack variable) is one
CUPTI_ACTIVITY_KIND_GRAPH_TRACE row; its nodes have no KERNEL/MEMCPY/MEMSET rows
(``kernel_rows`` = 1: only the eager finalError kernel; ``graph_node_rows`` = GPU rows
with a graphNodeId). GPU busy time is the union of kernel, copy, memset and graph
execution rows (a graph execution counts busy from its start to its end, whatever its
nodes do inside). Times are ns on the session clock; *_ms / *_us are rounded.

Iterations (``iterations``):
  * ``graph_launch_calls``: cudaGraphLaunch calls; ``graph_executions``: GRAPH_TRACE
    rows; ``executions_matched_to_launch``: executions whose correlationId and process
    match a cudaGraphLaunch call; ``executions_by_graph``: by graphId;
  * ``execution_us``: an execution's end - start: first, median, p90, max;
  * ``period_us_median``: median of next execution start - this execution start (all
    consecutive pairs); ``gap_us_median``: median of next start - this end.
Graph objects (``graph_objects``): CUDA_GRAPH_EVENTS rows, Graph Creation (95) and
GraphExec Creation (94) counts.

Steady window (``steady``): from the start of the 3rd graph execution (SKIP = 2: the
first two launches are slower, 53 and 26 us) to the end of the last one. Figures:
``window_ms``, ``executions``, ``gpu_busy_pct`` and ``gpu_idle_pct`` (union of all GPU
rows clipped to the window), ``idle_gaps`` (idle stretches in the window; they are the
gaps between consecutive executions: nothing else runs there), ``gap_us_median``,
``gap_us_p90``. ``idle_split``: each gap from execution i's end to execution i+1's start
(both in the window) cut by the launching thread's runtime calls into five parts that
sum to the gap:
  * ``sync_return``: execution i's end to the end of the cudaStreamSynchronize that
    follows launch i (that call starts before the execution ends);
  * ``host_before_setparams``: sync end to the next cudaGraphExecKernelNodeSetParams start;
  * ``setparams``: that call's duration;
  * ``host_before_launch``: its end to the next cudaGraphLaunch start;
  * ``launch_to_gpu``: that launch call's start to execution i+1's start;
each as ``median_us`` and ``pct_of_idle`` (sum of the part over all gaps / total idle).
``launch_call``: host behaviour of cudaGraphLaunch in the window: ``median_us``,
``returns_before_execution_end_us_median`` (execution end - launch call end),
``calls_ending_after_their_execution_starts`` (the call is still running when its graph
starts on the GPU: the host is held in the launch for most of the execution);
``sync_call``: cudaStreamSynchronize ``median_us`` and ``gpu_wait_us_median``
(execution end - sync start: how long of it the GPU was still busy).

Per-iteration host calls (``loop_calls``): runtime calls of the launching thread from
the first cudaGraphExecKernelNodeSetParams to the end of the last graph execution's
cudaStreamSynchronize: {name: {count, median_us}}; ``launches_followed_by_sync``: launches
whose next runtime call on the same thread is cudaStreamSynchronize; ``launching_threads``.
``sync_rows``: CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows: count, those whose correlationId
is a cudaStreamSynchronize call, and their syncType labels via ENUM_CUPTI_SYNC_TYPE.

CPU phase (``cpu_phase``): ``first_event_ms`` (first RUNTIME/OSRT row of the program's
process, a proxy for its start), ``first_cuda_call_ms`` (first RUNTIME row),
``first_gpu_op_ms`` (first GPU row's start); ``process_to_first_gpu_ms`` and
``cuda_call_to_first_gpu_ms`` (those to the first GPU op); ``cpu_jacobi_ms``: the longest
stretch between consecutive runtime calls of the process before the first GPU op (the
CPU solve: from the end of the last cudaHostAlloc to cudaStreamCreateWithFlags) with
``cpu_jacobi_from_ms``/``_to_ms`` and ``main_thread_osrt_calls`` in it (OSRT calls of 10 us
or more kept); ``gpu_busy_ms`` from first event to first GPU op.
Whole report (``report``): ``capture_ms`` (ANALYSIS_DETAILS.duration: profiling runs from
t = 0 to then, per DIAGNOSTIC_EVENT), ``app_span_ms`` (first to last RUNTIME/OSRT/GPU row
of the process), ``gpu_phase_ms`` (first GPU row start to last GPU row end), ``gpu_busy_ms``
and ``gpu_busy_pct_of_capture`` / ``_of_app_span`` / ``_of_gpu_phase``.

Copies (``memcpys``, ``memsets``): every row with direction (ENUM_CUDA_MEMCPY_OPER),
bytes, memory kinds (ENUM_CUDA_MEM_KIND), stream, start ms and duration us;
``graph_memcpy_node_visible``: any MEMCPY row with a graphNodeId (the node's 8-byte D2H
to pageable memory runs inside each execution).

Set-up and module loads (``setup``): ``module_load_calls`` (cuModuleLoad*/cuLibraryLoad*),
durations (us) and start ms of the one-off calls (stream creation, graph creation, node
additions, instantiation, first and second cudaGraphLaunch, the finalError
cudaLaunchKernel, frees, the first cudaHostAlloc), ``graph_build_ms`` (cudaGraphCreate
start to cudaGraphInstantiate end), ``upload_end_to_first_execution_us`` (GPU idle between
the last set-up GPU row and the first execution), ``tail``: last execution's end to the
final memset, and the final memset/finalError/copy/sync span.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, ms, pct  # noqa: E402

SKIP = 2
PID_MASK = ~THREAD_MASK
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")


def us(ns: float) -> float:
    return round(float(ns) / 1e3, 2)


def med(x) -> float:
    return float(np.median(np.asarray(x, dtype=np.float64)))


def main(path: str) -> dict:
    r = Report(path)
    strings = r.strings
    (pid_g,) = {g for (g,) in r.q("select distinct globalPid from "
                                  "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")}
    # runtime calls of the process: (start, end, name, gtid, corr)
    calls = [(a, b, re.sub(r"_v\d+$", "", strings.get(n, str(n))), g, c)
             for a, b, n, g, c in r.q(
                 "select start, end, nameId, globalTid, correlationId from "
                 "CUPTI_ACTIVITY_KIND_RUNTIME order by start")
             if g & PID_MASK == pid_g]
    by_corr = {x[4]: x for x in calls}
    launches = [x for x in calls if x[2] == "cudaGraphLaunch"]
    threads = {x[3] for x in launches}
    (tid,) = threads
    tcalls = [x for x in calls if x[3] == tid]
    ex = r.q("select start, end, graphId, correlationId from "
             "CUPTI_ACTIVITY_KIND_GRAPH_TRACE where globalPid = ? order by start", pid_g)
    es = np.array([a for a, *_ in ex], dtype=np.int64)
    ee = np.array([b for _, b, *_ in ex], dtype=np.int64)
    edur = ee - es
    matched = [by_corr.get(c) for *_, c in ex]
    n_matched = sum(1 for m in matched if m is not None and m[2] == "cudaGraphLaunch")

    # ---- iterations ------------------------------------------------------------------
    graph_ev = Counter(strings.get(n, str(n)) for (n,) in r.q(
        "select nameId from CUDA_GRAPH_EVENTS")) if r.has("CUDA_GRAPH_EVENTS") else {}
    iterations = {
        "graph_launch_calls": len(launches),
        "graph_executions": len(ex),
        "executions_matched_to_launch": n_matched,
        "executions_by_graph": {str(k): v for k, v in sorted(Counter(g for _, _, g, _ in ex).items())},
        "execution_us": {"first": us(edur[0]), "median": us(med(edur)),
                         "p90": us(np.percentile(edur, 90)), "max": us(edur.max())},
        "period_us_median": us(med(np.diff(es))),
        "gap_us_median": us(med(es[1:] - ee[:-1])),
    }

    # ---- steady window ---------------------------------------------------------------
    lo, hi = int(es[SKIP]), int(ee[-1])
    win = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    glen = gaps[:, 1] - gaps[:, 0]
    exec_gaps = np.stack([ee[SKIP:-1], es[SKIP + 1:]], axis=1)
    assert np.array_equal(gaps, exec_gaps), "idle gaps are not the inter-execution gaps"
    # launch i -> its sync, next setparams, next launch on the launching thread
    idx = {x[4]: k for k, x in enumerate(tcalls)}
    parts = defaultdict(list)
    launch_ret_before_end, ends_after_start, sync_gpu_wait = [], 0, []
    launch_dur, sync_dur = [], []
    for i in range(SKIP, len(ex)):
        li = idx[ex[i][3]]
        la, lb = tcalls[li][0], tcalls[li][1]
        launch_dur.append(lb - la)
        launch_ret_before_end.append(int(ee[i]) - lb)
        ends_after_start += lb > es[i]
        sy = tcalls[li + 1]
        assert sy[2] == "cudaStreamSynchronize"
        sync_dur.append(sy[1] - sy[0])
        sync_gpu_wait.append(int(ee[i]) - sy[0])
        if i + 1 < len(ex):
            sp, nl = tcalls[li + 2], tcalls[li + 3]
            assert sp[2] == "cudaGraphExecKernelNodeSetParams" and nl[2] == "cudaGraphLaunch"
            assert nl[4] == ex[i + 1][3]
            p = {"sync_return": sy[1] - int(ee[i]),
                 "host_before_setparams": sp[0] - sy[1],
                 "setparams": sp[1] - sp[0],
                 "host_before_launch": nl[0] - sp[1],
                 "launch_to_gpu": int(es[i + 1]) - nl[0]}
            assert sum(p.values()) == int(es[i + 1] - ee[i])
            for k, v in p.items():
                parts[k].append(v)
    idle = int(glen.sum())
    assert idle == win - busy
    steady = {
        "skip_executions": SKIP,
        "executions": len(ex) - SKIP,
        "window_ms": ms(win),
        "gpu_busy_pct": pct(busy, win),
        "gpu_idle_pct": pct(win - busy, win),
        "idle_gaps": len(gaps),
        "gap_us_median": us(med(glen)),
        "gap_us_p90": us(np.percentile(glen, 90)),
        "period_us_median": us(med(np.diff(es[SKIP:]))),
        "execution_us_median": us(med(edur[SKIP:])),
        "idle_split": {k: {"median_us": us(med(v)), "pct_of_idle": pct(sum(v), idle)}
                       for k, v in parts.items()},
        "launch_call": {
            "median_us": us(med(launch_dur)),
            "returns_before_execution_end_us_median": us(med(launch_ret_before_end)),
            "calls_ending_after_their_execution_starts": int(ends_after_start)},
        "sync_call": {"median_us": us(med(sync_dur)),
                      "gpu_wait_us_median": us(med(sync_gpu_wait))},
    }

    # ---- per-iteration host calls ----------------------------------------------------
    first_sp = next(x for x in tcalls if x[2] == "cudaGraphExecKernelNodeSetParams")
    last_sync = tcalls[idx[ex[-1][3]] + 1]
    in_loop = [x for x in tcalls if first_sp[0] <= x[0] and x[1] <= last_sync[1]]
    per = defaultdict(list)
    for a, b, n, *_ in in_loop:
        per[n].append(b - a)
    followed = sum(1 for k, x in enumerate(tcalls) if x[2] == "cudaGraphLaunch"
                   and k + 1 < len(tcalls) and tcalls[k + 1][2] == "cudaStreamSynchronize")
    sync_kind = r.enum("ENUM_CUPTI_SYNC_TYPE")
    srows = r.q("select correlationId, syncType from CUPTI_ACTIVITY_KIND_SYNCHRONIZATION "
                "where globalPid = ?", pid_g) if r.has("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") else []
    loop_calls = {n: {"count": len(v), "median_us": us(med(v))} for n, v in sorted(per.items())}

    # ---- CPU phase and whole report --------------------------------------------------
    gpu_iv = np.array([row for t in GPU_TABLES if r.has(t) for row in r.q(
        f"select start, end from {t} where globalPid = ?", pid_g)], dtype=np.int64)
    first_gpu, last_gpu = int(gpu_iv[:, 0].min()), int(gpu_iv[:, 1].max())
    osrt = [(a, b, n, g) for a, b, n, g in r.osrt_calls() if g & PID_MASK == pid_g]
    first_event = min([calls[0][0]] + [a for a, *_ in osrt])
    last_event = max([max(b for _, b, *_ in calls), last_gpu] + [b for _, b, *_ in osrt])
    pre = [x for x in calls if x[0] < first_gpu]
    k = int(np.argmax([pre[j + 1][0] - pre[j][1] for j in range(len(pre) - 1)]))
    cj_lo, cj_hi = pre[k][1], pre[k + 1][0]
    busy_all = clipped_ns(gpu_iv, 0, 1 << 62)
    capture = r.q("select duration from ANALYSIS_DETAILS")[0][0]
    cpu_phase = {
        "first_event_ms": ms(first_event),
        "first_cuda_call_ms": ms(calls[0][0]),
        "first_cuda_call": calls[0][2],
        "first_gpu_op_ms": ms(first_gpu),
        "process_to_first_gpu_ms": ms(first_gpu - first_event),
        "cuda_call_to_first_gpu_ms": ms(first_gpu - calls[0][0]),
        "cpu_jacobi_ms": ms(cj_hi - cj_lo),
        "cpu_jacobi_from_ms": ms(cj_lo),
        "cpu_jacobi_from_call": pre[k][2],
        "cpu_jacobi_to_ms": ms(cj_hi),
        "cpu_jacobi_to_call": pre[k + 1][2],
        "main_thread_osrt_calls_in_cpu_jacobi": sum(
            1 for a, b, n, g in osrt if g == tid and cj_lo <= a < cj_hi),
        "gpu_busy_ms_before_first_gpu_op": ms(clipped_ns(gpu_iv, first_event, first_gpu)),
    }
    report = {
        "capture_ms": ms(capture),
        "app_span_ms": ms(last_event - first_event),
        "app_last_event_ms": ms(last_event),
        "gpu_phase_ms": ms(last_gpu - first_gpu),
        "gpu_busy_ms": ms(busy_all),
        "gpu_busy_pct_of_capture": pct(busy_all, capture),
        "gpu_busy_pct_of_app_span": pct(busy_all, last_event - first_event),
        "gpu_busy_pct_of_gpu_phase": pct(busy_all, last_gpu - first_gpu),
    }

    # ---- copies ----------------------------------------------------------------------
    memcpys = [{"kind": m["kind"], "bytes": m["bytes"], "src": m["src"], "dst": m["dst"],
                "stream": m["stream"], "start_ms": ms(m["start"]),
                "us": us(m["end"] - m["start"])} for m in r.memcpys()]
    mk = r.enum("ENUM_CUDA_MEM_KIND")
    memsets = [{"bytes": n, "mem": mk.get(k_, str(k_)), "stream": s, "start_ms": ms(a),
                "us": us(b - a)} for a, b, n, k_, s in r.q(
        "select start, end, bytes, memKind, streamId from CUPTI_ACTIVITY_KIND_MEMSET "
        "order by start")] if r.has("CUPTI_ACTIVITY_KIND_MEMSET") else []
    node_rows = sum(r.q(f"select count(*) from {t} where graphNodeId is not null")[0][0]
                    for t in GPU_TABLES[:3] if r.has(t))

    # ---- set-up, module loads, tail --------------------------------------------------
    def one(name: str, nth: int = 0) -> dict:
        xs = [x for x in calls if x[2] == name]
        return {"start_ms": ms(xs[nth][0]), "us": us(xs[nth][1] - xs[nth][0])}

    graph_create = next(x for x in calls if x[2] == "cudaGraphCreate")
    inst = next(x for x in calls if x[2].startswith("cudaGraphInstantiate"))
    setup_gpu_end = int(gpu_iv[gpu_iv[:, 1] <= es[0], 1].max())
    fin_memset = next(x for x in calls if x[2] == "cudaMemsetAsync" and x[0] > ee[-1])
    fin_sync = [x for x in calls if x[2] == "cudaStreamSynchronize"][-1]
    frees = [x for x in calls if x[2] in ("cudaFree", "cudaFreeHost")]
    setup = {
        "module_load_calls": len([x for x in calls
                                  if re.match(r"^(cuLibraryLoad\w*|cuModuleLoad\w*)$", x[2])]),
        "first_cudaHostAlloc": one("cudaHostAlloc"),
        "cudaStreamCreateWithFlags": one("cudaStreamCreateWithFlags"),
        "cudaGraphCreate": one("cudaGraphCreate"),
        "cudaGraphAddMemsetNode": one("cudaGraphAddMemsetNode"),
        "cudaGraphAddKernelNode": one("cudaGraphAddKernelNode"),
        "cudaGraphAddMemcpyNode": one("cudaGraphAddMemcpyNode"),
        "cudaGraphInstantiate": {"start_ms": ms(inst[0]), "us": us(inst[1] - inst[0])},
        "graph_launch_1": one("cudaGraphLaunch", 0),
        "graph_launch_2": one("cudaGraphLaunch", 1),
        "finalError_cudaLaunchKernel": one("cudaLaunchKernel"),
        "graph_build_ms": ms(inst[1] - graph_create[0]),
        "upload_end_to_first_execution_us": us(int(es[0]) - setup_gpu_end),
        "frees_ms": ms(sum(b - a for a, b, *_ in frees)),
        "tail": {"last_execution_end_to_final_memset_call_us": us(fin_memset[0] - int(ee[-1])),
                 "final_memset_call_to_final_sync_end_us": us(fin_sync[1] - fin_memset[0])},
    }

    return {
        "kernel_rows": len(r.kernels()),
        "kernel_names": sorted({k[2] for k in r.kernels()}),
        "graph_node_rows": node_rows,
        "graph_objects": dict(sorted(graph_ev.items())),
        "iterations": iterations,
        "steady": steady,
        "loop_calls": loop_calls,
        "launches_followed_by_sync": followed,
        "launching_threads": len(threads),
        "sync_rows": {"count": len(srows),
                      "of_cudaStreamSynchronize": sum(
                          1 for c, _ in srows if by_corr.get(c, (0, 0, ""))[2]
                          == "cudaStreamSynchronize"),
                      "syncType_labels": dict(Counter(
                          f"{t}={sync_kind.get(t, '?')}" for _, t in srows))},
        "cpu_phase": cpu_phase,
        "report": report,
        "memcpys": memcpys,
        "memsets": memsets,
        "graph_memcpy_node_visible": node_rows > 0,
        "setup": setup,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
