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
  stream of the same device was also running.
- ``copy_compute_overlap_pct``: share of memcpy time during which a kernel ran on the
  same device; None when the scope has no copies.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from gpugap import timeline as tl
from gpugap.report.trace import Trace


@dataclass
class Metrics:
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

    def to_dict(self) -> dict:
        return asdict(self)


METRIC_NAMES = tuple(Metrics.__dataclass_fields__)


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
    returns (group of each piece, piece starts, piece ends)."""
    if starts.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    order = np.lexsort((starts, group))
    g, s, e = group[order], starts[order], ends[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    new = np.ones(s.size, dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, s.size - 1]
    return g[first], s[first], reach[last]


def _device_metrics(kernels: pd.DataFrame, copies: pd.DataFrame, memsets: pd.DataFrame,
                    windows: tl.Intervals) -> dict:
    """Raw sums for one device over its windows (pieces clipped to the windows)."""
    ks, ke, ki = intersect_each(kernels["start"].to_numpy(), kernels["end"].to_numpy(), windows)
    cs, ce, ci = intersect_each(copies["start"].to_numpy(), copies["end"].to_numpy(), windows)
    ms, me, _ = intersect_each(memsets["start"].to_numpy(), memsets["end"].to_numpy(), windows)
    busy = tl.total(tl.union(np.r_[ks, cs, ms], np.r_[ke, ce, me]))
    streams = kernels["stream"].to_numpy(dtype=np.int64)[ki]
    _, ss, se = union_by_group(streams, ks, ke)
    kernel_time = int((se - ss).sum())
    kernel_union = tl.union(ks, ke)
    times, level = tl.coverage_profile(ss, se)
    overlapped, _ = tl.time_at_level(times, level, lambda lv: lv >= 2)
    copy_time = int((ce - cs).sum())
    copy_overlap = int(tl.overlap_each(cs, ce, kernel_union).sum())
    return {"busy": busy, "kernel_time": kernel_time, "kernel_union": tl.total(kernel_union),
            "overlapped": overlapped, "copy_time": copy_time, "copy_overlap": copy_overlap,
            "kernels": int(np.unique(ki).size), "copies": int(np.unique(ci).size),
            "memsets": int(ms.size)}


def compute(trace: Trace, windows: tl.Intervals | None = None,
            devices: list[int] | None = None) -> Metrics:
    """Metrics over *windows* (a union; default: each device's own active span)."""
    ops = trace.gpu_ops
    all_devices = sorted(ops["device"].unique().tolist()) if len(ops) else []
    devices = all_devices if devices is None else [d for d in devices if d in all_devices]
    sums = {"busy": 0, "kernel_time": 0, "kernel_union": 0, "overlapped": 0,
            "copy_time": 0, "copy_overlap": 0, "kernels": 0, "copies": 0, "memsets": 0}
    if not devices:
        # No GPU activity in scope: only the span is known.
        return Metrics(span_ns=0 if windows is None else tl.total(windows), gpu_busy_ns=0,
                       gpu_busy_pct=None, gpu_idle_pct=None, kernel_time_ns=0,
                       concurrency=None, kernel_overlap_pct=None, copy_time_ns=0,
                       copy_compute_overlap_pct=None, kernels=0, copies=0, memsets=0)
    span_total = 0
    span = 0
    for device in devices:
        dev_ops = ops[ops["device"] == device]
        if windows is None:
            w = (np.array([dev_ops["start"].min()], dtype=np.int64),
                 np.array([dev_ops["end"].max()], dtype=np.int64))
        else:
            w = windows
        part = _device_metrics(trace.kernels[trace.kernels["device"] == device],
                               trace.memcpys[trace.memcpys["device"] == device],
                               trace.memsets[trace.memsets["device"] == device], w)
        for k in sums:
            sums[k] += part[k]
        span_total += tl.total(w)
        span = max(span, tl.total(w))
    if windows is not None:
        span = tl.total(windows)
        span_total = span * max(len(devices), 1)
    elif len(devices) > 1:
        span = int(ops["end"].max() - ops["start"].min())
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
    )
