"""launch-gap: the GPU ran nothing (no kernel, copy or memset on any stream) for a while
between its first and last activity.

Each gap is explained by what the thread that launched the *next* GPU operation was doing
during the gap (its CUDA API calls, which nest runtime over driver calls):

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

from collections.abc import Mapping

import numpy as np
import pandas as pd

from gpugap import timeline as tl
from gpugap.report.trace import Trace
from gpugap.rules._common import (
    analysed_span,
    api_categories,
    range_labels,
    split_label,
)
from gpugap.rules.base import Finding, Rule, Threshold, fmt_ns, severity_for

FIXES = {
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


def _coverage_by_category(trace: Trace, gap_s: np.ndarray, gap_e: np.ndarray,
                          gtids: np.ndarray) -> dict[str, np.ndarray]:
    """For each gap: time its thread spent inside API calls of each category."""
    out = {c: np.zeros(gap_s.size, dtype=np.int64) for c in _CATEGORY_ORDER}
    api = trace.api
    if api.empty:
        return out
    cats = api_categories(api)
    api_gtid = api["gtid"].to_numpy(dtype=np.int64)
    starts = api["start"].to_numpy(dtype=np.int64)
    ends = api["end"].to_numpy(dtype=np.int64)
    for gtid in np.unique(gtids[gtids >= 0]):
        gap_idx = np.flatnonzero(gtids == gtid)
        on_thread = api_gtid == gtid
        for c in _CATEGORY_ORDER:
            sel = on_thread & (cats == c)
            if sel.any():
                u = tl.union(starts[sel], ends[sel])
                out[c][gap_idx] = tl.overlap_each(gap_s[gap_idx], gap_e[gap_idx], u)
    return out


def _host_calls(trace: Trace, gtid: int, lo: int, hi: int, n: int = 4) -> list[dict]:
    """The longest CUDA API and OS runtime calls of a thread inside [lo, hi)."""
    rows = []
    for source, frame in (("cuda", trace.api), ("osrt", trace.osrt)):
        if frame.empty:
            continue
        f = frame[(frame["gtid"] == gtid) & (frame["end"] > lo) & (frame["start"] < hi)]
        if f.empty:
            continue
        inside = (np.minimum(f["end"], hi) - np.maximum(f["start"], lo)).astype(np.int64)
        agg = (pd.DataFrame({"name": f["name"].astype(str), "ns": inside})
               .groupby("name").agg(ns=("ns", "sum"), calls=("ns", "size"))
               .nlargest(n, "ns"))
        rows += [{"source": source, "name": name, "calls": int(r.calls), "ns": int(r.ns)}
                 for name, r in agg.iterrows()]
    return sorted(rows, key=lambda r: -r["ns"])[:n]


def detect(trace: Trace, config: Mapping[str, float]) -> list[Finding]:
    ops = trace.gpu_ops
    if ops.empty:
        return []
    min_gap = config["min_gap_us"] * 1e3
    records = []
    for device, dev_ops in ops.groupby("device", sort=True):
        dev_ops = dev_ops.sort_values("start", kind="stable")
        u = tl.union(dev_ops["start"].to_numpy(), dev_ops["end"].to_numpy())
        gs, ge = tl.gaps(u)
        keep = (ge - gs) >= min_gap
        gs, ge = gs[keep], ge[keep]
        if gs.size == 0:
            continue
        starts = dev_ops["start"].to_numpy(dtype=np.int64)
        ends_sorted = np.sort(dev_ops["end"].to_numpy(dtype=np.int64))
        nxt = dev_ops.iloc[np.searchsorted(starts, ge, side="left")]
        end_order = np.argsort(dev_ops["end"].to_numpy(dtype=np.int64), kind="stable")
        prev = dev_ops.iloc[end_order[np.searchsorted(ends_sorted, gs, side="right") - 1]]
        records.append(pd.DataFrame({
            "device": device, "gap_start": gs, "gap_end": ge,
            "next_name": nxt["name"].to_numpy(), "next_kind": nxt["kind"].to_numpy(),
            "next_stream": nxt["stream"].to_numpy(), "next_corr": nxt["corr"].to_numpy(),
            "next_api": nxt["api_start"].to_numpy(),
            "gtid": nxt["gtid"].fillna(-1).to_numpy(dtype=np.int64),
            "prev_name": prev["name"].to_numpy(), "prev_corr": prev["corr"].to_numpy(),
        }))
    if not records:
        return []
    gaps = pd.concat(records, ignore_index=True)
    gap_s = gaps["gap_start"].to_numpy(dtype=np.int64)
    gap_e = gaps["gap_end"].to_numpy(dtype=np.int64)
    dur = gap_e - gap_s
    gtids = gaps["gtid"].to_numpy(dtype=np.int64)
    cover = _coverage_by_category(trace, gap_s, gap_e, gtids)
    blocked = config["blocked_share"]
    cause = np.select(
        [gtids < 0,
         cover["module-load"] >= config["module_load_share"] * dur,
         cover["sync"] >= blocked * dur,
         (cover["other"] + cover["launch"]) >= blocked * dur],
        ["unknown", "module-load", "sync-wait", "host-blocked"],
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
    for (device, cause_id, label), g in gaps.groupby(["device", "cause", "range"], sort=False):
        cost = int(g["gap_ns"].sum())
        worst = g.nlargest(int(config["max_examples"]), "gap_ns")
        examples = []
        for r in worst.itertuples():
            host = (_host_calls(trace, int(r.gtid), int(r.gap_start), int(r.gap_end))
                    if r.gtid >= 0 else [])
            examples.append({
                "start_ns": int(r.gap_start), "end_ns": int(r.gap_end), "gap_ns": int(r.gap_ns),
                "before": {"name": str(r.prev_name), "correlation_id": int(r.prev_corr)},
                "next": {"name": str(r.next_name), "kind": str(r.next_kind),
                         "stream": int(r.next_stream), "correlation_id": int(r.next_corr),
                         "launched_ns": None if pd.isna(r.next_api) else int(r.next_api)},
                "thread": trace.thread_name(int(r.gtid)) if r.gtid >= 0 else None,
                "host_calls": host})
        top = examples[0]
        busy_with = ", ".join(f"{h['name']} x{h['calls']} ({fmt_ns(h['ns'])})"
                              for h in top["host_calls"][:3]) or "no traced call"
        n = len(g)
        before = f"{top['next']['kind']} '{_short(top['next']['name'])}'"
        lead = (f"GPU {device} sat idle for {fmt_ns(cost)} before {before}" if n == 1 else
                f"GPU {device} sat idle {n} times for {fmt_ns(cost)} in total (longest "
                f"{fmt_ns(top['gap_ns'])}, before {before})")
        why = {
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
            message=f"{lead}: {why}. {'Meanwhile' if n == 1 else 'Longest gap:'} the host "
                    f"was in {busy_with}.",
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
        "blocked_share": Threshold(0.5, "fraction", "call a gap sync-wait/host-blocked when "
                                   "the thread spent at least this share of it in such calls"),
        "max_examples": Threshold(5, "gaps", "gaps listed as evidence per finding"),
    },
    rationale=("Idle time between GPU operations is time the GPU could have worked; its "
               "cause is on the host, in what the launching thread did meanwhile."),
    fix=FIXES["host-launch-latency"],
    causes={"module-load": "library/module loading (lazy loading, library init)",
            "sync-wait": "blocked in a synchronisation call",
            "host-blocked": "blocked in another CUDA call",
            "host-launch-latency": "the host launched the next work late",
            "unknown": "no API call matches the next operation"},
    detect=detect,
)
