"""Truth figures for pub-jax-advi (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

JAX's examples/advi.py under MPLBACKEND=Agg: 100 steps, each a jitted update(t, opt_state)
then callback(params, t): print(objective(params, t)) (jitted, its scalar read back),
plt.cla(), two _mesh_eval calls (jitted vmaps on a 101x101 mesh) whose X, Y, Z go to
ax.contour, 40 samples drawn with eager (un-jitted) ops and plotted, plt.draw() and
plt.pause(1/60). No NVTX (XLA's domain TSL excluded). What the capture shows a step is:

  * update: the upload of t (4-byte host-to-device copy), then four XLA kernels launched
    one by one (no CUDA graph), the first named ``loop_add_fusion_1``;
  * objective: the upload of t, one CUDA graph execution (XLA command buffer; graph 1 at
    step 0, graph 7 from step 1 on: the command buffer was instantiated again at step 1),
    the 4-byte read-back of the scalar;
  * each _mesh_eval: one kernel, two 40804-byte (101x101 float32) read-backs, then, twice,
    what jax's Array.__iter__ does for a first next() (a 100-row chunk by dynamic slice:
    two 4-byte index uploads, two 4-byte device-to-device copies, a
    ``loop_dynamic_slice_fusion``; then chunk._unstack(): one execution of the ~95 us
    graph 4), most likely matplotlib's unit handling looking for the first finite value
    of X and of Y (inferred, the capture has no Python stacks), then the third 40804-byte
    read-back;
  * the samples: random.key(t) (upload + device copy), eager split/exp/multiply/add
    kernels, samples[:, 0] and samples[:, 1] (index uploads, dynamic slice, 160-byte
    device copy) and their two 160-byte read-backs;
  * plt.draw() (Agg renders) and plt.pause(1/60): under Agg FigureCanvasBase's
    start_event_loop sleeps in 10 ms ticks until the interval has passed, i.e. two
    clock_nanosleep calls of ~10 ms on the main thread.

Steps: ``update_kernel`` runs exactly 100 times (checked: ``steps``). Step k starts at
the start of the last host-to-device copy before its k-th execution (the upload of t,
the update's first GPU operation); a step period runs to the next step's start.
``step_period_ms``: median and p90 of all 99 periods, and of the 97 in the window.
``update_upload_lead_us_*``: from that upload to the update's first kernel.
``step_period_outliers``: steady periods over 1.25x the steady median, with their longest
idle stretch and where it began (ms into the step). ``step_check``: per steady period, the
objective graph executions (graphs other than 4), graph-4 executions, kernels and
copies, as {value: periods with it}.

Steady window: from the start of step index 2 (the 3rd step) to the start of step index
99 (the last step), i.e. 97 full periods (steps 3..99, one-based; the last step has no
next start, ``last_step_ms`` gives it up to the capture's last GPU operation). All
compilation ends before step index 1 starts (``compilation``). In the window:
  * ``window_ms``, ``gpu_busy_pct`` (union of kernels, copies, memsets and graph
    executions), ``gpu_idle_pct``; ``gpu_work_ms_per_step``: busy time per period
    (median, min, max);
  * per step: ``d2h_per_step`` / ``h2d_per_step`` / ``d2d_per_step``: copies of the
    period as {bytes: count}, with ``..._periods_alike`` the number of the 97 periods that
    have exactly that pattern;
  * idle split (each % of the window and ms per step, the four adding up to the idle):
    (a) ``sleep``: idle time covered by the main (launching) thread's sleeping OS-runtime
        calls (nanosleep, clock_nanosleep, usleep, select/pselect, poll/ppoll,
        epoll_wait/epoll_pwait; only clock_nanosleep occurs: ``sleep_calls``);
    (b) ``after_readback``: of the rest, the idle stretches that begin where a
        device-to-host copy ends (within 2 us) up to the next GPU operation (the host's
        work on the values read back: the print and plt.cla, matplotlib's contour,
        plot and draw); ``after_readback_by_copy``: that time per step by the size of the
        copy that began the stretch (4 B: objective, 40804 B: mesh, 160 B: samples);
    (c) ``short_gaps``: of the rest, idle stretches shorter than 100 us;
    (d) ``other``: the remaining idle (JAX dispatch of eager ops and index uploads,
        the waits for XLA's transfer threads, the iteration of the mesh arrays).
  * ``main_futex``: the main thread's futex calls (OS runtime trace keeps calls of
    10 us or more): count and ms per step, ms per step while the GPU idled and how that
    splits over (b), (c), (d); ``idle_gap_count_per_step``; ``host_calls``
    (truth_jax.host_calls_in).
Threads: ``launching_threads`` (graph and kernel launch calls in the window per thread),
``copy_threads`` (cuMemcpy*Async calls in the window per thread), ``main_tid`` (the
process's main thread: tid == pid).
Compilation: truth_jax.compile_report against the step starts, plus ``compiler_runs
_before_first_update`` (runs ending before step 0's first update kernel: start-up arrays
and update), ``compiler_runs_in_first_callback`` (between it and step 1's start),
``compile_threads`` and ``graph_instantiations`` (CUDA_GRAPH_EVENTS graph-exec creations:
time and steps begun before).
Whole report: ``span_ms`` (earliest start to latest end of any CUDA API, OS-runtime,
NVTX or GPU row), ``gpu_busy_pct`` over it, ``startup_ms`` / ``startup_pct``: from the
span's start to step 0's start, ``first_gpu_op_ms``, ``compile_phase_ms`` (step 0's start
to step 1's start), ``tail_ms`` (the last GPU operation's end to the span's end).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import truth_jax as tj  # noqa: E402
from truthlib import THREAD_MASK, Report, ms, overlap_ns, pct, union  # noqa: E402

UPDATE_KERNEL = "loop_add_fusion_1"
STEPS = 100
SKIP = 2
TOUCH_NS = 2_000
SHORT_NS = 100_000
SLOW = 1.25
SLEEP = re.compile(r"^(nanosleep|clock_nanosleep|usleep|sleep|select|pselect\d*|poll|ppoll|"
                   r"epoll_wait|epoll_pwait\d*)$")
COPY_CALL = re.compile(r"^cuMemcpy\w*$")


def gaps_in(u: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The idle stretches [start, end) inside [lo, hi) of the busy union *u*."""
    v = np.clip(u[(u[:, 1] > lo) & (u[:, 0] < hi)], lo, hi)
    starts, ends = np.r_[lo, v[:, 1]], np.r_[v[:, 0], hi]
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1)


def pattern(rows: list[dict], key) -> dict:
    return {str(k): v for k, v in sorted(Counter(key(m) for m in rows).items())}


def alike(per: list[dict]) -> tuple[dict, int]:
    """The most common per-period pattern and in how many periods it occurs."""
    c = Counter(json.dumps(p, sort_keys=True) for p in per)
    top, n = c.most_common(1)[0]
    return json.loads(top), n


def main(path: str) -> dict:
    r = Report(path)
    pid = tj.main_pid(r)
    main_tid = pid
    execs = tj.graph_execs(r, 0)
    counts = tj.graph_counts(execs)
    cps = r.memcpys(0)
    upd = [k for k in r.kernels(0) if k[2] == UPDATE_KERNEL]
    h2d = [m for m in cps if m["kind"] == "Host-to-Device"]
    h2d_starts = np.array([m["start"] for m in h2d], dtype=np.int64)
    st = []
    for k in upd:
        i = int(np.searchsorted(h2d_starts, k[0], "right")) - 1
        st.append(int(h2d_starts[i]))
    out: dict = {"capture": tj.capture_health(r), "update_kernel": UPDATE_KERNEL,
                 "steps": len(upd), "steps_ok": len(upd) == STEPS,
                 "graph_executions_by_graph": {str(k): v for k, v in counts.items()},
                 "update_upload_lead_us_median": round(float(np.median(
                     [k[0] - s for k, s in zip(upd, st)])) / 1e3, 1),
                 "update_upload_lead_us_max": round(max(
                     k[0] - s for k, s in zip(upd, st)) / 1e3, 1)}
    per = np.diff(st)
    out["step_period_ms"] = {
        "all_median": ms(np.median(per)), "all_p90": ms(np.percentile(per, 90)),
        "first": ms(per[0]), "steady_median": ms(np.median(per[SKIP:])),
        "steady_p90": ms(np.percentile(per[SKIP:], 90)),
        "steady_min": ms(per[SKIP:].min()), "steady_max": ms(per[SKIP:].max())}
    u = union(r.gpu_intervals(0))
    med = float(np.median(per[SKIP:]))
    slow = []
    for i in range(SKIP, len(per)):
        if per[i] > SLOW * med:
            g = gaps_in(u, st[i], st[i + 1])
            j = int(np.argmax(g[:, 1] - g[:, 0]))
            slow.append({"step_index": i, "period_ms": ms(per[i]),
                         "longest_idle_ms": ms(g[j, 1] - g[j, 0]),
                         "longest_idle_at_ms_into_step": ms(g[j, 0] - st[i])})
    out["step_period_outliers"] = slow

    # per-period composition
    kern = r.kernels(0)
    obj_graphs = [g for g in counts if g != 4] if 4 in counts else list(counts)
    chk: dict = {"objective_graph_execs": [], "graph4_execs": [], "kernels": [],
                 "copies": []}
    bounds = list(zip(st, st[1:]))
    for a, b in bounds:
        chk["objective_graph_execs"].append(sum(1 for e in execs if a <= e["start"] < b
                                                and e["graph"] in obj_graphs))
        chk["graph4_execs"].append(sum(1 for e in execs if a <= e["start"] < b
                                       and e["graph"] == 4))
        chk["kernels"].append(sum(1 for k in kern if a <= k[0] < b))
        chk["copies"].append(sum(1 for m in cps if a <= m["start"] < b))
    out["step_check"] = {k: {str(x): n for x, n in sorted(Counter(v[SKIP:]).items())}
                         for k, v in chk.items()}
    out["step_check"]["objective_graph_execs_all_periods"] = {
        str(x): n for x, n in sorted(Counter(chk["objective_graph_execs"]).items())}

    lo, hi = st[SKIP], st[-1]
    win = hi - lo
    n = len(st) - 1 - SKIP
    busy = r.busy_ns(lo, hi)
    gpu = r.gpu_intervals(0)
    last_gpu = int(gpu[:, 1].max())
    steady: dict = {"window_ms": ms(win), "periods": n,
                    "from_step_index": SKIP, "to_step_index": len(st) - 1,
                    "gpu_busy_pct": pct(busy, win), "gpu_idle_pct": pct(win - busy, win),
                    "gpu_busy_ms_per_step": ms(busy / n)}
    work = [r.busy_ns(a, b) for a, b in bounds[SKIP:]]
    steady["gpu_work_ms_per_step"] = {"median": ms(np.median(work)), "min": ms(min(work)),
                                      "max": ms(max(work))}
    graph4 = [e["end"] - e["start"] for e in execs if e["graph"] == 4 and lo <= e["start"] < hi]
    steady["graph4_exec_us_median"] = round(float(np.median(graph4)) / 1e3, 1)
    steady["graph4_ms_per_step"] = ms(sum(graph4) / n)
    for kind, key in (("Device-to-Host", "d2h"), ("Host-to-Device", "h2d"),
                      ("Device-to-Device", "d2d")):
        pats = [pattern([m for m in cps if m["kind"] == kind and a <= m["start"] < b],
                        lambda m: m["bytes"]) for a, b in bounds[SKIP:]]
        top, k = alike(pats)
        steady[f"{key}_per_step"] = top
        steady[f"{key}_copies_per_step"] = sum(top.values())
        steady[f"{key}_periods_alike"] = k
        steady[f"{key}_src_dst"] = sorted({f"{m['src']}->{m['dst']}" for m in cps
                                           if m["kind"] == kind and lo <= m["start"] < hi})

    # idle split
    gaps = gaps_in(u, lo, hi)
    sleeps = [(a, b, nm) for a, b, nm, g in r.osrt_calls()
              if g & THREAD_MASK == main_tid and SLEEP.match(nm) and b > lo and a < hi]
    sleep_iv = np.array([(a, b) for a, b, _ in sleeps], dtype=np.int64).reshape(-1, 2)
    futex = [(a, b) for a, b, nm, g in r.osrt_calls(r"^futex$")
             if g & THREAD_MASK == main_tid and b > lo and a < hi]
    futex_iv = np.array(futex, dtype=np.int64).reshape(-1, 2)
    d2h = sorted((m["end"], m["bytes"]) for m in cps if m["kind"] == "Device-to-Host")
    d2h_ends = np.array([e for e, _ in d2h], dtype=np.int64)
    cat = {"sleep": 0, "after_readback": 0, "short_gaps": 0, "other": 0}
    fut = {"after_readback": 0, "short_gaps": 0, "other": 0}
    by_copy: Counter = Counter()
    for x, y in gaps.tolist():
        g = np.array([[x, y]], dtype=np.int64)
        s = overlap_ns(g, sleep_iv) if len(sleep_iv) else 0
        f = overlap_ns(g, futex_iv) if len(futex_iv) else 0
        cat["sleep"] += s
        rest = (y - x) - s
        k = int(np.searchsorted(d2h_ends, x + TOUCH_NS, "right")) - 1
        if k >= 0 and 0 <= x - d2h_ends[k] <= TOUCH_NS:
            key = "after_readback"
            by_copy[str(d2h[k][1])] += rest
        elif y - x < SHORT_NS:
            key = "short_gaps"
        else:
            key = "other"
        cat[key] += rest
        fut[key] += f
    idle = win - busy
    assert sum(cat.values()) == idle, (cat, idle)
    steady["idle_split_pct"] = {k: pct(v, win) for k, v in cat.items()}
    steady["idle_split_ms_per_step"] = {k: ms(v / n) for k, v in cat.items()}
    steady["idle_split_share_of_idle_pct"] = {k: pct(v, idle) for k, v in cat.items()}
    steady["after_readback_by_copy_bytes_ms_per_step"] = {
        k: ms(v / n) for k, v in sorted(by_copy.items(), key=lambda kv: int(kv[0]))}
    steady["idle_gap_count_per_step"] = round(len(gaps) / n, 2)
    steady["sleep_calls"] = {nm: {"calls_per_step": round(c / n, 2),
                                  "ms_per_step": ms(sum(b - a for a, b, x in sleeps
                                                        if x == nm) / n),
                                  "median_ms": ms(np.median([b - a for a, b, x in sleeps
                                                             if x == nm]))}
                             for nm, c in Counter(x for *_, x in sleeps).items()}
    steady["sleep_while_gpu_busy_ms"] = ms(overlap_ns(sleep_iv, gpu, lo, hi)) \
        if len(sleep_iv) else 0.0
    fdur = futex_iv[:, 1] - futex_iv[:, 0]
    steady["main_futex"] = {
        "calls_per_step": round(len(futex_iv) / n, 2),
        "ms_per_step": ms(int(np.clip(futex_iv, lo, hi)[:, 1].sum()
                              - np.clip(futex_iv, lo, hi)[:, 0].sum()) / n),
        "median_us": round(float(np.median(fdur)) / 1e3, 1),
        "calls_over_100us_per_step": round(int((fdur > SHORT_NS).sum()) / n, 2),
        "while_gpu_idle_ms_per_step": ms(sum(fut.values()) / n),
        "while_gpu_idle_by_category_ms_per_step": {k: ms(v / n) for k, v in fut.items()}}
    steady["host_calls"] = tj.host_calls_in(r, pid, lo, hi)
    steady["launching_threads"] = tj.launching_threads(r, pid, lo, hi)
    names = {g & THREAD_MASK: r.strings.get(nm, "") for nm, g in
             r.q("select nameId, globalTid from ThreadNames")} if r.has("ThreadNames") else {}
    copies = Counter(g & THREAD_MASK for a, _, _, g, _ in tj.api_rows(r, COPY_CALL, pid)
                     if lo <= a < hi)
    steady["copy_threads"] = {f"{t} {names.get(t, '')}".strip(): c
                              for t, c in copies.most_common()}
    steady["copy_calls_by_name"] = {k: v for k, v in sorted(Counter(
        nm for a, _, nm, _, _ in tj.api_rows(r, COPY_CALL, pid) if lo <= a < hi).items())}
    out["steady"] = steady
    out["main_tid"] = main_tid
    out["last_step_ms"] = ms(last_gpu - st[-1])

    # compilation
    comp = tj.compile_report(r, pid, st, lo, hi, execs)
    runs = tj.compiler_runs(r, pid)
    comp["compiler_runs_before_first_update"] = sum(1 for x in runs if x["end"] <= upd[0][0])
    comp["compiler_runs_in_first_callback"] = sum(1 for x in runs
                                                  if upd[0][0] < x["end"] <= st[1])
    comp["compiler_runs_after_step1_start"] = sum(1 for x in runs if x["end"] > st[1])
    comp["compile_threads"] = sorted({x["tid"] for x in runs})
    comp["last_compiler_run_end_before_step1_ms"] = ms(st[1] - max(x["end"] for x in runs))
    loads = [a for a, *_ in tj.api_rows(r, tj.MODULE_LOAD, pid)]
    comp["module_loads_before_step0"] = sum(1 for a in loads if a < st[0])
    comp["module_loads_in_step0"] = sum(1 for a in loads if st[0] <= a < st[1])
    comp["module_loads_after_step0"] = sum(1 for a in loads if a >= st[1])
    # eventClass 94: TRACE_PROCESS_EVENT_CUDA_GRAPHEXEC_CREATION (ENUM_NSYS_EVENT_CLASS)
    inst = r.q("select start, graphId, graphExecId from CUDA_GRAPH_EVENTS where "
               "eventClass = 94 order by start") if r.has("CUDA_GRAPH_EVENTS") else []
    comp["graph_instantiations"] = [{"ms": ms(a), "graph_exec": x,
                                     "steps_begun_before": tj.steps_before(a, st)}
                                    for a, _g, x in inst]
    out["compilation"] = comp

    # whole report
    tables = [t for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API", "NVTX_EVENTS",
                          *tj.GPU_TABLES) if r.has(t)]
    t0 = min(r.q(f"select min(start) from {t} where start > 0")[0][0] for t in tables)
    t1 = max(r.q(f"select max(coalesce(end, start)) from {t}")[0][0] for t in tables)
    span = t1 - t0
    out["whole"] = {"span_ms": ms(span), "span_start_ms": ms(t0),
                    "gpu_busy_pct": pct(r.busy_ns(t0, t1), span),
                    "gpu_busy_ms": ms(r.busy_ns(t0, t1)),
                    "first_gpu_op_ms": ms(int(gpu[:, 0].min())),
                    "startup_ms": ms(st[0] - t0), "startup_pct": pct(st[0] - t0, span),
                    "compile_phase_ms": ms(st[1] - st[0]),
                    "compile_phase_pct": pct(st[1] - st[0], span),
                    "steady_window_pct_of_span": pct(win, span),
                    "tail_ms": ms(t1 - last_gpu)}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
