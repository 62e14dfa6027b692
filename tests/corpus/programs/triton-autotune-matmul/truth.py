"""Truth figures for triton-autotune-matmul, from the export alone (sqlite3 + numpy, no
gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: 150 NVTX ranges `step` (torch.cuda.nvtx.range, default
domain), each calling the @triton.autotune'd `matmul_kernel` once; the first call (in
step 0) JIT-compiles the 5 configs and benchmarks each with do_bench (a `zero_` kernel
before each timed call, events, synchronisations), then runs the best config. Steps
1..149 launch one matmul each, no sync in the loop (one torch.cuda.synchronize after it).

Figures (times in ns on the session clock unless the key says ms/us):
- iterations: the `step` ranges. A kernel belongs to the range in which its launch call
  (the CUDA API row with the kernel's correlationId, same process) started.
- Step 0 (autotuning): step0_ms (its range's duration); step0_kernels (kernels launched
  inside it, by name); step0_matmul_configs (distinct (grid, block, dynamic shared
  memory, registers) of its matmul kernels: one per config); step0_matmul_per_config
  (matmul launches per config); step0_sync_calls (*Synchronize* calls starting in it).
- Compilation evidence, on the host: spawns (posix_spawn*/fork/vfork/exec*/system/popen
  OS-runtime calls of the main process, the one that launched the kernels), the main
  process's time blocked in waitpid/wait* (ms), and the child processes the OS-runtime
  trace followed (processes other than the main one with OS-runtime rows, started after
  it), with the names the PROCESSES table gives them (nsys names only some);
  compile_wait_in_step0_ms: the waitpid time inside step 0's range.
- Module loads (cuModuleLoad* / cuLibraryLoad* / cudaLibraryLoad*, count per name) by
  phase: before step 0's range, inside step 0's range, between step 0's end and the
  steady window, inside the steady window, after it.
- Start-up: startup_ms_from_first_gpu_activity: from the first GPU activity (kernel, copy
  or memset) to the GPU start of step 1's first kernel (the 2nd step, the first steady
  one); startup_ms_from_first_step: from step 0's range start to that same kernel start.
- Steady window: from the GPU start of the 3rd step's matmul (step 2) to the GPU end of
  the last step's matmul. busy_pct / idle_pct: union of all GPU work in the window, as %
  of the window, and the rest; idle gaps: count and largest (us).
- matmul_ms_median (and min/max): the steady steps' matmul kernels (steps 2..last).
- launches_per_steady_step: launch calls (cuLaunchKernel* / cudaLaunchKernel*) starting
  inside each of steps 1..last: mean, min, max; kernels_per_steady_step likewise (by
  the kernels' launch calls). host_us_per_step_median: the duration of ranges 1..last.
- gpu_behind_host_ms: the GPU end of the last matmul minus the last range's end (the host
  runs ahead: the ranges end long before their kernels run).
- calls_in_steady_window: sync / allocation / copy / memset / module-load CUDA API calls
  starting inside the steady window, count per name (the design: none: the loop's one
  torch.cuda.synchronize starts before the window ends but is the host's wait for the
  queued matmuls; it is listed apart as final_sync_in_window).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, pct  # noqa: E402

KERNEL = "matmul_kernel"
SKIP = 2
MODULE_LOAD = r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$"
SPAWN = r"^(posix_spawnp?|fork|vfork|execv\w*|system|popen)$"
REAP = r"^(waitpid|wait4|waitid|wait)$"
WATCHED = (r"(Synchronize|^cudaStreamWaitEvent|^cudaEventQuery|Malloc|Free|^cuMemAlloc|"
           r"^cuMemFree|^cuMemCreate$|^cudaHostAlloc|Memcpy|Memset|^cuModuleLoad|"
           r"^cuLibraryLoad)")
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET")


def pid_of(g: int) -> int:
    return (g >> 24) & THREAD_MASK


def counts(rows: list[tuple]) -> dict[str, int]:
    return dict(sorted(Counter(row[2] for row in rows).items()))


def main(path: str) -> dict:
    r = Report(path)
    steps = r.ranges(r"^step$", domain="")
    out: dict = {"iterations": len(steps)}
    if len(steps) <= SKIP + 1:
        return out | {"error": "too few step ranges"}
    launches = r.launch_calls()
    lstart = np.array([a for a, *_ in launches], dtype=np.int64)
    by_corr = {(pid_of(g), c): a for a, _b, _n, g, c in launches}
    rows = r.q("select start, end, shortName, correlationId, globalPid, gridX * gridY * "
               "gridZ, blockX * blockY * blockZ, dynamicSharedMemory, registersPerThread "
               "from CUPTI_ACTIVITY_KIND_KERNEL order by start")
    ks = [{"start": a, "end": b, "name": r.strings.get(n, str(n)),
           "launch": by_corr.get((pid_of(gp), c)), "pid": pid_of(gp),
           "config": (gr, bl, dsm, reg)}
          for a, b, n, c, gp, gr, bl, dsm, reg in rows]
    starts = np.array([s.start for s in steps], dtype=np.int64)
    per_step: list[list[dict]] = [[] for _ in steps]
    for k in ks:
        if k["launch"] is None:
            continue
        i = int(np.searchsorted(starts, k["launch"], side="right")) - 1
        if i >= 0 and k["launch"] < steps[i].end:
            per_step[i].append(k)
    for p in per_step:
        p.sort(key=lambda k: k["launch"])
    main_pid = Counter(k["pid"] for k in ks).most_common(1)[0][0]

    # Step 0: autotuning.
    s0 = steps[0]
    mm0 = [k for k in per_step[0] if k["name"] == KERNEL]
    per_cfg = Counter(k["config"] for k in mm0)
    cfg_order = sorted(per_cfg, key=lambda c: min(k["launch"] for k in mm0
                                                  if k["config"] == c))

    # Compilation evidence on the host.
    osrt = r.osrt_calls(".")
    main_osrt = [c for c in osrt if pid_of(c[3]) == main_pid]
    spawns = [c for c in main_osrt if re.search(SPAWN, c[2])]
    reaps = [c for c in main_osrt if re.search(REAP, c[2])]
    first_main = min((c[0] for c in main_osrt), default=0)
    child_first: dict[int, int] = {}
    for a, _b, _n, g in osrt:
        p = pid_of(g)
        if p != main_pid:
            child_first[p] = min(a, child_first.get(p, a))
    children = sorted(p for p, a in child_first.items() if a >= first_main)
    pnames = {p: n for p, n in r.q("select pid, name from PROCESSES")} \
        if r.has("PROCESSES") else {}
    child_names = Counter((pnames.get(p) or "?").rsplit("/", 1)[-1] for p in children)

    # Windows.
    def mm(p: list[dict]) -> dict | None:
        return next((k for k in p if k["name"] == KERNEL), None)

    k1 = per_step[1][0] if per_step[1] else None
    lo = mm(per_step[SKIP])["start"]
    hi = mm(per_step[-1])["end"]
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    gap_ns = (gaps[:, 1] - gaps[:, 0]) if len(gaps) else np.zeros(0, dtype=np.int64)
    first_gpu = min(r.q(f"select min(start) from {t}")[0][0] for t in GPU_TABLES
                    if r.has(t) and r.q(f"select count(*) from {t}")[0][0])

    # Module loads by phase.
    loads = r.api_calls(MODULE_LOAD)
    phases: dict = defaultdict(list)
    for row in loads:
        a = row[0]
        key = ("before_step0" if a < s0.start else "in_step0" if a < s0.end
               else "before_steady_window" if a < lo else "in_steady_window" if a < hi
               else "after_steady_window")
        phases[key].append(row)
    order = ("before_step0", "in_step0", "before_steady_window", "in_steady_window",
             "after_steady_window")

    steady_mm = [mm(p) for p in per_step[SKIP:] if mm(p)]
    dur = [k["end"] - k["start"] for k in steady_mm]
    n_launch, n_kern = [], []
    for i in range(1, len(steps)):
        a = int(np.searchsorted(lstart, steps[i].start, side="left"))
        b = int(np.searchsorted(lstart, steps[i].end, side="left"))
        n_launch.append(b - a)
        n_kern.append(len(per_step[i]))
    calls = r.api_calls(WATCHED, lo, hi)
    final_sync = [c for c in calls if c[0] >= steps[-1].end and "Synchronize" in c[2]][:1]
    calls = [c for c in calls if c not in final_sync]
    wait_in_s0 = sum(min(b, s0.end) - max(a, s0.start) for a, b, _n, _g in reaps
                     if b > s0.start and a < s0.end)
    out |= {
        "steady_steps": len(steps) - 1,
        "step0_ms": round(s0.ns / 1e6, 3),
        "step0_kernels": dict(sorted(Counter(k["name"] for k in per_step[0]).items())),
        "step0_kernels_total": len(per_step[0]),
        "step0_matmul_configs": len(per_cfg),
        "step0_matmul_per_config": [per_cfg[c] for c in cfg_order],
        "step0_matmul_grids": [c[0] for c in cfg_order],
        "step0_sync_calls": counts(r.api_calls(r"Synchronize", s0.start, s0.end)),
        "spawns": counts(spawns),
        "spawns_in_step0": len([c for c in spawns if s0.start <= c[0] < s0.end]),
        "child_wait_ms": round(sum(b - a for a, b, *_ in reaps) / 1e6, 3),
        "compile_wait_in_step0_ms": round(wait_in_s0 / 1e6, 3),
        "child_processes": len(children),
        "child_processes_in_step0": len([p for p in children
                                         if s0.start <= child_first[p] < s0.end]),
        "child_process_names": dict(sorted(child_names.items())),
        "module_loads": {k: counts(phases[k]) for k in order},
        "startup_ms_from_first_gpu_activity":
            round((k1["start"] - first_gpu) / 1e6, 3) if k1 else None,
        "startup_ms_from_first_step": round((k1["start"] - s0.start) / 1e6, 3) if k1 else None,
        "steady_window_ns": [int(lo), int(hi)],
        "steady_ms": round(span / 1e6, 3),
        "steady_matmuls": len(steady_mm),
        "busy_pct": pct(busy, span),
        "idle_pct": pct(span - busy, span),
        "idle_gaps": int(len(gap_ns)),
        "largest_gap_us": round(float(gap_ns.max()) / 1e3, 2) if len(gap_ns) else 0.0,
        "matmul_ms_median": round(float(np.median(dur)) / 1e6, 4),
        "matmul_ms_min_max": [round(min(dur) / 1e6, 4), round(max(dur) / 1e6, 4)],
        "matmul_grid_steady": sorted({k["config"][0] for k in steady_mm}),
        "launches_per_steady_step": {"mean": round(float(np.mean(n_launch)), 3),
                                     "min": int(min(n_launch)), "max": int(max(n_launch))},
        "kernels_per_steady_step": {"mean": round(float(np.mean(n_kern)), 3),
                                    "min": int(min(n_kern)), "max": int(max(n_kern))},
        "host_us_per_step_median": round(float(np.median([s.ns for s in steps[1:]])) / 1e3,
                                         2),
        "gpu_behind_host_ms": round((hi - steps[-1].end) / 1e6, 3),
        "calls_in_steady_window": counts(calls),
        "final_sync_in_window": counts(final_sync),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
