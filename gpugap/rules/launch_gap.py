"""launch-gap: the GPU ran nothing (no kernel, copy or memset on any stream) for a while
between its first and last activity.

Each gap is explained by what the thread that launched the *next* GPU operation was doing
during the gap (its CUDA API calls, which nest runtime over driver calls):

- ``queued-wait``: nothing on the host: the next operation had been queued (its launch
  call had returned) before the GPU went idle, yet it waited for most of the gap. Work
  ordered before it in its stream that is not GPU work held it: a host function
  (cudaLaunchHostFunc / cudaStreamAddCallback), a wait on another device's or process's
  event, an external semaphore. The calls of that kind the launching thread made are named.
- ``module-load``: it was loading libraries/modules (cuLibraryLoadData, cuModuleLoad*):
  CUDA lazy loading or a library initialising, typically on first use.
- ``sync-wait``: it sat in a synchronisation call (cudaStreamSynchronize, ...).
- ``host-blocked``: it sat in another blocking CUDA call (a blocking copy, cudaMalloc,
  cudaFree, cudaHostAlloc, a slow launch...), named in the finding.
- ``host-launch-latency``: it was not in CUDA at all: the next launch simply came late
  (Python/framework overhead, data loading, I/O): the host is the bottleneck.
- ``unknown``: the next operation has no matching API call in the report.

Default threshold 100 us: a kernel launch takes about 5-10 us from call to execution and
a synchronise-then-launch round trip 10-30 us on current GPUs, so gaps of 100 us or more
are an order of magnitude beyond launch latency and worth explaining; NVIDIA's gpu_gaps
default of 500 ms only finds stalls, not launch gaps. Shorter idle time still shows in
``gpu_idle_pct`` and in serialized-streams' host-launch-bound cause.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap import timeline as tl
from gpugap.report.trace import Trace
from gpugap.rules._common import (
    CATEGORIES,
    ThreadApi,
    analysed_span,
    range_labels,
    split_label,
)
from gpugap.rules.base import Finding, Rule, Threshold, fmt_ns, severity_for

FIXES = {
    "queued-wait": ("Keep non-GPU work out of the stream: a host function (cudaLaunchHostFunc, "
                    "cudaStreamAddCallback) stalls every later operation of its stream until "
                    "the host returns: do that work on a host thread, signalled by an event "
                    "query. For a wait on another device or process, start the producer's "
                    "work earlier (pipeline it) so its result is ready in time."),
    "module-load": ("Warm up before the region that matters: run each operation once (first "
                    "cuBLAS/cuDNN call, first launch of each kernel) outside it, or load "
                    "modules eagerly with CUDA_MODULE_LOADING=EAGER (longer start-up, no "
                    "stalls later)."),
    "sync-wait": ("Remove the synchronisation from the loop, or move it after more work has "
                  "been queued; order dependent work with events (cudaStreamWaitEvent / "
                  "torch.cuda.Event) instead of blocking the host."),
    "host-blocked": ("Take the blocking call out of the hot path: pinned memory and async "
                     "copies instead of blocking copies, allocate once up front (or use a "
                     "caching/stream-ordered allocator) instead of cudaMalloc/cudaFree."),
    "host-launch-latency": ("The host launches too slowly to keep the GPU busy: queue work "
                            "ahead (no per-step syncs), make kernels larger or fuse them "
                            "(torch.compile), capture the step in a CUDA graph, and move "
                            "data loading/preprocessing off the launching thread."),
    "unknown": ("Profile with CUDA API tracing on (nsys -t cuda) so the launch of the next "
                "operation can be seen."),
}

_CATEGORY_ORDER = ("module-load", "sync", "other", "launch")

# Calls that put a non-GPU dependency into a stream: what a queued operation can wait on
# while the GPU sits idle.
STREAM_DEPENDENCY = re.compile(r"LaunchHostFunc|StreamAddCallback|StreamWaitEvent|"
                               r"WaitExternalSemaphore|StreamWaitValue|StreamBatchMemOp")
_CATEGORY_CODES = {c: CATEGORIES.index(c) for c in _CATEGORY_ORDER}


def _coverage_by_category(trace: Trace, threads: dict, gap_s: np.ndarray,
                          gap_e: np.ndarray, gtids: np.ndarray) -> dict[str, np.ndarray]:
    """For each gap: time its thread spent inside API calls of each category."""
    out = {c: np.zeros(gap_s.size, dtype=np.int64) for c in _CATEGORY_ORDER}
    if trace.api.empty:
        return out
    for gtid in np.unique(gtids[gtids >= 0]).tolist():
        gap_idx = np.flatnonzero(gtids == gtid)
        mine = threads[gtid]
        lo, hi = gap_s[gap_idx], gap_e[gap_idx]
        if tl.is_sorted(lo) and bool((lo[1:] >= hi[:-1]).all()):
            cover = mine.coverage(lo, hi, len(CATEGORIES))
            for c in _CATEGORY_ORDER:
                out[c][gap_idx] = cover[:, _CATEGORY_CODES[c]]
            continue
        for c in _CATEGORY_ORDER:             # gaps of several devices may overlap
            sel = mine.category == _CATEGORY_CODES[c]
            if sel.any():
                u = tl.union(mine.start[sel], mine.end[sel])
                out[c][gap_idx] = tl.overlap_each(lo, hi, u)
    return out


def _top_calls(names: list[str], ns: list[int], n: int) -> list[tuple[str, int, int]]:
    """(name, calls, ns) of the n names with the most time, ties by name."""
    totals: dict[str, tuple[int, int]] = {}
    for name, v in zip(names, ns, strict=True):
        t, c = totals.get(name, (0, 0))
        totals[name] = (t + v, c + 1)
    items = sorted(totals.items())
    items.sort(key=lambda kv: -kv[1][0])
    return [(name, calls, total) for name, (total, calls) in items[:n]]


def _top_coded(codes: np.ndarray, texts, ns: np.ndarray, n: int
               ) -> list[tuple[str, int, int]]:
    """_top_calls for names given as category codes (counted per code, not per row)."""
    if not codes.size:
        return []
    calls = np.bincount(codes)
    # Call times are integers far below 2**53: float sums are exact.
    totals = np.bincount(codes, weights=ns)
    items = [(str(texts[c]), int(calls[c]), int(round(totals[c])))
             for c in np.flatnonzero(calls).tolist()]
    items.sort(key=lambda item: item[0])
    items.sort(key=lambda item: -item[2])
    return items[:n]


def _codes_of(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    return names.cat.codes.to_numpy(), np.asarray(names.cat.categories, dtype=object)


def _host_calls(trace: Trace, threads: dict, windows: list[tuple[int, int, int]],
                n: int = 4) -> list[list[dict]]:
    """For each window (gtid, lo, hi): the longest CUDA API and OS runtime calls of that
    thread inside [lo, hi). OS runtime calls are read once for all windows."""
    per_thread: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for g, lo, hi in windows:
        los, his = per_thread.get(g, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        per_thread[g] = (np.r_[los, lo], np.r_[his, hi])
    osrt = trace.osrt_overlapping(per_thread) if windows else None
    if osrt is not None and len(osrt):
        o_gtid = osrt["gtid"].to_numpy(dtype=np.int64)
        o_start = osrt["start"].to_numpy(dtype=np.int64)
        o_end = osrt["end"].to_numpy(dtype=np.int64)
        o_code, o_text = _codes_of(osrt["name"])
    if not trace.api.empty:
        api_code, api_text = _codes_of(trace.api["name"])
    out = []
    for g, lo, hi in windows:
        rows = []
        sources = []
        if not trace.api.empty:
            mine = threads[g] if g in threads else ThreadApi(trace, g)
            first = np.searchsorted(mine.reach, lo, side="right")   # ended after lo
            last = np.searchsorted(mine.start, hi, side="left")     # started before hi
            i = np.arange(first, max(first, last))
            i = i[mine.end[i] > lo]
            sources.append(("cuda", mine.start[i], mine.end[i],
                            api_code[i if mine.rows is None else mine.rows[i]], api_text))
        if osrt is not None and len(osrt):
            sel = np.flatnonzero((o_gtid == g) & (o_end > lo) & (o_start < hi))
            sources.append(("osrt", o_start[sel], o_end[sel], o_code[sel], o_text))
        for source, start, end, codes, texts in sources:
            inside = (np.minimum(end, hi) - np.maximum(start, lo)).astype(np.int64)
            rows += [{"source": source, "name": name, "calls": calls, "ns": ns}
                     for name, calls, ns in _top_coded(codes, texts, inside, n)]
        out.append(sorted(rows, key=lambda r: -r["ns"])[:n])
    return out


def _dependency_calls(trace: Trace, threads: dict, windows: list[tuple[int, int, int]]
                      ) -> list[list[dict]]:
    """For each window (gtid, lo, hi): the calls of that thread starting in [lo, hi] that
    put a non-GPU dependency into a stream (STREAM_DEPENDENCY), by name."""
    out = []
    for g, lo, hi in windows:
        mine = threads[g] if g in threads else ThreadApi(trace, g)
        i = np.arange(np.searchsorted(mine.start, lo, side="left"),
                      np.searchsorted(mine.start, hi, side="right"))
        names = [n for n in mine.names(i) if STREAM_DEPENDENCY.search(n)]
        out.append([{"name": name, "calls": names.count(name)}
                    for name in sorted(set(names), key=names.index)])
    return out


def _gaps(starts: np.ndarray, ends: np.ndarray, min_gap: float
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Idle gaps of at least min_gap between ops in start order (the gaps of the union of
    the ops that last a while): (op after each gap, op before it, gap starts, gap ends).
    The op after is the first to start at or after the gap's end; the op before is the
    last one (in start order) to end exactly when the gap starts, the latest end before
    it. In batches: no union is built."""
    keep = ends > starts                     # empty ops take no part in the union
    positive = None if bool(keep.all()) else np.flatnonzero(keep)
    del keep
    chunk = 1 << 20
    gap_s, gap_e = [], []
    carry = None
    n = starts.size if positive is None else positive.size
    for i0 in range(0, n, chunk):
        rows = slice(i0, i0 + chunk) if positive is None else positive[i0:i0 + chunk]
        s, e = starts[rows], ends[rows]
        reach = np.maximum.accumulate(e)
        if carry is not None:
            np.maximum(reach, carry, out=reach)
        before = np.empty_like(reach)
        before[1:] = reach[:-1]
        before[0] = s[0] if carry is None else carry     # nothing before the first op
        j = np.flatnonzero((s > before) & (s - before >= min_gap))
        gap_s.append(before[j])
        gap_e.append(s[j])
        carry = int(reach[-1])
        del reach, before
    gs = np.concatenate(gap_s) if gap_s else np.zeros(0, np.int64)
    ge = np.concatenate(gap_e) if gap_e else np.zeros(0, np.int64)
    nxt = np.searchsorted(starts, ge, side="left")
    prev = nxt - 1
    for k in np.flatnonzero(ends[np.maximum(prev, 0)] != gs).tolist():
        i = int(prev[k])
        while ends[i] != gs[k]:              # rare: a longer op ended last
            i -= 1
        prev[k] = i
    return nxt, prev, gs, ge


def _gap_records(trace: Trace, min_gap: float) -> list[pd.DataFrame]:
    """Per device: its idle gaps of at least min_gap, with the op before and after."""
    records = []
    for device in trace.op_index.devices:
        ix = trace.op_index.merged(device)
        nxt, prev, gs, ge = _gaps(ix.start, ix.end, min_gap)
        if gs.size == 0:
            continue
        api = ix.column("api_start", nxt).astype(np.float64)
        api_end = ix.column("api_end", nxt).astype(np.float64)
        prev_api = ix.column("api_start", prev).astype(np.float64)
        gtid = ix.column("gtid", nxt).astype(np.float64)
        records.append(pd.DataFrame({
            "device": device, "gap_start": gs, "gap_end": ge,
            "next_name": np.asarray(ix.names(nxt), dtype=object),
            "next_kind": np.array(["kernel", "memcpy", "memset"], dtype=object)[
                ix.source[nxt]],
            "next_stream": ix.column("stream", nxt), "next_corr": ix.column("corr", nxt),
            "next_api": api, "next_api_end": api_end, "prev_api": prev_api,
            "gtid": np.nan_to_num(gtid, nan=-1).astype(np.int64),
            "prev_name": np.asarray(ix.names(prev), dtype=object),
            "prev_corr": ix.column("corr", prev),
        }))
    return records


def detect(trace: Trace, config: Mapping[str, float]) -> list[Finding]:
    if not trace.has_gpu_activity:
        return []
    min_gap = config["min_gap_us"] * 1e3
    records = _gap_records(trace, min_gap)
    if not records:
        return []
    gaps = pd.concat(records, ignore_index=True)
    gap_s = gaps["gap_start"].to_numpy(dtype=np.int64)
    gap_e = gaps["gap_end"].to_numpy(dtype=np.int64)
    dur = gap_e - gap_s
    gtids = gaps["gtid"].to_numpy(dtype=np.int64)
    # The launching threads' API calls, in start order (views when one thread made them
    # all): used for the causes and the examples, then let go.
    threads = ({int(g): ThreadApi(trace, int(g)) for g in np.unique(gtids[gtids >= 0])}
               if not trace.api.empty else {})
    cover = _coverage_by_category(trace, threads, gap_s, gap_e, gtids)
    blocked = config["blocked_share"]
    # How long the next op sat queued during the gap: from when its launch call returned
    # (or the gap began, if later) to the gap's end.
    enqueued = gaps["next_api_end"].to_numpy(dtype=np.float64)
    queued = np.where(np.isnan(enqueued), 0,
                      gap_e - np.maximum(np.nan_to_num(enqueued), gap_s)).astype(np.int64)
    gaps["queued_ns"] = queued
    cause = np.select(
        [gtids < 0,
         queued >= blocked * dur,
         cover["module-load"] >= config["module_load_share"] * dur,
         cover["sync"] >= blocked * dur,
         (cover["other"] + cover["launch"]) >= blocked * dur],
        ["unknown", "queued-wait", "module-load", "sync-wait", "host-blocked"],
        default="host-launch-latency")
    gaps["cause"] = cause
    gaps["gap_ns"] = dur
    gaps["module_load_ns"] = cover["module-load"]
    # A gap belongs where the host should have launched the next operation.
    at = gaps["next_api"].fillna(gaps["gap_end"]).to_numpy(dtype=np.int64)
    gaps["at"] = np.maximum(at, gap_s)
    gaps["range"] = range_labels(trace, gaps["at"].to_numpy())
    span = analysed_span(trace)
    findings = []
    groups = [(key, g, g.nlargest(int(config["max_examples"]), "gap_ns"))
              for key, g in gaps.groupby(["device", "cause", "range"], sort=False)]
    # The host calls of every example gap, read in one go (OS runtime calls included).
    windows = [(int(r.gtid), int(r.gap_start), int(r.gap_end))
               for _, _, worst in groups for r in worst.itertuples() if r.gtid >= 0]
    host_calls = iter(_host_calls(trace, threads, windows))
    # For queued ops: the stream dependencies their thread created since the op before
    # the gap was launched (or, without that, since one gap length before it).
    queued_windows = [
        (int(r.gtid), int(r.prev_api) if not pd.isna(r.prev_api) else int(r.gap_start
                                                                          - r.gap_ns),
         int(r.next_api))
        for (_, cause_id, _), _, worst in groups if cause_id == "queued-wait"
        for r in worst.itertuples()]
    dependencies = iter(_dependency_calls(trace, threads, queued_windows))
    del threads
    for (device, cause_id, label), g, worst in groups:
        cost = int(g["gap_ns"].sum())
        examples = []
        for r in worst.itertuples():
            host = next(host_calls) if r.gtid >= 0 else []
            examples.append({
                "start_ns": int(r.gap_start), "end_ns": int(r.gap_end), "gap_ns": int(r.gap_ns),
                "before": {"name": str(r.prev_name), "correlation_id": int(r.prev_corr)},
                "next": {"name": str(r.next_name), "kind": str(r.next_kind),
                         "stream": int(r.next_stream), "correlation_id": int(r.next_corr),
                         "launched_ns": None if pd.isna(r.next_api) else int(r.next_api)},
                "thread": trace.thread_name(int(r.gtid)) if r.gtid >= 0 else None,
                "host_calls": host, "queued_ns": int(r.queued_ns)})
            if cause_id == "queued-wait":
                examples[-1]["stream_dependencies"] = next(dependencies)
        top = examples[0]
        busy_with = ", ".join(f"{h['name']} x{h['calls']} ({fmt_ns(h['ns'])})"
                              for h in top["host_calls"][:3]) or "no traced call"
        n = len(g)
        before = f"{top['next']['kind']} '{_short(top['next']['name'])}'"
        lead = (f"GPU {device} sat idle for {fmt_ns(cost)} before {before}" if n == 1 else
                f"GPU {device} sat idle {n} times for {fmt_ns(cost)} in total (longest "
                f"{fmt_ns(top['gap_ns'])}, before {before})")
        suspects = ", ".join(f"{d['name']} x{d['calls']}"
                             for d in top.get("stream_dependencies", []))
        why = {
            "queued-wait": (
                f"it was already queued (launched before the GPU went idle) and waited "
                f"{fmt_ns(int(g['queued_ns'].sum()))} in its stream: work there that is not "
                f"GPU work held it; "
                + (f"the launching thread had put {suspects} into streams before it"
                   if suspects else "no host function or event wait was traced on the "
                   "launching thread: look for waits on other devices or processes")),
            "module-load": (f"the launching thread was loading modules for "
                            f"{fmt_ns(int(g['module_load_ns'].sum()))} of it (lazy loading "
                            f"/ library initialisation on first use)"),
            "sync-wait": "the launching thread was blocked in a synchronisation call",
            "host-blocked": "the launching thread was blocked inside a CUDA call",
            "host-launch-latency": ("the launching thread was outside CUDA for most of it: "
                                    "the next launch came late, so the host is the "
                                    "bottleneck"),
            "unknown": "no CUDA API call matches the next operation",
        }[cause_id]
        findings.append(Finding(
            rule=RULE.id, cause=str(cause_id), severity=severity_for(cost, span),
            start_ns=int(g["gap_start"].min()), end_ns=int(g["gap_end"].max()), cost_ns=cost,
            at_ns=int(g["at"].min()),
            message=f"{lead}: {why}." + ("" if cause_id == "queued-wait" else
                                         f" {'Meanwhile' if n == 1 else 'Longest gap:'} the "
                                         f"host was in {busy_with}."),
            fix=FIXES[str(cause_id)],
            streams=sorted({int(s) for s in g["next_stream"]}), device=int(device), count=n,
            ranges=split_label(str(label)),
            evidence={"gaps": examples, "gap_count": n,
                      "module_load_ns": int(g["module_load_ns"].sum())}))
    return findings


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


RULE = Rule(
    id="launch-gap",
    title="GPU idle between launches",
    thresholds={
        "min_gap_us": Threshold(100, "us", "report idle gaps at least this long (10x a "
                                "launch's latency; NVIDIA's gpu_gaps uses 500 ms)"),
        "module_load_share": Threshold(0.1, "fraction", "call a gap module-load when at "
                                       "least this share of it was spent loading modules"),
        "blocked_share": Threshold(0.5, "fraction", "call a gap queued-wait when the next "
                                   "op sat queued for at least this share of it, sync-wait "
                                   "/ host-blocked when its thread spent this share in such "
                                   "calls"),
        "max_examples": Threshold(5, "gaps", "gaps listed as evidence per finding"),
    },
    rationale=("Idle time between GPU operations is time the GPU could have worked; its "
               "cause is on the host, in what the launching thread did meanwhile."),
    fix=FIXES["host-launch-latency"],
    causes={"queued-wait": "the next operation was queued in time but held in its stream "
                           "by non-GPU work (host function, wait on another device)",
            "module-load": "library/module loading (lazy loading, library init)",
            "sync-wait": "blocked in a synchronisation call",
            "host-blocked": "blocked in another CUDA call",
            "host-launch-latency": "the host launched the next work late",
            "unknown": "no API call matches the next operation"},
    detect=detect,
)
