"""Helpers shared by rules: CUDA API name patterns, a thread's calls.

NVTX labelling lives beside the range table, in gpugap.accounting.labels; its names are
re-exported here for the rules that still import them from here (small_grid, launch_gap,
serialized_streams). New code imports gpugap.accounting.labels."""

from __future__ import annotations

import re

import numpy as np

from gpugap.accounting.attribution import LOOKBACK_NS
from gpugap.accounting.host import MODULE_LOAD, name_mask  # noqa: F401 (used by rules)
from gpugap.accounting.labels import (  # noqa: F401 (re-exported, see above)
    folded_label_codes,
    range_label_codes,
    ranges_of,
    split_label,
)
from gpugap.report.trace import Trace

# Calls that block the host until the GPU (or part of it) is done.
SYNC = re.compile(r"Synchronize$")
LAUNCH = re.compile(r"Launch")
MEMCPY = re.compile(r"Memcpy")
# Copies that are asynchronous by API contract (they may still block, e.g. pageable).
ASYNC = re.compile(r"Async")


class ThreadApi:
    """One thread's CUDA API calls (rows of trace.api in start order) with what window
    queries need (``overlapping``): a call that overlaps a time started at most
    LOOKBACK_NS before it, unless it is one of the few longer calls (``long``). Views of
    the frame's columns when the thread made every call (no copies); build it where
    needed and let it go: it is not cached."""

    def __init__(self, trace: Trace, gtid: int) -> None:
        api = trace.api
        mine = api["gtid"].to_numpy() == gtid
        start = api["start"].to_numpy(dtype=np.int64)
        end = api["end"].to_numpy(dtype=np.int64)
        if bool(mine.all()):
            self.rows = None
        else:
            index = np.int32 if len(api) < 2**31 else np.int64
            self.rows = np.flatnonzero(mine).astype(index)
            start, end = start[self.rows], end[self.rows]
        del mine
        if start.size > 1 and not bool((start[1:] >= start[:-1]).all()):
            order = np.argsort(start, kind="stable")    # the loader sorts; others may not
            self.rows = order if self.rows is None else self.rows[order]
            start, end = start[order], end[order]
        self.start, self.end = start, end
        step = 1 << 22                       # found in batches: no array of every duration
        self.long = np.concatenate(
            [i + np.flatnonzero(end[i:i + step] - start[i:i + step] > LOOKBACK_NS)
             for i in range(0, start.size, step)] or [np.zeros(0, np.int64)])
        self._names = api["name"]

    def overlapping(self, lo: int, hi: int) -> np.ndarray:
        """Indices (in start order) of the calls that overlap [lo, hi): end after lo,
        start before hi."""
        a = int(np.searchsorted(self.start, lo - LOOKBACK_NS, side="left"))
        b = int(np.searchsorted(self.start, hi, side="left"))
        i = np.r_[self.long[self.long < a], np.arange(a, max(a, b))].astype(np.int64)
        return i[self.end[i] > lo]

    def names(self, i: np.ndarray) -> list[str]:
        if not len(i):
            return []
        return self._names.iloc[i if self.rows is None else self.rows[i]].astype(str).tolist()
