"""The accounting's derived index of a Trace: what the accounting computes from the trace
once and reads many times, declared here as the fields of one object
(gpugap.report.trace.Derived), each computed on first use:

- ``api_categories``: the category (host.CATEGORIES) of every CUDA call;
- ``calls``: the calls in start order (host.ApiCalls), the one structure of a thread's
  calls (the idle attribution, the rules' evidence, the verdict's);
- ``library_inits(gtid)``: a thread's library handle creations;
- ``op_buckets``: the busy bucket of every kernel, copy, memset and graph execution;
- ``kernel_flags``: compute or communication, per kernel (the metrics);
- ``launches_by_thread``: each launching thread's GPU ops by launch time (NVTX range
  windows).

``AccountingIndex.of(trace)`` is the trace's one index; ``account`` hands it on in
``Accounting.index``, so the rules and the verdict read what the accounting computed.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting import host
from gpugap.accounting.work import COMMUNICATION, op_buckets
from gpugap.report.table import unique_in_order
from gpugap.report.trace import NO_CALL, Derived, Trace


class AccountingIndex(Derived):
    """The accounting's derived state of one trace (module doc)."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        self._inits: dict[int, tl.Intervals] = {}     # library_inits, per thread

    @cached_property
    def api_categories(self) -> np.ndarray:
        """The category code (host.CATEGORIES) of every row of trace.api."""
        return host.api_categories(self.trace)

    @cached_property
    def calls(self) -> host.ApiCalls:
        """The CUDA calls in start order (host.ApiCalls)."""
        return host.ApiCalls(self.trace.table("api"))

    def library_inits(self, gtid: int) -> tl.Intervals:
        """A thread's library handle creations (host.library_inits)."""
        found = self._inits.get(gtid)
        if found is None:
            found = self._inits[gtid] = host.library_inits(self.trace, gtid)
        return found

    @cached_property
    def op_buckets(self) -> tuple[np.ndarray, ...]:
        """Bucket codes of the rows of trace.kernels, memcpys, memsets, graphs
        (work.op_buckets)."""
        return op_buckets(self.trace)

    @cached_property
    def kernel_flags(self) -> np.ndarray:
        """Per kernel: 1 where it is communication (work.COMMUNICATION), else 0 (the
        metrics' COMM and COMPUTE)."""
        k = self.trace.table("kernels")
        return (k.labels("name").matching(COMMUNICATION).astype(np.int8) if len(k)
                else np.zeros(0, np.int8))

    @cached_property
    def launches_by_thread(self) -> dict[int, list[tuple[np.ndarray, np.ndarray]]]:
        """Per launching thread (gtid), per kind of op: the launch times of its GPU ops
        (sorted) and their ends in that order. When one thread launched every kernel in
        time order (the common case) these are views of the kernel columns, not
        copies."""
        trace = self.trace
        out: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for f in map(trace.table, ("kernels", "memcpys", "memsets")):
            if not len(f):
                continue
            launch, gtid, end = f["api_start"], f["gtid"], f["end"]
            known = launch != NO_CALL
            first = gtid[0]
            if bool(known.all()) and bool((gtid == first).all()) and tl.is_sorted(launch):
                out.setdefault(int(first), []).append((launch, end))
                continue
            for g in unique_in_order(gtid[known]).tolist():
                mine = np.flatnonzero(known & (gtid == g))
                t, e = launch[mine].astype(np.int64), end[mine]
                if not tl.is_sorted(t):
                    order = np.argsort(t, kind="stable")
                    t, e = t[order], e[order]
                out.setdefault(int(g), []).append((t, e))
        return out
