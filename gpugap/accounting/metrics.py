"""Timeline metrics for a report, a device, or the windows of an NVTX range.

Definitions (all over a *scope*: a set of time windows on one or more devices):

- ``span_ns``: length of the scope. Whole report: first to last GPU activity (kernel,
  copy or memset) of each device. NVTX range: the union of the range's instances, each
  extended to the end of the GPU work its thread launched inside it.
- ``gpu_busy_pct``: share of the span in which the device ran anything; ``gpu_idle_pct``
  = 100 - busy. Over several devices: summed busy time / (devices x span).
- ``concurrency``: kernel time (per-stream union, summed over streams) / union of all
  kernel time. 1.0 means kernels never ran side by side.
- ``kernel_overlap_pct``: share of kernel time during which a kernel on *another*
  stream of the same device was also running (another process's streams are other
  streams: two programs sharing a GPU overlap).
- ``copy_compute_overlap_pct``: share of memcpy time during which a kernel ran on the
  same device; None when the scope has no copies.
- ``graph_time_ns``/``graphs``: CUDA graph executions (graph-level tracing: one row per
  replay, its nodes unlisted) count as kernels in every figure above (busy, kernel time,
  overlap, concurrency), and are also counted apart. With node-level tracing the
  graph's kernels are listed as kernels; the span from a replay's first node to its
  last adds to busy time only (the graph was running between its nodes).
- ``comm_time_ns``: time during which a communication kernel (NCCL, NVSHMEM) ran on the
  device (union per device, summed over devices).
- ``comm_compute_overlap_pct``: share of that time during which compute (any other
  kernel or graph execution) ran on the same device: the communication hidden under
  compute; None without communication. ``exposed_comm_ns`` = comm_time_ns x (1 - that).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from gpugap import intervals as tl
from gpugap import scan
from gpugap.accounting.index import AccountingIndex
from gpugap.jsonout import Record
from gpugap.report.table import Table
from gpugap.report.trace import Trace


@dataclass
class Metrics(Record):
    span_ns: int
    gpu_busy_ns: int
    gpu_busy_pct: float | None
    gpu_idle_pct: float | None
    kernel_time_ns: int
    concurrency: float | None
    kernel_overlap_pct: float | None
    copy_time_ns: int
    copy_compute_overlap_pct: float | None
    kernels: int
    copies: int
    memsets: int
    graph_time_ns: int = 0
    graphs: int = 0
    comm_time_ns: int = 0
    comm_compute_overlap_pct: float | None = None
    exposed_comm_ns: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


METRIC_NAMES = tuple(Metrics.__dataclass_fields__)


def active_devices(trace: Trace) -> list[int]:
    """Devices with GPU activity, sorted."""
    return trace.op_index.devices


def _pct(num: float, den: float) -> float | None:
    return None if den <= 0 else round(100.0 * num / den, 3)


def intersect_each(starts: np.ndarray, ends: np.ndarray, windows: tl.Intervals
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pieces of each interval that fall inside a union of windows:
    (piece starts, piece ends, index of the interval each piece came from)."""
    ws, we = windows
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if ws.size == 0 or starts.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    first = np.searchsorted(we, starts, side="right")   # first window ending after start
    last = np.searchsorted(ws, ends, side="left")       # windows starting before end
    counts = np.maximum(last - first, 0)
    idx = np.repeat(np.arange(starts.size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    w = np.repeat(first, counts) + offsets
    ps = np.maximum(starts[idx], ws[w])
    pe = np.minimum(ends[idx], we[w])
    keep = pe > ps
    return ps[keep], pe[keep], idx[keep]


def union_by_group(group: np.ndarray, starts: np.ndarray, ends: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals within each group (e.g. per stream), vectorised:
    returns (group of each piece, piece starts, piece ends), ordered by (group, start)."""
    if starts.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    order = _group_start_order(group, starts)
    g, s, e = group[order], starts[order], ends[order]
    # Running max of ends within each group, in one pass: lift each group above the
    # previous ones so a global running max never carries across a group boundary.
    base = int(min(s.min(), e.min()))
    width = int(max(s.max(), e.max())) - base + 1
    first = np.ones(s.size, dtype=bool)
    first[1:] = g[1:] != g[:-1]
    rank = np.cumsum(first) - 1
    if int(rank[-1]) < (np.iinfo(np.int64).max // max(width, 1)) - 1:
        lift = rank * width - base
        reach = np.maximum.accumulate(e + lift) - lift
    else:                                    # pragma: no cover (absurd spans)
        reach = np.empty_like(e)             # group by group (they are contiguous)
        bounds = np.r_[np.flatnonzero(first), s.size].tolist()
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            reach[a:b] = np.maximum.accumulate(e[a:b])
    new = first.copy()
    new[1:] |= s[1:] > reach[:-1]
    firsts = np.flatnonzero(new)
    last = np.r_[firsts[1:] - 1, s.size - 1]
    return g[firsts], s[firsts], reach[last]


def _group_start_order(group: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The permutation sorting by (group, start), stable. Linear-time when the intervals
    already come in start order (they do: kernels are read in time order) and groups
    are few: a stable counting sort of the group codes."""
    if not tl.is_sorted(starts):
        return np.lexsort((starts, group))
    _, codes = np.unique(group, return_inverse=True) if group.size < 4096 else \
        _dense_codes(group)
    if codes.max(initial=0) < np.iinfo(np.int16).max:
        codes = codes.astype(np.int16)       # numpy sorts 16-bit keys by radix: O(n)
    return np.argsort(codes, kind="stable")


def _dense_codes(values: np.ndarray) -> tuple[None, np.ndarray]:
    """Codes 0..k-1 of integer values, in value order, without sorting the values."""
    values = np.asarray(values)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < (1 << 22):
        present = np.zeros(hi - lo + 1, dtype=np.int64)
        shifted = values - lo
        present[shifted] = 1
        lut = np.cumsum(present) - 1
        return None, lut[shifted]
    return None, np.unique(values, return_inverse=True)[1]


def _stream_overlap(ss: np.ndarray, se: np.ndarray) -> int:
    """Σ level·dt over the times when 2 or more of the given per-stream union pieces
    run at once (what tl.coverage_profile + time_at_level(level >= 2) give), with one
    value sort instead of an argsort: start/end flags ride in the lowest bit."""
    if ss.size < 2:
        return 0
    lo = int(ss.min())
    if int(se.max()) - lo >= (1 << 61):     # pragma: no cover (absurd spans)
        times, level = tl.coverage_profile(ss, se)
        return tl.time_at_level(times, level, lambda lv: lv >= 2)[0]
    keep = se > ss
    events = np.concatenate([(ss[keep] - lo) * 2 + 1, (se[keep] - lo) * 2])
    events.sort()
    delta = (events & 1) * 2 - 1
    times = events >> 1
    level = np.cumsum(delta)
    last = np.ones(times.size, dtype=bool)
    last[:-1] = times[1:] != times[:-1]
    times, level = times[last], level[last]
    dt = np.diff(times)
    lv = level[:-1]
    mask = lv >= 2
    return int((lv[mask] * dt[mask]).sum())


# Intervals are handled in batches of about this many pieces, so memory stays bounded
# (tens of MB a batch) however many kernels a report holds; every sum is of integers, so
# the batches change no result.
CHUNK = 1 << 18


def _candidates(starts: np.ndarray, ends: np.ndarray, ws: np.ndarray, we: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the index range [lo, hi) of the intervals (in start order) that can
    overlap it: from the first whose running max of ends passes the window's start."""
    hi = np.searchsorted(starts, we, side="left")
    lo = _reach_search(ends, ws)
    return lo, np.maximum(hi, lo)


def _reach_search(ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """np.searchsorted(np.maximum.accumulate(ends), t, side="right"), the running max
    built a batch at a time (no array of it for every interval)."""
    order = np.argsort(t, kind="stable")
    times = t[order]
    out = np.full(t.size, ends.size, dtype=np.int64)
    done, reach = 0, None
    for i0 in range(0, ends.size, CHUNK):
        r = np.maximum.accumulate(ends[i0:i0 + CHUNK])
        if reach is not None:
            np.maximum(r, reach, out=r)
        reach = r[-1]
        upto = int(np.searchsorted(times, reach, side="left"))   # below this batch's top
        if upto > done:
            out[order[done:upto]] = i0 + np.searchsorted(r, times[done:upto], side="right")
            done = upto
    return out


def _window_pieces(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   ws: np.ndarray, we: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pieces (clipped to their window) of the candidate intervals lo[w]:hi[w] of each
    window w, in window order: (starts, ends, interval index), positive length only."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    w = np.repeat(np.arange(ws.size), counts)
    idx = np.arange(total) - np.repeat(np.cumsum(counts) - counts - lo, counts)
    ps = np.maximum(starts[idx], ws[w])
    pe = np.minimum(ends[idx], we[w])
    keep = pe > ps
    return ps[keep], pe[keep], idx[keep]


class _Sorted:
    """Intervals in start order (sorted once if needed)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, extra: np.ndarray | None = None,
                 flag: np.ndarray | None = None) -> None:
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        self.order = None if tl.is_sorted(starts) else np.argsort(starts, kind="stable")
        take = (lambda a: a) if self.order is None else (lambda a: a[self.order])
        self.start, self.end = take(starts), take(ends)
        self.extra = None if extra is None else take(extra)
        self.flag = None if flag is None else take(flag)
        self.size = self.start.size


# Kinds of kernel-like work (the flag of each "kernel" piece).
COMPUTE, COMM, GRAPH = 0, 1, 2


def _device_metrics(kernels: dict, copies: dict, memsets: dict,
                    windows: tl.Intervals | None, span: tuple[int, int],
                    graph_spans: dict | None = None) -> dict:
    """Raw sums for one device over its windows (pieces clipped to the windows; windows
    None: the device's whole span [span), where nothing needs clipping). Each argument
    holds start/end arrays (kernels also stream, and flag: COMPUTE, COMM or GRAPH, a
    graph-level graph execution); *graph_spans*: node-level replays, busy only.

    Everything is a sum over time, so the work goes window by window in batches of about
    CHUNK pieces: unions, per-stream unions and overlaps within a batch never meet those
    of another (windows are disjoint). Without windows, the span is cut into windows at
    kernel starts, which changes no sum."""
    k = _Sorted(kernels["start"], kernels["end"], np.asarray(kernels["stream"]),
                np.asarray(kernels["flag"], dtype=np.int8))
    c = _Sorted(copies["start"], copies["end"])
    m = _Sorted(memsets["start"], memsets["end"])
    z = np.zeros(0, dtype=np.int64)
    g = _Sorted(*((graph_spans["start"], graph_spans["end"]) if graph_spans else (z, z)))
    if windows is None:
        lo, hi = span
        cuts = np.unique(k.start[CHUNK::CHUNK]) if k.size > CHUNK else np.zeros(0, np.int64)
        cuts = cuts[(cuts > lo) & (cuts < hi)]
        ws, we = np.r_[lo, cuts].astype(np.int64), np.r_[cuts, hi].astype(np.int64)
        memset_pieces = int((m.end > m.start).sum())
    else:
        ws, we = windows
        memset_pieces = None
    sums = {"busy": 0, "kernel_time": 0, "kernel_union": 0, "overlapped": 0,
            "copy_time": 0, "copy_overlap": 0, "memsets": 0, "graph_time": 0,
            "comm_time": 0, "comm_hidden": 0}
    seen_k = np.zeros(k.size, dtype=bool)
    seen_c = np.zeros(c.size, dtype=bool)
    klo, khi = _candidates(k.start, k.end, ws, we)
    clo, chi = _candidates(c.start, c.end, ws, we)
    mlo, mhi = _candidates(m.start, m.end, ws, we)
    glo, ghi = _candidates(g.start, g.end, ws, we)
    # Windows in batches of about CHUNK candidate intervals.
    for w in scan.by_weight((khi - klo) + (chi - clo) + (mhi - mlo) + (ghi - glo), CHUNK):
        ks, ke, ki = _window_pieces(k.start, k.end, klo[w], khi[w], ws[w], we[w])
        cs, ce, ci = _window_pieces(c.start, c.end, clo[w], chi[w], ws[w], we[w])
        ms, me, _ = _window_pieces(m.start, m.end, mlo[w], mhi[w], ws[w], we[w])
        gs, ge, _ = _window_pieces(g.start, g.end, glo[w], ghi[w], ws[w], we[w])
        flag = k.flag[ki]
        is_graph = flag == GRAPH
        if is_graph.any():
            sums["graph_time"] += tl.total(tl.union(ks[is_graph], ke[is_graph]))
        is_comm = flag == COMM
        if is_comm.any():
            comm = tl.union(ks[is_comm], ke[is_comm])
            sums["comm_time"] += tl.total(comm)
            # Compute over the pieces that are not communication (sorted already).
            compute = tl.union(np.r_[ks[~is_comm], gs], np.r_[ke[~is_comm], ge])
            sums["comm_hidden"] += int(tl.overlap_each(comm[0], comm[1], compute).sum())
        seen_k[ki] = True
        seen_c[ci] = True
        sums["memsets"] += ms.size
        # Pieces come in window order and, within a window, in start order: sorted.
        kernel_union = tl.union(ks, ke)
        union_len = tl.total(kernel_union)
        sums["kernel_union"] += union_len
        if int((ke - ks).sum()) == union_len:
            # No two kernels overlap: each stream's union is its kernels, no overlap.
            sums["kernel_time"] += union_len
        else:
            _, ss, se = union_by_group(k.extra[ki], ks, ke)
            stream_time = int((se - ss).sum())
            sums["kernel_time"] += stream_time
            # Stream time equal to the union's length: never two streams at once.
            if stream_time != union_len:
                sums["overlapped"] += _stream_overlap(ss, se)
            del ss, se
        sums["copy_time"] += int((ce - cs).sum())
        if cs.size:
            sums["copy_overlap"] += int(tl.overlap_each(cs, ce, kernel_union).sum())
        del ki
        others = tl.union(np.r_[cs, ms, gs], np.r_[ce, me, ge])
        sums["busy"] += union_len + tl.total(others) - int(
            tl.overlap_each(others[0], others[1], kernel_union).sum())
    sums["kernels"] = int((seen_k & (k.flag != GRAPH)).sum())
    sums["graphs"] = int((seen_k & (k.flag == GRAPH)).sum())
    sums["copies"] = int(seen_c.sum())
    if memset_pieces is not None:
        sums["memsets"] = memset_pieces
    return sums


def _arrays(table: Table, device: int, only_device: bool, stream: bool = False
            ) -> dict:
    """start/end (and stream) arrays of the table's rows on *device* (views when the
    report has one device)."""
    cols = ("start", "end", "stream") if stream else ("start", "end")
    mask = None if only_device else table["device"] == device
    out = {col: table[col] if mask is None else table[col][mask] for col in cols}
    if stream and "pid" in table:
        # Streams of different processes are different streams (each has its stream 7):
        # two programs sharing a GPU run side by side, and the overlap counts it.
        pid = table["pid"] if mask is None else table["pid"][mask]
        if pid.size and int(pid.min()) != int(pid.max()):
            out["stream"] = (np.asarray(out["stream"]).astype(np.int64)
                             + (np.asarray(pid).astype(np.int64) << 32))
    return out


def kernel_flags(trace: Trace) -> np.ndarray:
    """COMPUTE or COMM for each kernel (the accounting's index keeps them)."""
    return AccountingIndex.of(trace).kernel_flags


def _kernel_like(trace: Trace, device: int, one: bool) -> tuple[dict, dict | None]:
    """The device's kernels and graph-level graph executions as one set of kernel-like
    pieces (start, end, stream, flag), and its node-level replays' spans (or None)."""
    kernels = trace.table("kernels")
    kern = _arrays(kernels, device, one, stream=True)
    flags = kernel_flags(trace)
    kern["flag"] = flags if one else flags[kernels["device"] == device]
    graphs = trace.table("graphs")
    if not len(graphs):
        return kern, None
    g = _arrays(graphs, device, False, stream=True)
    nodes = graphs["nodes"][graphs["device"] == device] \
        if "nodes" in graphs else np.zeros(g["start"].size, dtype=np.int64)
    level = nodes == 0
    for col in ("start", "end", "stream"):
        kern[col] = np.r_[kern[col], g[col][level]]
    kern["flag"] = np.r_[kern["flag"], np.full(int(level.sum()), GRAPH, dtype=np.int8)]
    spans = {"start": g["start"][~level], "end": g["end"][~level]} if (~level).any() else None
    return kern, spans


def compute(trace: Trace, windows: tl.Intervals | None = None,
              devices: list[int] | None = None) -> Metrics:
    """Metrics over *windows* (a union; default: each device's own active span)."""
    ix = trace.op_index
    all_devices = active_devices(trace)
    devices = all_devices if devices is None else [d for d in devices if d in all_devices]
    sums = {"busy": 0, "kernel_time": 0, "kernel_union": 0, "overlapped": 0,
            "copy_time": 0, "copy_overlap": 0, "kernels": 0, "copies": 0, "memsets": 0,
            "graph_time": 0, "graphs": 0, "comm_time": 0, "comm_hidden": 0}
    if not devices:
        # No GPU activity in scope: only the span is known.
        return Metrics(span_ns=0 if windows is None else tl.total(windows), gpu_busy_ns=0,
                       gpu_busy_pct=None, gpu_idle_pct=None, kernel_time_ns=0,
                       concurrency=None, kernel_overlap_pct=None, copy_time_ns=0,
                       copy_compute_overlap_pct=None, kernels=0, copies=0, memsets=0)
    span_total = 0
    span = 0
    one = len(all_devices) == 1
    for device in devices:
        lo, hi = ix.device_span(device)
        w = ((np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))
             if windows is None else windows)
        kern, graph_spans = _kernel_like(trace, device, one)
        part = _device_metrics(kern, _arrays(trace.table("memcpys"), device, one),
                               _arrays(trace.table("memsets"), device, one),
                               None if windows is None else w, (lo, hi), graph_spans)
        for k in sums:
            sums[k] += part[k]
        span_total += tl.total(w)
        span = max(span, tl.total(w))
    if windows is not None:
        span = tl.total(windows)
        span_total = span * max(len(devices), 1)
    elif len(devices) > 1:
        lo, hi = ix.span()
        span = hi - lo
    return Metrics(
        span_ns=int(span),
        gpu_busy_ns=int(sums["busy"]),
        gpu_busy_pct=_pct(sums["busy"], span_total),
        gpu_idle_pct=(None if span_total <= 0
                      else round(100.0 - 100.0 * sums["busy"] / span_total, 3)),
        kernel_time_ns=int(sums["kernel_time"]),
        concurrency=(None if sums["kernel_union"] <= 0
                     else round(sums["kernel_time"] / sums["kernel_union"], 4)),
        kernel_overlap_pct=_pct(sums["overlapped"], sums["kernel_time"]),
        copy_time_ns=int(sums["copy_time"]),
        copy_compute_overlap_pct=_pct(sums["copy_overlap"], sums["copy_time"]),
        kernels=sums["kernels"], copies=sums["copies"], memsets=sums["memsets"],
        graph_time_ns=int(sums["graph_time"]), graphs=sums["graphs"],
        comm_time_ns=int(sums["comm_time"]),
        comm_compute_overlap_pct=_pct(sums["comm_hidden"], sums["comm_time"]),
        exposed_comm_ns=int(sums["comm_time"] - sums["comm_hidden"]),
    )
