"""A device's GPU work as arrays: every operation with its busy bucket and its launch.

Kernels are compute unless they are communication (NCCL, NVSHMEM); copies go to a bucket
by direction and host memory kind; memsets to ``memset``; CUDA graph executions
(graph-level tracing) and the kernels a graph ran (node-level tracing: they carry a graph
node id) to ``graph``, so both tracing modes account a graph replay the same way.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pandas as pd

from gpugap.accounting.buckets import CODE
from gpugap.program.ops import DeviceOps, device_ops
from gpugap.report.trace import NO_GRAPH_NODE, OP_KINDS, Trace

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
        out[values.sp_index.indices] = values.sp_values != NO_GRAPH_NODE
        return out
    return graph_node.to_numpy(dtype=np.int64) != NO_GRAPH_NODE


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


def op_buckets(trace: Trace) -> tuple[np.ndarray, ...]:
    """Bucket codes of the rows of trace.kernels, memcpys, memsets, graphs (computed each
    call: the accounting's index keeps them, AccountingIndex.op_buckets)."""
    k, m, s = trace.kernels, trace.memcpys, trace.memsets
    return (kernel_buckets(k["name"], k["graph_node"]) if len(k) else np.zeros(0, np.int8),
            copy_buckets(m["kind"].astype(str).to_numpy(),
                         m["src_kind"].astype(str).to_numpy(),
                         m["dst_kind"].astype(str).to_numpy()) if len(m)
            else np.zeros(0, np.int8),
            np.full(len(s), CODE["memset"], dtype=np.int8),
            np.full(len(trace.graphs), CODE["graph"], dtype=np.int8))


class DeviceWork(DeviceOps):
    """A device's ops (gpugap.program.ops.DeviceOps) with the busy bucket of each: what
    the accounting reads of them."""

    def __init__(self, ops: DeviceOps, buckets: tuple[np.ndarray, ...]) -> None:
        super().__init__(ops.device, ops.order, ops.pids)
        self._buckets = buckets     # bucket code of every row of each frame (op_buckets)

    def _ops(self, start, end, source, row) -> Ops:
        bucket = np.empty(start.size, dtype=np.int8)
        for k, codes in enumerate(self._buckets):
            sel = source == k
            if sel.all():
                bucket = codes[row]
            elif sel.any():
                bucket[sel] = codes[row[sel]]
        return Ops(start, np.maximum(end, start), source, row, bucket)

    def slice(self, o0: int, o1: int) -> Ops:
        """The ops at positions [o0, o1), with their buckets."""
        return self._ops(*self.order.slice(o0, o1))

    def take(self, at) -> Ops:
        """The ops at positions *at*, with their buckets."""
        return self._ops(*self.order.take(at))

    def positions(self, bucket: int) -> np.ndarray:
        """Positions of the ops of a bucket (code)."""
        parts = [o0 + np.flatnonzero(self.slice(o0, o1).bucket == bucket)
                 for o0, o1 in self.slices()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    @property
    def bucket(self) -> np.ndarray:
        """Every op's bucket code (for small reports and tests)."""
        return self.slice(0, len(self)).bucket

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


def device_work(trace: Trace, device: int, ops: DeviceOps | None = None,
                buckets: tuple[np.ndarray, ...] | None = None) -> DeviceWork:
    """The ops of *device* with their buckets; *ops*: the program model's ops of the
    device, when at hand; *buckets*: op_buckets of the trace, when at hand (the
    accounting's index keeps them)."""
    return DeviceWork(ops if ops is not None else device_ops(trace, device),
                      buckets if buckets is not None else op_buckets(trace))
