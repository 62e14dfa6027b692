"""JAX/XLA readings shared by the jax-* truth scripts (plain sqlite3/numpy, no gpugap).

The captures hold no XLA NVTX ranges (recaptured with --nvtx-domain-exclude=TSL, see the
manifest's "first_attempt"): the steps are the CUDA graph executions (XLA command
buffers, CUPTI graph-level trace) or marker kernels; compilation is found from what XLA
leaves on the host: its compile threads spawn ptxas/nvlink (posix_spawnp ... waitpid in
the OS-runtime trace), and the modules it built are loaded (cuModuleLoadData /
cuLibraryLoad*) before their first launch.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from truthlib import THREAD_MASK, Report, ms, pct

GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
CUPTI_PRODUCED = re.compile(r"Number of CUPTI events produced:\s*(\d+)")
SPAWN = re.compile(r"^(posix_spawnp?|fork|vfork|execv\w*|system|popen)$")
REAP = re.compile(r"^(waitpid|wait4|waitid|wait)$")
MODULE_LOAD = re.compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*|cudaLibraryLoad\w*)$")
ALLOC = re.compile(r"^(cudaMalloc\w*|cudaFree\w*|cuMemAlloc\w*|cuMemFree\w*|cuMemCreate|"
                   r"cuMemRelease|cuMemMap|cuMemUnmap|cuMemAddressReserve|cuMemAddressFree|"
                   r"cudaHostAlloc|cuMemHostAlloc|cudaMallocHost|cuMemFreeHost)$")
SYNC = re.compile(r"^(cu|cuda)(Ctx|Device|Stream|Event)Synchronize\w*$")
LAUNCH = re.compile(r"^(cuGraphLaunch\w*|cudaGraphLaunch\w*|cuLaunchKernel\w*|"
                    r"cudaLaunchKernel\w*|cuLaunchCooperative\w*|cudaLaunchCooperative\w*)$")
COMPILE_GAP_NS = 250_000_000      # compiler runs closer than this are one compilation
XLA_NVTX = re.compile(r"^(XlaModule|XlaCompile|Thunk):")


def base_name(r: Report, name_id: int) -> str:
    return re.sub(r"_v\d+$", "", r.strings.get(name_id, str(name_id)))


def capture_health(r: Report) -> dict:
    """Did nsys export the CUDA trace it collected? CUPTI's own count of the events it
    produced (a DIAGNOSTIC_EVENT per process) against the CUPTI activity rows in the export
    (a healthy capture exports about all of them), and nsys's event-processing errors
    (the first captures, with XLA's NVTX domain TSL traced, failed with "Cannot find string
    for an exterior index" and lost most GPU activity). Also: XLA NVTX ranges left in the
    capture (none expected: domain TSL excluded)."""
    diag = [t for (t,) in r.q("select text from DIAGNOSTIC_EVENT")] \
        if r.has("DIAGNOSTIC_EVENT") else []
    produced = sum(int(m.group(1)) for m in (CUPTI_PRODUCED.search(t) for t in diag) if m)
    exported = sum(r.q(f"select count(*) from {t}")[0][0] for t in sorted(r.tables)
                   if t.startswith("CUPTI_ACTIVITY_KIND_"))
    errors = sum(1 for t in diag if t.startswith("Error when processing events"))
    exterior = sum(1 for t in diag if "exterior index" in t)
    complete = errors == 0 and (produced == 0 or exported >= 0.95 * produced)
    return {"complete": complete, "cupti_events_produced": produced,
            "cupti_rows_exported": exported, "exported_pct": pct(exported, produced),
            "nsys_processing_errors": errors, "exterior_index_errors": exterior,
            "xla_nvtx_ranges": len(r.ranges(XLA_NVTX.pattern))}


def manifest_result(path: str) -> dict:
    """The program's RESULT line, from the capture's manifest beside it (if there)."""
    p = Path(re.sub(r"\.sqlite(\.xz)?$", "", path) + ".manifest.json")
    try:
        return json.loads(p.read_text()).get("result") or {}
    except (OSError, ValueError):
        return {}


def main_pid(r: Report) -> int:
    """The process that launched the most GPU work (the Python program)."""
    counts: dict = defaultdict(int)
    for t in GPU_TABLES:
        if r.has(t):
            for g, n in r.q(f"select globalPid, count(*) from {t} group by globalPid"):
                counts[(g >> 24) & THREAD_MASK] += n
    return max(counts, key=counts.get) if counts else 0


def api_rows(r: Report, pattern: re.Pattern, pid: int | None = None) -> list[tuple]:
    """(start, end, name, globalTid, correlationId) of CUDA API calls matching *pattern*
    (name without its _vNNNN suffix), by start; *pid*: only that process's."""
    out = []
    for a, b, n, g, c in r.q("select start, end, nameId, globalTid, correlationId from "
                             "CUPTI_ACTIVITY_KIND_RUNTIME order by start"):
        if pid is not None and (g >> 24) & THREAD_MASK != pid:
            continue
        name = base_name(r, n)
        if pattern.search(name):
            out.append((a, b, name, g, c))
    return out


def graph_execs(r: Report, device: int) -> list[dict]:
    """Every CUDA graph execution on *device* (graph-level trace), by start, with the
    host call that launched it (joined on correlationId within the process)."""
    calls = {((g >> 24) & THREAD_MASK, c): (a, g & THREAD_MASK)
             for a, _, _, g, c in api_rows(r, re.compile(r"GraphLaunch"))}
    if not r.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        return []
    out = []
    for a, b, gid, c, gp in r.q("select start, end, graphId, correlationId, globalPid from "
                                "CUPTI_ACTIVITY_KIND_GRAPH_TRACE where deviceId = ? "
                                "order by start", device):
        host = calls.get(((gp >> 24) & THREAD_MASK, c), (None, None))
        out.append({"start": a, "end": b, "graph": int(gid), "launch": host[0],
                    "thread": host[1]})
    return out


def graph_counts(execs: list[dict]) -> dict:
    """graphId -> executions, most executed first (ties: first executed first)."""
    counts: dict = defaultdict(int)
    first: dict = {}
    for e in execs:
        counts[e["graph"]] += 1
        first.setdefault(e["graph"], e["start"])
    return {k: counts[k] for k in sorted(counts, key=lambda k: (-counts[k], first[k]))}


def compiler_runs(r: Report, pid: int) -> list[dict]:
    """The compiler processes XLA ran (ptxas, nvlink): each posix_spawn(p) on a thread of
    *pid* paired with that thread's next waitpid, from the spawn to the end of the wait."""
    rows = [(a, b, r.strings.get(n, ""), g) for a, b, n, g in r.q(
        "select start, end, nameId, globalTid from OSRT_API order by start")
        if (g >> 24) & THREAD_MASK == pid] if r.has("OSRT_API") else []
    open_: dict = {}
    out = []
    for a, b, name, g in rows:
        if SPAWN.match(name):
            open_.setdefault(g, []).append(a)
        elif REAP.match(name) and open_.get(g):
            out.append({"start": open_[g].pop(0), "end": b, "tid": g & THREAD_MASK})
    for g, starts in open_.items():
        out += [{"start": a, "end": a, "tid": g & THREAD_MASK} for a in starts]
    return sorted(out, key=lambda x: x["start"])


def child_processes(r: Report, pid: int) -> list[dict]:
    """Processes started during the capture besides the program (nsys injects into each:
    its first diagnostic), with their names where the capture has them."""
    if not r.has("DIAGNOSTIC_EVENT"):
        return []
    names = dict(r.q("select pid, name from PROCESSES")) if r.has("PROCESSES") else {}
    first: dict = {}
    for t, g in r.q("select timestamp, globalPid from DIAGNOSTIC_EVENT where globalPid is "
                    "not null and text like '%injection library initialized%'"):
        p = (g >> 24) & THREAD_MASK
        if p and p != pid:
            first[p] = min(first.get(p, t), t)
    return [{"pid": p, "start": t, "name": names.get(p, "")}
            for p, t in sorted(first.items(), key=lambda kv: kv[1])]


def compilations(runs: list[dict], gap: int = COMPILE_GAP_NS) -> list[dict]:
    """Compiler runs merged into compilations (runs closer than *gap*): start, end, runs.
    The span covers the ptxas/nvlink part only; XLA's HLO passes and LLVM codegen come
    before it on the host, so a compilation starts earlier than its first run."""
    out: list[dict] = []
    for x in runs:
        if out and x["start"] - out[-1]["end"] <= gap:
            out[-1]["end"] = max(out[-1]["end"], x["end"])
            out[-1]["runs"] += 1
        else:
            out.append({"start": x["start"], "end": x["end"], "runs": 1})
    return out


def steps_before(t: int, starts: list[int]) -> int:
    """How many steps (GPU starts) came before time *t*."""
    return int(np.searchsorted(np.asarray(starts, dtype=np.int64), t, "right"))


def host_calls_in(r: Report, pid: int, lo: int, hi: int) -> dict:
    """CUDA API calls of *pid* starting in [lo, hi) that would be findings of their own:
    module loads, allocations, synchronisations (count and ms each), and launches."""
    out = {"module_loads": [0, 0], "allocations": [0, 0], "syncs": [0, 0], "launches": [0, 0]}
    for a, b, name, _g, _ in api_rows(r, re.compile("."), pid):
        if not lo <= a < hi:
            continue
        for key, rx in (("module_loads", MODULE_LOAD), ("allocations", ALLOC),
                        ("syncs", SYNC), ("launches", LAUNCH)):
            if rx.match(name):
                out[key][0] += 1
                out[key][1] += b - a
    return {k: {"calls": v[0], "ms": ms(v[1])} for k, v in out.items()}


def launching_threads(r: Report, pid: int, lo: int, hi: int) -> dict:
    """"tid name" -> launch calls (graph and kernel launches) of *pid* in [lo, hi)."""
    names = {g & THREAD_MASK: r.strings.get(n, "") for n, g in
             r.q("select nameId, globalTid from ThreadNames")} if r.has("ThreadNames") else {}
    out: dict = defaultdict(int)
    for a, _, _, g, _ in api_rows(r, LAUNCH, pid):
        if lo <= a < hi:
            out[g & THREAD_MASK] += 1
    return {f"{k} {names.get(k, '')}".strip(): v
            for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def compile_report(r: Report, pid: int, step_starts: list[int], lo: int, hi: int,
                   execs: list[dict] | None = None) -> dict:
    """Where XLA compiled, relative to the steps: every compilation (from its compiler
    runs) with the number of steps whose GPU work had started before it (and, given the
    graph executions *execs*, the first graph executed after it), and the module loads;
    those inside the steady window [lo, hi) counted apart."""
    runs = compiler_runs(r, pid)
    comps = compilations(runs)
    loads = [a for a, *_ in api_rows(r, MODULE_LOAD, pid)]
    for c in comps:
        nxt = next((e for e in execs or [] if e["start"] >= c["end"]), None)
        c["next_graph"] = nxt["graph"] if nxt else None
    return {"compiler_runs": len(runs),
            "child_processes": len(child_processes(r, pid)),
            "child_process_names": sorted({c["name"] for c in child_processes(r, pid)
                                           if c["name"]}),
            "compilations": [{"start_ms": ms(c["start"]), "ms": ms(c["end"] - c["start"]),
                              "runs": c["runs"],
                              "steps_before": steps_before(c["start"], step_starts),
                              **({"next_graph": c["next_graph"]} if execs else {})}
                             for c in comps],
            "compiler_runs_by_steps_before": {
                str(k): v for k, v in sorted(Counter(
                    steps_before(x["start"], step_starts) for x in runs).items())},
            "compiler_runs_in_steady": sum(1 for x in runs if lo <= x["start"] < hi),
            "last_compiler_run_end_ms": ms(max((x["end"] for x in runs), default=0)),
            "module_loads": len(loads),
            "module_loads_in_steady": sum(1 for a in loads if lo <= a < hi),
            "first_step_gpu_start_ms": ms(step_starts[0]) if step_starts else None}


def finish(out: dict, rc: int = 0) -> int:
    """Print the figures; a capture whose CUDA trace was not fully exported is an error."""
    cap = out.get("capture")
    if cap is not None and not cap["complete"]:
        out["error"] = (f"capture incomplete: nsys exported {cap['cupti_rows_exported']} of "
                        f"the {cap['cupti_events_produced']} CUPTI events it produced "
                        f"({cap['nsys_processing_errors']} event-processing errors)"
                        + (f" ({out['error']})" if "error" in out else ""))
        rc = 1
    print(json.dumps(out))
    return rc
