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

from gpugap.accounting.buckets import CODE
from gpugap.program.ops import DeviceOps, by_kind, device_ops
from gpugap.report.table import Labels
from gpugap.report.trace import NO_GRAPH_NODE, OP_KINDS, Trace

# Kernels that move data between GPUs rather than compute (NCCL's device kernels are
# ncclKernel_*/ncclDevKernel_*; NVSHMEM's start with nvshmem).
COMMUNICATION = re.compile(r"^(?:void )?(?:nccl|nvshmem)", re.IGNORECASE)

SOURCES = OP_KINDS


def kernel_buckets(names: Labels, graph_node: np.ndarray | None = None) -> np.ndarray:
    """compute or communication for each kernel (per distinct name); graph for the
    compute kernels that a CUDA graph ran (node-level tracing: a graph node id)."""
    out = np.where(names.matching(COMMUNICATION), CODE["communication"],
                   CODE["compute"]).astype(np.int8)
    if graph_node is not None:
        out[(graph_node != NO_GRAPH_NODE) & (out == CODE["compute"])] = CODE["graph"]
    return out


def copy_buckets(kind: Labels, src: Labels, dst: Labels) -> np.ndarray:
    """The bucket of each copy, from its direction (*kind*) and the memory kinds of its
    source and destination (compared as codes: one name each, not every row's)."""
    def named(labels: Labels, name: str) -> np.ndarray:
        return labels.codes == labels.code_of(name)

    out = np.full(len(kind), CODE["copy-other"], dtype=np.int8)
    h2d, d2h = named(kind, "Host-to-Device"), named(kind, "Device-to-Host")
    src_pageable, dst_pageable = named(src, "Pageable"), named(dst, "Pageable")
    out[h2d & src_pageable] = CODE["copy-h2d-pageable"]
    out[h2d & ~src_pageable] = CODE["copy-h2d-pinned"]
    out[d2h & dst_pageable] = CODE["copy-d2h-pageable"]
    out[d2h & ~dst_pageable] = CODE["copy-d2h-pinned"]
    out[named(kind, "Device-to-Device")] = CODE["copy-d2d"]
    out[named(kind, "Peer-to-Peer")] = CODE["copy-peer"]
    return out


def op_buckets(trace: Trace) -> tuple[np.ndarray, ...]:
    """Bucket codes of the rows of trace.kernels, memcpys, memsets, graphs (computed each
    call: the accounting's index keeps them, AccountingIndex.op_buckets)."""
    k, m = trace.table("kernels"), trace.table("memcpys")
    return (kernel_buckets(k.labels("name"), k["graph_node"]) if len(k)
            else np.zeros(0, np.int8),
            copy_buckets(*(m.labels(c) for c in ("kind", "src_kind", "dst_kind")))
            if len(m) else np.zeros(0, np.int8),
            np.full(len(trace.table("memsets")), CODE["memset"], dtype=np.int8),
            np.full(len(trace.table("graphs")), CODE["graph"], dtype=np.int8))


class DeviceWork(DeviceOps):
    """A device's ops (gpugap.program.ops.DeviceOps) with the busy bucket of each: what
    the accounting reads of them."""

    def __init__(self, ops: DeviceOps, buckets: tuple[np.ndarray, ...]) -> None:
        super().__init__(ops.device, ops.order, ops.pids)
        self._buckets = buckets     # bucket code of every row of each frame (op_buckets)

    def _ops(self, start, end, source, row) -> Ops:
        bucket = by_kind(self._buckets, source, row, self.largest_kind, np.int8)
        return Ops(start, np.maximum(end, start), source, row, bucket)

    def slice(self, o0: int, o1: int) -> Ops:
        """The ops at positions [o0, o1), with their buckets."""
        return self._ops(*self.order.slice(o0, o1))

    def take(self, at, near: tuple[Ops, int] | None = None) -> Ops:
        """The ops at positions *at*, with their buckets; *near*: (ops, o0), the ops from
        position o0 on at hand (a ``slice``), read where *at* lies in them rather than
        found in the device's order."""
        if near is None:
            return self._ops(*self.order.take(at))
        ops, o0 = near
        rel = np.asarray(at, dtype=np.int64) - o0
        inside = (rel >= 0) & (rel < ops.start.size)
        if bool(inside.all()):
            return Ops._make(column[rel] for column in ops)
        rest = self.take(np.asarray(at)[~inside])
        columns = []
        for column, taken in zip(ops, rest, strict=True):
            out = np.empty(rel.size, dtype=column.dtype)
            out[inside], out[~inside] = column[rel[inside]], taken
            columns.append(out)
        return Ops._make(columns)

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
