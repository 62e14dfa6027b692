"""Evidence shared by rules and the verdict: what a host thread did inside time windows."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from gpugap.accounting.index import AccountingIndex
from gpugap.report.trace import Trace

# Calls that put a non-GPU dependency into a stream: what a queued operation can wait on
# while the GPU sits idle.
STREAM_DEPENDENCY = re.compile(r"LaunchHostFunc|StreamAddCallback|StreamWaitEvent|"
                               r"WaitExternalSemaphore|StreamWaitValue|StreamBatchMemOp")


def _top_coded(codes: np.ndarray, texts, ns: np.ndarray, n: int
               ) -> list[tuple[str, int, int]]:
    """_top_calls for names given as category codes (counted per code, not per row)."""
    if not codes.size:
        return []
    calls = np.bincount(codes)
    # Call times are integers far below 2**53: float sums are exact.
    totals = np.bincount(codes, weights=ns)
    items = [(str(texts[c]), int(calls[c]), int(round(totals[c])))
             for c in np.flatnonzero(calls).tolist()]
    items.sort(key=lambda item: item[0])
    items.sort(key=lambda item: -item[2])
    return items[:n]


def _codes_of(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    return names.cat.codes.to_numpy(), np.asarray(names.cat.categories, dtype=object)


def host_calls(trace: Trace, windows: list[tuple[int, int, int]],
                n: int = 4) -> list[list[dict]]:
    """For each window (gtid, lo, hi): the longest CUDA API and OS runtime calls of that
    thread inside [lo, hi), by name with their count and time inside the window. OS
    runtime calls are read once for all windows."""
    per_thread: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for g, lo, hi in windows:
        los, his = per_thread.get(g, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        per_thread[g] = (np.r_[los, lo], np.r_[his, hi])
    osrt = trace.osrt_overlapping(per_thread) if windows else None
    if osrt is not None and len(osrt):
        o_gtid = osrt["gtid"].to_numpy(dtype=np.int64)
        o_start = osrt["start"].to_numpy(dtype=np.int64)
        o_end = osrt["end"].to_numpy(dtype=np.int64)
        o_code, o_text = _codes_of(osrt["name"])
    if not trace.api.empty:
        api_code, api_text = _codes_of(trace.api["name"])
        calls = AccountingIndex.of(trace).calls
    out = []
    for g, lo, hi in windows:
        rows = []
        sources = []
        if not trace.api.empty:
            i = calls.overlapping(g, lo, hi)
            sources.append(("cuda", calls.start[i], calls.end[i], api_code[calls.rows(i)],
                            api_text))
        if osrt is not None and len(osrt):
            sel = np.flatnonzero((o_gtid == g) & (o_end > lo) & (o_start < hi))
            sources.append(("osrt", o_start[sel], o_end[sel], o_code[sel], o_text))
        for source, start, end, codes, texts in sources:
            inside = (np.minimum(end, hi) - np.maximum(start, lo)).astype(np.int64)
            rows += [{"source": source, "name": name, "calls": calls, "ns": ns}
                     for name, calls, ns in _top_coded(codes, texts, inside, n)]
        out.append(sorted(rows, key=lambda r: -r["ns"])[:n])
    return out


def dependency_calls(trace: Trace, windows: list[tuple[int, int, int]]
                      ) -> list[list[dict]]:
    """For each window (gtid, lo, hi): the calls of that thread starting in [lo, hi] that
    put a non-GPU dependency into a stream (STREAM_DEPENDENCY), by name."""
    out = []
    calls = AccountingIndex.of(trace).calls
    for g, lo, hi in windows:
        names = [n for n in calls.names(calls.starting(g, lo, hi))
                 if STREAM_DEPENDENCY.search(n)]
        out.append([{"name": name, "calls": names.count(name)}
                    for name in sorted(set(names), key=names.index)])
    return out
