"""A device's GPU work as arrays: every operation with its busy bucket and its launch.

Kernels are compute unless they are communication (NCCL, NVSHMEM); copies go to a bucket
by direction and host memory kind; memsets to ``memset``; CUDA graph executions
(graph-level tracing) and the kernels a graph ran (node-level tracing: they carry a graph
node id) to ``graph``, so both tracing modes account a graph replay the same way.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd

from gpugap.accounting.buckets import CODE
from gpugap.report.trace import OP_KINDS, OpOrder, Trace, graph_label

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


CHUNK_OPS = 1 << 18       # ops walked at a time (a module setting: tests make it small)


class DeviceWork:
    """One device's operations in start order (ties: kernels, copies, memsets): what the
    accounting reads of each op. No per-op array is held for the whole device: the ops
    are walked in slices (``slices``, ``slice``) or read at given positions (``take``,
    ``gather``), their columns built from the frames for those ops only
    (report.trace.OpOrder), so a report of millions of kernels holds no second copy of
    them. ``start``, ``end``, ``bucket``... build a column for every op at once, for
    small reports and tests."""

    def __init__(self, device: int, order: OpOrder, buckets: tuple[np.ndarray, ...],
                 pids: np.ndarray) -> None:
        self.device = device
        self.order = order
        self.frames = order.frames
        self._buckets = buckets     # bucket code of every row of each frame (op_buckets)
        self.pids = pids            # the processes that launched them (distinct)

    def __len__(self) -> int:
        return len(self.order)

    def slices(self, size: int | None = None):
        """(o0, o1): the positions of the ops, a slice at a time."""
        n, size = len(self), size or CHUNK_OPS
        for o0 in range(0, n, size):
            yield o0, min(o0 + size, n)

    def slice(self, o0: int, o1: int) -> Ops:
        """The ops at positions [o0, o1)."""
        return self._ops(*self.order.slice(o0, o1))

    def take(self, at) -> Ops:
        """The ops at positions *at*."""
        return self._ops(*self.order.take(at))

    def _ops(self, start, end, source, row) -> Ops:
        bucket = np.empty(start.size, dtype=np.int8)
        for k, codes in enumerate(self._buckets):
            sel = source == k
            if sel.all():
                bucket = codes[row]
            elif sel.any():
                bucket[sel] = codes[row[sel]]
        return Ops(start, np.maximum(end, start), source, row, bucket)

    def searchsorted(self, times, side: Literal["left", "right"] = "left") -> np.ndarray:
        """np.searchsorted over the ops' starts."""
        return self.order.searchsorted(times, side)

    def bounds(self) -> tuple[int, int]:
        """First start and last end of the ops ((0, 0) without ops)."""
        return self.order.bounds()

    def gather(self, name: str, at) -> np.ndarray:
        """Column *name* of the ops at positions *at* (from their frames)."""
        ops = self.order.take(at)
        return self.gather_rows(name, ops[2], ops[3])

    def gather_rows(self, name: str, source: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Column *name* of the ops given by (source, row): float64 with NaN where a kind
        lacks it, when the column is float anywhere."""
        parts = [f[name].to_numpy() if name in f else None for f in self.frames]
        dtype = np.result_type(*[p for p in parts if p is not None])
        out = np.zeros(source.size, dtype=np.float64 if dtype.kind == "f" else dtype)
        if dtype.kind == "f":
            out[:] = np.nan
        for k, part in enumerate(parts):
            sel = source == k
            if part is not None and sel.any():
                out[sel] = part[row[sel]]
        return out

    def threads_of(self, source: np.ndarray, row: np.ndarray) -> np.ndarray:
        """The launching thread (int64) of the ops given by (source, row), -1 when
        unknown."""
        g = self.gather_rows("gtid", source, row)
        return np.where(np.isnan(g), -1, np.nan_to_num(g)).astype(np.int64)

    def positions(self, bucket: int) -> np.ndarray:
        """Positions of the ops of a bucket (code)."""
        parts = [o0 + np.flatnonzero(self.slice(o0, o1).bucket == bucket)
                 for o0, o1 in self.slices()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    # Every op at once: for small reports and tests.
    @property
    def start(self) -> np.ndarray:
        return self.slice(0, len(self)).start

    @property
    def end(self) -> np.ndarray:
        return self.slice(0, len(self)).end

    @property
    def bucket(self) -> np.ndarray:
        return self.slice(0, len(self)).bucket

    @property
    def source(self) -> np.ndarray:
        return self.slice(0, len(self)).source

    @property
    def row(self) -> np.ndarray:
        return self.slice(0, len(self)).row

    @property
    def api_start(self) -> np.ndarray:
        """float64, NaN when no launch call matched."""
        return self.gather("api_start", np.arange(len(self)))

    @property
    def gtid(self) -> np.ndarray:
        """The launching thread of each op (int64), -1 when unknown."""
        ops = self.slice(0, len(self))
        return self.threads_of(ops.source, ops.row)

    def launch_order(self) -> np.ndarray:
        """Positions of the ops with a known launch, sorted by launch time (ties: in
        position order). Built for every op: where the whole order is needed."""
        launched = self.api_start
        known = np.flatnonzero(~np.isnan(launched))
        return known[np.argsort(launched[known], kind="stable")]

    def launch_times(self) -> np.ndarray:
        """The known launch times of the ops, sorted."""
        parts = []
        for o0, o1 in self.slices():
            ops = self.order.slice(o0, o1)
            t = self.gather_rows("api_start", ops[2], ops[3])
            parts.append(t[~np.isnan(t)])
            del ops, t
        out = np.concatenate(parts) if parts else np.zeros(0)
        del parts
        out.sort(kind="stable")              # nearly sorted already: runs merge quickly
        return out

    def ends_launched_before(self, t) -> np.ndarray:
        """For each time t: the latest end of the ops launched before t (-1 if none).
        One walk over the ops: each raises the reach of the times after its launch."""
        t = np.asarray(t, dtype=np.float64)
        order = np.argsort(t, kind="stable")
        times = t[order]
        lowest = np.iinfo(np.int64).min
        reach = np.full(times.size + 1, lowest, dtype=np.int64)
        for o0, o1 in self.slices():
            ops = self.slice(o0, o1)
            launched = self.gather_rows("api_start", ops.source, ops.row)
            known = ~np.isnan(launched)
            # The first time after each launch (launched < t): from there on it counts.
            k = np.searchsorted(times, launched[known], side="right")
            np.maximum.at(reach, k, ops.end[known])
        reach = np.maximum.accumulate(reach)[:-1]
        out = np.empty(t.size, dtype=np.int64)
        out[order] = np.where(reach == lowest, -1, reach)
        return out

    def launched_before(self, at) -> np.ndarray:
        """For each op at positions *at*: the position of the op its thread launched
        just before it (launch order: launch time, then position), -1 when there is none
        or its own launch is unknown. One walk over the ops per launching thread."""
        at = np.asarray(at, dtype=np.int64)
        out = np.full(at.size, -1, dtype=np.int64)
        if not at.size:
            return out
        ops = self.take(at)
        launched = self.gather_rows("api_start", ops.source, ops.row)
        thread = self.threads_of(ops.source, ops.row)
        known = ~np.isnan(launched)
        for g in np.unique(thread[known]).tolist():
            qi = np.flatnonzero(known & (thread == g))
            qi = qi[np.lexsort((at[qi], launched[qi]))]          # in launch order
            out[qi] = self._before(int(g), launched[qi], at[qi])
        return out

    def _before(self, gtid: int, q_time: np.ndarray, q_pos: np.ndarray) -> np.ndarray:
        """launched_before for queries of one thread, in launch order ((q_time, q_pos)
        increasing): per query, the greatest (launch time, position) of the thread's
        ops below its own. Each op goes to the first query above it (a bucket); the
        answer of query q is the greatest of buckets 0..q."""
        n_q = q_time.size
        # Ties of launch time are broken by position: a key that orders the queries of
        # one launch time by position (block of equal times, then position).
        block = np.searchsorted(q_time, q_time, side="left")
        tie_key = (block << 32) | q_pos
        best_t = np.full(n_q + 1, -np.inf)
        best_p = np.full(n_q + 1, -1, dtype=np.int64)
        for o0, o1 in self.slices():
            ops = self.order.slice(o0, o1)
            source, row = ops[2], ops[3]
            del ops
            mine = np.flatnonzero(self.threads_of(source, row) == gtid)
            t = self.gather_rows("api_start", source[mine], row[mine])
            keep = ~np.isnan(t)
            t, p = t[keep], o0 + mine[keep]
            k = np.searchsorted(q_time, t, side="left")
            tie = np.flatnonzero(k < n_q)
            tie = tie[q_time[k[tie]] == t[tie]]
            k[tie] = np.searchsorted(tie_key, (k[tie] << 32) | p[tie], side="right")
            top_t = np.full(n_q + 1, -np.inf)
            np.maximum.at(top_t, k, t)
            top = t == top_t[k]
            top_p = np.full(n_q + 1, -1, dtype=np.int64)
            np.maximum.at(top_p, k[top], p[top])
            better = (top_t > best_t) | ((top_t == best_t) & (top_p > best_p))
            best_t[better], best_p[better] = top_t[better], top_p[better]
        # Running greatest (time, position) over buckets 0..q.
        run_t = np.maximum.accumulate(best_t)
        level = np.cumsum(np.r_[True, run_t[1:] != run_t[:-1]])
        value = np.where(best_t == run_t, best_p, -1) + 1
        scale = int(value.max()) + 1                 # levels apart, values within them
        run_p = np.maximum.accumulate(level * scale + value) - level * scale - 1
        return run_p[:n_q]

    def names(self, trace: Trace, at: np.ndarray) -> list[str]:
        ops = self.take(at)
        out = []
        for s, r in zip(ops.source.tolist(), ops.row.tolist(), strict=True):
            frame = self.frames[s]
            out.append(str(frame["name"].iloc[r]) if s == 0 else
                       str(frame["kind"].iloc[r]) if s == 1 else "memset" if s == 2
                       else graph_label(frame["graph_id"].iloc[r]))
        return out

    def in_graph(self, at) -> np.ndarray:
        """Whether the ops at *at* are CUDA graph work (an execution, or a kernel that a
        graph ran)."""
        return self.take(at).bucket == CODE["graph"]


class Ops(NamedTuple):
    """Some ops of a device: start, end (never below start), source (index in OP_KINDS),
    row (in its frame) and bucket code."""

    start: np.ndarray
    end: np.ndarray
    source: np.ndarray
    row: np.ndarray
    bucket: np.ndarray


def device_work(trace: Trace, device: int) -> DeviceWork:
    """The ops of *device* (cached per trace)."""
    cache = trace.__dict__.setdefault("_device_work", {})
    if device in cache:
        return cache[device]
    order = trace.op_index.order(device)
    frames = order.frames
    pids = np.unique(np.concatenate([f["pid"].to_numpy()[f["device"].to_numpy() == device]
                                     for f in frames if len(f)]).astype(np.int64))
    work = DeviceWork(device, order, op_buckets(trace), pids)
    cache[device] = work
    return work
