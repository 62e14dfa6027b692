"""Truth figures for cpp-default-stream, from the export alone (sqlite3 + numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

What the program knows it did: two blocking streams s1, s2 (plain cudaStreamCreate) and
the legacy default stream; 200 NVTX push/pop ranges `iteration` (default domain), each
launching work_a (s1), mark_progress (legacy stream), work_b (s2), mark_progress (legacy
stream), no sync in the loop. Warm-up before the loop (outside any range): one work_a,
one work_b, one mark_progress. The host enqueues everything far ahead of the GPU.

Figures (times in ns on the session clock unless the key says ms/us):
- iterations: the `iteration` ranges. A kernel belongs to the range in which its launch
  call (the CUDA API row with the kernel's correlationId, same process) started; the
  kernels of an iteration are taken in launch order. kernels_total / kernels_in_ranges:
  per kernel name, all of them and those launched inside a range.
- iterations_with_designed_order: ranges whose kernels were exactly work_a, mark_progress,
  work_b, mark_progress in launch order.
- streams: per kernel name, the streamId(s) it ran on; legacy_stream_id: the context's
  nullStreamId (TARGET_INFO_CUDA_CONTEXT_INFO).
- host_loop_ms: first range start to last range end; gpu_loop_ms: the GPU start of the
  first range's work_a to the GPU end of the last kernel launched in a range (the host
  runs far ahead: host_loop_ms << gpu_loop_ms).
- Steady window: from the GPU start of the 3rd iteration's work_a to the GPU end of the
  last iteration's work_b (the last marker left out). busy_pct / idle_pct: union of all
  GPU work in the window, as % of the window, and the rest.
- ab_overlap_ns: time in the window during which a work_a kernel and a work_b kernel ran
  at once (union of work_a against union of work_b); ab_overlap_pct: that as % of the
  work_a + work_b kernel time in the window (the design: ~0).
- serialized_streams_share_pct (the designed cause's share): the sum over the steady
  iterations (3rd..last) of min(duration of its work_a, duration of its work_b), the time
  that full overlap of each iteration's A and B would save, as % of the window.
- us_per_iteration: the window / the steady iterations.
- Markers (mark_progress launched in the steady iterations): duration median/min/max us,
  and the % of the window they cover.
- Gaps: idle stretches of the window (count, total as %, median and max us), and the
  median idle between consecutive kernels of the steady iterations by transition:
  a->m1 (work_a end to the first marker's start), m1->b, b->m2, m2->next_a.
- Grid: blocks per work kernel (gridX*gridY*gridZ, the modal value), threads per block,
  the device's SM count (TARGET_INFO_GPU.smCount of the kernels' device), SMs a work
  kernel can occupy at most (min(blocks, SMs)) and that as % of the SMs.
- calls_in_steady_ranges: sync / allocation / copy / memset / module-load CUDA API calls
  starting in [3rd range start, last range end), count per name (the design: none).
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import THREAD_MASK, Report, clipped_ns, overlap_ns, pct  # noqa: E402

A, B, M = "work_a", "work_b", "mark_progress"
SKIP = 2
WATCHED = (r"(Synchronize|^cudaStreamWaitEvent|^cudaEventQuery|Malloc|Free|^cuMemAlloc|"
           r"^cuMemFree|^cuMemCreate$|^cudaHostAlloc|Memcpy|Memset|^cuModuleLoad|"
           r"^cuLibraryLoad)")


def us(values, fn=np.median) -> float | None:
    return round(float(fn(values)) / 1e3, 2) if len(values) else None


def main(path: str) -> dict:
    r = Report(path)
    its = r.ranges(r"^iteration$", domain="")
    out: dict = {"iterations": len(its)}
    if len(its) <= SKIP + 1:
        return out | {"error": "too few iteration ranges"}
    by_corr = {(((g >> 24) & THREAD_MASK), c): a for a, _b, _n, g, c in r.launch_calls()}
    rows = r.q("select start, end, shortName, streamId, correlationId, globalPid, deviceId, "
               "gridX * gridY * gridZ, blockX * blockY * blockZ from "
               "CUPTI_ACTIVITY_KIND_KERNEL order by start")
    ks = [{"start": a, "end": b, "name": r.strings.get(n, str(n)), "stream": s,
           "launch": by_corr.get((((gp >> 24) & THREAD_MASK), c)), "device": d,
           "blocks": gb, "threads": tb}
          for a, b, n, s, c, gp, d, gb, tb in rows]
    starts = np.array([rg.start for rg in its], dtype=np.int64)
    per_it: list[list[dict]] = [[] for _ in its]
    for k in ks:
        if k["launch"] is None:
            continue
        i = int(np.searchsorted(starts, k["launch"], side="right")) - 1
        if i >= 0 and k["launch"] < its[i].end:
            per_it[i].append(k)
    for p in per_it:
        p.sort(key=lambda k: k["launch"])
    designed = [A, M, B, M]
    in_order = sum(1 for p in per_it if [k["name"] for k in p] == designed)
    total = Counter(k["name"] for k in ks)
    in_ranges = Counter(k["name"] for p in per_it for k in p)
    streams: dict = defaultdict(set)
    for k in ks:
        streams[k["name"]].add(k["stream"])
    null_stream = r.q("select nullStreamId from TARGET_INFO_CUDA_CONTEXT_INFO") \
        if r.has("TARGET_INFO_CUDA_CONTEXT_INFO") else []

    def first(p: list[dict], name: str) -> dict | None:
        return next((k for k in p if k["name"] == name), None)

    steady = [p for p in per_it[SKIP:] if first(p, A) and first(p, B)]
    lo = first(per_it[SKIP], A)["start"]
    hi = first(per_it[-1], B)["end"]
    span = hi - lo
    busy = r.busy_ns(lo, hi)
    gaps = r.idle_gaps(lo, hi)
    gap_ns = (gaps[:, 1] - gaps[:, 0]) if len(gaps) else np.zeros(0, dtype=np.int64)
    a_iv = np.array([(k["start"], k["end"]) for k in ks if k["name"] == A],
                    dtype=np.int64).reshape(-1, 2)
    b_iv = np.array([(k["start"], k["end"]) for k in ks if k["name"] == B],
                    dtype=np.int64).reshape(-1, 2)
    ab_ov = overlap_ns(a_iv, b_iv, lo, hi)
    ab_time = clipped_ns(a_iv, lo, hi) + clipped_ns(b_iv, lo, hi)
    save = sum(min(first(p, A)["end"] - first(p, A)["start"],
                   first(p, B)["end"] - first(p, B)["start"]) for p in steady)
    marks = [k for p in per_it[SKIP:] for k in p if k["name"] == M]
    mdur = [k["end"] - k["start"] for k in marks]
    m_iv = np.array([(k["start"], k["end"]) for k in marks], dtype=np.int64).reshape(-1, 2)
    # Idle between consecutive kernels of the steady iterations, by transition.
    trans: dict = defaultdict(list)
    keys = ("a->m1", "m1->b", "b->m2")
    for i in range(SKIP, len(its)):
        p = per_it[i]
        if [k["name"] for k in p] != designed:
            continue
        for key, k1, k2 in zip(keys, p, p[1:]):
            trans[key].append(k2["start"] - k1["end"])
        if i + 1 < len(its) and [k["name"] for k in per_it[i + 1]] == designed:
            trans["m2->next_a"].append(per_it[i + 1][0]["start"] - p[3]["end"])
    work = [k for k in ks if k["name"] in (A, B)]
    blocks = Counter(k["blocks"] for k in work).most_common(1)[0][0] if work else 0
    threads = Counter(k["threads"] for k in work).most_common(1)[0][0] if work else 0
    dev = work[0]["device"] if work else 0
    sm = r.q("select smCount from TARGET_INFO_GPU where id = ?", dev) \
        if r.has("TARGET_INFO_GPU") else []
    sms = int(sm[0][0]) if sm else 0
    calls = r.api_calls(WATCHED, its[SKIP].start, its[-1].end)
    last_k = max(k["end"] for k in per_it[-1])
    out |= {
        "kernels_total": dict(sorted(total.items())),
        "kernels_in_ranges": dict(sorted(in_ranges.items())),
        "iterations_with_designed_order": in_order,
        "streams": {n: sorted(s) for n, s in sorted(streams.items())},
        "legacy_stream_id": int(null_stream[0][0]) if null_stream else None,
        "host_loop_ms": round((its[-1].end - its[0].start) / 1e6, 3),
        "gpu_loop_ms": round((last_k - first(per_it[0], A)["start"]) / 1e6, 3),
        "steady_iterations": len(steady),
        "steady_window_ns": [int(lo), int(hi)],
        "steady_ms": round(span / 1e6, 3),
        "us_per_iteration": round(span / len(steady) / 1e3, 2),
        "busy_pct": pct(busy, span),
        "idle_pct": pct(span - busy, span),
        "ab_overlap_ns": int(ab_ov),
        "ab_overlap_pct": pct(ab_ov, ab_time),
        "work_a_us_median": us([first(p, A)["end"] - first(p, A)["start"] for p in steady]),
        "work_b_us_median": us([first(p, B)["end"] - first(p, B)["start"] for p in steady]),
        "serialized_streams_share_pct": pct(save, span),
        "markers_in_steady": len(marks),
        "marker_us": {"median": us(mdur), "min": us(mdur, np.min), "max": us(mdur, np.max)},
        "markers_pct": pct(clipped_ns(m_iv, lo, hi), span),
        "idle_gaps": int(len(gap_ns)),
        "idle_gap_us": {"median": us(gap_ns), "max": us(gap_ns, np.max)},
        "gap_us_median_by_transition": {k: us(trans[k]) for k in (*keys, "m2->next_a")},
        "work_blocks": int(blocks),
        "work_threads_per_block": int(threads),
        "sm_count": sms,
        "work_sms_used_max": int(min(blocks, sms)) if sms else int(blocks),
        "work_sms_pct": pct(min(blocks, sms), sms) if sms else None,
        "calls_in_steady_ranges": {k: v[0] for k, v in
                                   sorted(r.call_time_by_name(calls).items())},
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
