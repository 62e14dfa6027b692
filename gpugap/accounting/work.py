"""A device's GPU work as arrays: every operation with its busy bucket and its launch.

Kernels are compute unless they are communication (NCCL, NVSHMEM); copies go to a bucket
by direction and host memory kind; memsets to ``memset``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from gpugap.accounting.buckets import CODE
from gpugap.report.trace import Trace

# Kernels that move data between GPUs rather than compute (NCCL's device kernels are
# ncclKernel_*/ncclDevKernel_*; NVSHMEM's start with nvshmem).
COMMUNICATION = re.compile(r"^(?:void )?(?:nccl|nvshmem)", re.IGNORECASE)

SOURCES = ("kernel", "memcpy", "memset")


def kernel_buckets(names: pd.Series) -> np.ndarray:
    """compute or communication for each kernel (per distinct name)."""
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    lut = np.array([CODE["communication"] if COMMUNICATION.search(str(c)) else CODE["compute"]
                    for c in names.cat.categories] + [CODE["compute"]], dtype=np.int8)
    return lut[names.cat.codes.to_numpy()]


def copy_buckets(kind: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    out = np.full(kind.size, CODE["copy-other"], dtype=np.int8)
    h2d, d2h = kind == "Host-to-Device", kind == "Device-to-Host"
    out[h2d & (src == "Pageable")] = CODE["copy-h2d-pageable"]
    out[h2d & (src != "Pageable")] = CODE["copy-h2d-pinned"]
    out[d2h & (dst == "Pageable")] = CODE["copy-d2h-pageable"]
    out[d2h & (dst != "Pageable")] = CODE["copy-d2h-pinned"]
    out[kind == "Device-to-Device"] = CODE["copy-d2d"]
    out[kind == "Peer-to-Peer"] = CODE["copy-peer"]
    return out


def op_buckets(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bucket codes of trace.kernels, trace.memcpys, trace.memsets rows (cached)."""
    cached = trace.__dict__.get("_op_buckets")
    if cached is None:
        k, m, s = trace.kernels, trace.memcpys, trace.memsets
        cached = (kernel_buckets(k["name"]) if len(k) else np.zeros(0, np.int8),
                  copy_buckets(m["kind"].astype(str).to_numpy(),
                               m["src_kind"].astype(str).to_numpy(),
                               m["dst_kind"].astype(str).to_numpy()) if len(m)
                  else np.zeros(0, np.int8),
                  np.full(len(s), CODE["memset"], dtype=np.int8))
        trace.__dict__["_op_buckets"] = cached
    return cached


@dataclass
class DeviceWork:
    """One device's operations in start order (ties: kernels, copies, memsets), with what
    the accounting reads of each for every op; any other column is gathered on demand
    (``gather``), so a report of millions of kernels holds no second copy of them."""

    device: int
    frames: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] = field(repr=False)
    start: np.ndarray          # int64
    end: np.ndarray            # int64 (>= start)
    bucket: np.ndarray         # int8 bucket code
    source: np.ndarray         # int8: 0 kernel, 1 memcpy, 2 memset
    row: np.ndarray            # row in its frame
    api_start: np.ndarray      # float64, NaN when no launch call matched
    gtid: np.ndarray           # int64, -1 when unknown
    pids: np.ndarray           # the processes that launched them (distinct)

    def __len__(self) -> int:
        return self.start.size

    def gather(self, name: str, at: np.ndarray) -> np.ndarray:
        """Column *name* of the ops at positions *at* (from their frames)."""
        at = np.asarray(at, dtype=np.int64)
        parts = [f[name].to_numpy() if name in f else None for f in self.frames]
        dtype = np.result_type(*[p for p in parts if p is not None])
        out = np.zeros(at.size, dtype=np.float64 if dtype.kind == "f" else dtype)
        if dtype.kind == "f":
            out[:] = np.nan
        src, row = self.source[at], self.row[at]
        for k, part in enumerate(parts):
            sel = src == k
            if part is not None and sel.any():
                out[sel] = part[row[sel]]
        return out

    @cached_property
    def launch_order(self) -> np.ndarray:
        """Positions of the ops with a known launch, sorted by launch time."""
        known = np.flatnonzero(~np.isnan(self.api_start))
        return known[np.argsort(self.api_start[known], kind="stable")]

    @cached_property
    def launched_reach(self) -> tuple[np.ndarray, np.ndarray]:
        """(launch times in order, running max of the ends of the ops launched so far):
        what ``ends_launched_before`` searches."""
        order = self.launch_order
        return self.api_start[order], np.maximum.accumulate(self.end[order]) \
            if order.size else np.zeros(0, np.int64)

    def ends_launched_before(self, t) -> np.ndarray:
        """For each time t: the latest end of the ops launched before t (-1 if none)."""
        times, reach = self.launched_reach
        k = np.searchsorted(times, np.asarray(t, dtype=np.float64), side="left")
        return np.where(k > 0, reach[np.maximum(k - 1, 0)] if reach.size else -1, -1)

    def forget_launch_order(self) -> None:
        """Drop the launch-order arrays (phases need them; nothing after)."""
        self.__dict__.pop("launch_order", None)
        self.__dict__.pop("launched_reach", None)

    def names(self, trace: Trace, at: np.ndarray) -> list[str]:
        cols = ("name", "kind", None)
        out = []
        for s, r in zip(self.source[at].tolist(), self.row[at].tolist(), strict=True):
            col = cols[s]
            out.append("memset" if col is None else str(self.frames[s][col].iloc[r]))
        return out


def device_work(trace: Trace, device: int) -> DeviceWork:
    """The ops of *device* (cached per trace)."""
    cache = trace.__dict__.setdefault("_device_work", {})
    if device in cache:
        return cache[device]
    ix = trace.op_index.merged(device)
    buckets = op_buckets(trace)
    bucket = np.empty(len(ix), dtype=np.int8)
    for k in range(3):
        sel = ix.source == k
        if sel.any():
            bucket[sel] = buckets[k][ix.row[sel]]
    gtid = ix.column("gtid").astype(np.float64)
    pids = np.unique(np.concatenate([f["pid"].to_numpy()[f["device"].to_numpy() == device]
                                     for f in ix.frames if len(f)]).astype(np.int64))
    work = DeviceWork(
        device=device, frames=ix.frames, start=ix.start, end=np.maximum(ix.end, ix.start),
        bucket=bucket, source=ix.source, row=ix.row,
        api_start=ix.column("api_start").astype(np.float64),
        gtid=np.where(np.isnan(gtid), -1, np.nan_to_num(gtid)).astype(np.int64),
        pids=pids)
    cache[device] = work
    return work
