"""Evidence shared by rules and the verdict: what a host thread did inside time windows;
and how rules read name columns and group rows of a Table."""

from __future__ import annotations

import re

import numpy as np

from gpugap.accounting.index import AccountingIndex
from gpugap.report.table import Labels, as_labels, factorize
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


def group_ids(columns: list[np.ndarray | Labels]) -> np.ndarray:
    """Per row, the number of its group (rows equal in every one of *columns*), groups
    numbered in order of first appearance as ``groupby(sort=False).ngroup()``; -1 for a
    row missing a value (None, or a Labels' missing code), as groupby leaves those out."""
    missing = np.zeros(len(columns[0]), dtype=bool)
    keys = []
    for column in columns:
        if isinstance(column, Labels) or column.dtype == object:
            column = as_labels(column).codes
            missing |= column < 0
        keys.append(column)
    present = np.flatnonzero(~missing)
    group = np.zeros(present.size, dtype=np.intp)
    for key in keys:
        codes, distinct = factorize(key[present])
        # Renumbered after each column, the combined key stays below rows x distinct.
        group = factorize(group * distinct.size + codes)[0]
    out = np.full(missing.size, -1, dtype=np.intp)
    out[present] = group
    return out


def rows_by_group(group: np.ndarray) -> list[np.ndarray]:
    """The rows of each group of *group* (group_ids' numbers), groups in their order and
    rows in theirs; the rows of no group (-1) in none."""
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(int(group.max(initial=-1)) + 2))
    return [order[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(),
                                       strict=True)]


def host_calls(trace: Trace, windows: list[tuple[int, int, int]],
                n: int = 4) -> list[list[dict]]:
    """For each window (gtid, lo, hi): the longest CUDA API and OS runtime calls of that
    thread inside [lo, hi), by name with their count and time inside the window. OS
    runtime calls are read once for all windows."""
    per_thread: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for g, lo, hi in windows:
        los, his = per_thread.get(g, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        per_thread[g] = (np.r_[los, lo], np.r_[his, hi])
    osrt = trace.osrt_calls_overlapping(per_thread) if windows else None
    if osrt is not None and len(osrt):
        o_gtid = np.asarray(osrt["gtid"], dtype=np.int64)
        o_start = np.asarray(osrt["start"], dtype=np.int64)
        o_end = np.asarray(osrt["end"], dtype=np.int64)
        o_names = as_labels(osrt["name"])
        o_code, o_text = o_names.codes, o_names.categories
    api = trace.table("api")
    if not api.empty:
        api_names = as_labels(api["name"])
        api_code, api_text = api_names.codes, api_names.categories
        calls = AccountingIndex.of(trace).calls
    out = []
    for g, lo, hi in windows:
        rows = []
        sources = []
        if not api.empty:
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
