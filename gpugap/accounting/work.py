"""A device's GPU work as arrays: every operation with its busy bucket and its launch.

Kernels are compute unless they are communication (NCCL, NVSHMEM); copies go to a bucket
by direction and host memory kind; memsets to ``memset``; CUDA graph executions
(graph-level tracing) and the kernels a graph ran (node-level tracing: they carry a graph
node id) to ``graph``, so both tracing modes account a graph replay the same way.
"""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np
import pandas as pd

from gpugap.accounting.buckets import CODE
from gpugap.report.trace import OP_KINDS, Trace, graph_label

# Kernels that move data between GPUs rather than compute (NCCL's device kernels are
# ncclKernel_*/ncclDevKernel_*; NVSHMEM's start with nvshmem).
COMMUNICATION = re.compile(r"^(?:void )?(?:nccl|nvshmem)", re.IGNORECASE)

SOURCES = OP_KINDS


def kernel_buckets(names: pd.Series, graph_node: pd.Series | None = None) -> np.ndarray:
    """compute or communication for each kernel (per distinct name); graph for the
    compute kernels that a CUDA graph ran (node-level tracing)."""
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    lut = np.array([CODE["communication"] if COMMUNICATION.search(str(c)) else CODE["compute"]
                    for c in names.cat.categories] + [CODE["compute"]], dtype=np.int8)
    out = lut[names.cat.codes.to_numpy()]
    if graph_node is not None:
        in_graph = graph_node_mask(graph_node)
        out[in_graph & (out == CODE["compute"])] = CODE["graph"]
    return out


def graph_node_mask(graph_node: pd.Series) -> np.ndarray:
    """Kernels launched as nodes of a CUDA graph (a graph node id, node-level tracing)."""
    values = graph_node.array
    if isinstance(values, pd.arrays.SparseArray):      # few graph kernels: stored sparse
        out = np.zeros(len(values), dtype=bool)
        out[values.sp_index.indices] = ~np.isnan(values.sp_values)
        return out
    return ~np.isnan(graph_node.to_numpy(dtype=np.float64))


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
    """Bucket codes of the rows of trace.kernels, memcpys, memsets, graphs (cached)."""
    cached = trace.__dict__.get("_op_buckets")
    if cached is None:
        k, m, s = trace.kernels, trace.memcpys, trace.memsets
        cached = (kernel_buckets(k["name"], k["graph_node"]) if len(k)
                  else np.zeros(0, np.int8),
                  copy_buckets(m["kind"].astype(str).to_numpy(),
                               m["src_kind"].astype(str).to_numpy(),
                               m["dst_kind"].astype(str).to_numpy()) if len(m)
                  else np.zeros(0, np.int8),
                  np.full(len(s), CODE["memset"], dtype=np.int8),
                  np.full(len(trace.graphs), CODE["graph"], dtype=np.int8))
        trace.__dict__["_op_buckets"] = cached
    return cached


class DeviceWork:
    """One device's operations in start order (ties: kernels, copies, memsets): what the
    accounting reads of each for every op. Launch times and threads are gathered from
    the frames on first use and dropped again by ``release`` (they are needed while the
    accounting runs, rarely after), so a report of millions of kernels holds no second
    copy of them for long."""

    def __init__(self, device: int, frames, start: np.ndarray, end: np.ndarray,
                 bucket: np.ndarray, source: np.ndarray, row: np.ndarray,
                 pids: np.ndarray) -> None:
        self.device = device
        self.frames = frames
        self.start = start          # int64
        self.end = end              # int64 (>= start)
        self.bucket = bucket        # int8 bucket code
        self.source = source        # int8: index in OP_KINDS (kernel, memcpy, memset, graph)
        self.row = row              # row in its frame
        self.pids = pids            # the processes that launched them (distinct)
        self._api_start: np.ndarray | None = None
        self._gtid: np.ndarray | None = None

    def __len__(self) -> int:
        return self.start.size

    @property
    def api_start(self) -> np.ndarray:
        """float64, NaN when no launch call matched."""
        if self._api_start is None:
            self._api_start = self.gather("api_start", np.arange(len(self)))
        return self._api_start

    @property
    def gtid(self) -> np.ndarray:
        """The launching thread of each op (int64), -1 when unknown."""
        if self._gtid is None:
            g = self.gather("gtid", np.arange(len(self)))
            self._gtid = np.where(np.isnan(g), -1, np.nan_to_num(g)).astype(np.int64)
        return self._gtid

    def release(self) -> None:
        """Drop what was gathered (launch times, threads, launch order)."""
        self._api_start = self._gtid = None
        self.__dict__.pop("launch_order", None)
        self.__dict__.pop("launched_reach", None)

    def gather(self, name: str, at) -> np.ndarray:
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

    def names(self, trace: Trace, at: np.ndarray) -> list[str]:
        out = []
        for s, r in zip(self.source[at].tolist(), self.row[at].tolist(), strict=True):
            frame = self.frames[s]
            out.append(str(frame["name"].iloc[r]) if s == 0 else
                       str(frame["kind"].iloc[r]) if s == 1 else "memset" if s == 2
                       else graph_label(frame["graph_id"].iloc[r]))
        return out

    def in_graph(self, at) -> np.ndarray:
        """Whether the ops at *at* are CUDA graph work (an execution, or a kernel that a
        graph ran)."""
        return self.bucket[np.asarray(at, dtype=np.int64)] == CODE["graph"]


def device_work(trace: Trace, device: int) -> DeviceWork:
    """The ops of *device* (cached per trace)."""
    cache = trace.__dict__.setdefault("_device_work", {})
    if device in cache:
        return cache[device]
    ix = trace.op_index.merged(device)
    buckets = op_buckets(trace)
    bucket = np.empty(len(ix), dtype=np.int8)
    for k in range(len(ix.frames)):
        sel = ix.source == k
        if sel.any():
            bucket[sel] = buckets[k][ix.row[sel]]
    pids = np.unique(np.concatenate([f["pid"].to_numpy()[f["device"].to_numpy() == device]
                                     for f in ix.frames if len(f)]).astype(np.int64))
    work = DeviceWork(device, ix.frames, ix.start, np.maximum(ix.end, ix.start), bucket,
                      ix.source, ix.row, pids)
    cache[device] = work
    return work
