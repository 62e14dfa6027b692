"""Helpers shared by rules: CUDA API categories, NVTX attribution, grouping."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from gpugap.report.trace import Trace

# Library/module loading: lazy loading of kernels happens inside these.
MODULE_LOAD = re.compile(r"^(?:cu|cuda)(?:Library|Module)Load|^cuLink(?:Complete|AddData|AddFile)")
# Calls that block the host until the GPU (or part of it) is done.
SYNC = re.compile(r"Synchronize$")
LAUNCH = re.compile(r"Launch")
MEMCPY = re.compile(r"Memcpy")
# Copies that are asynchronous by API contract (they may still block, e.g. pageable).
ASYNC = re.compile(r"Async")


def category(name: str) -> str:
    if MODULE_LOAD.search(name):
        return "module-load"
    if SYNC.search(name):
        return "sync"
    if LAUNCH.search(name):
        return "launch"
    return "other"


def name_mask(names: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Boolean per row: does its name match? Evaluated once per distinct name when the
    column is categorical (API and kernel names are), so millions of rows cost little."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hit = np.array([bool(pattern.search(str(c))) for c in names.cat.categories] + [False])
        return hit[names.cat.codes.to_numpy()]  # code -1 (NaN) reads the trailing False
    return names.astype(str).str.contains(pattern).to_numpy()


def api_categories(api: pd.DataFrame) -> np.ndarray:
    """The category of every API row (computed once per distinct name)."""
    names = api["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = np.array([category(c) for c in names.cat.categories], dtype=object)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, cats[np.maximum(codes, 0)] if len(cats) else "other",
                        "other")
    return np.array([category(n) for n in names.astype(str)], dtype=object)


def enclosing_ranges(trace: Trace, t: int, gtid: int | None = None) -> list[str]:
    """User NVTX ranges (outermost first) open at time t, on thread gtid if given."""
    nv = trace.nvtx
    if nv.empty:
        return []
    mask = (nv["start"] <= t) & (nv["end"] > t) & ~nv["library"]
    if gtid is not None:
        on_thread = mask & (nv["gtid"] == gtid)
        if on_thread.any():
            mask = on_thread
    hits = nv[mask].sort_values(["depth", "start"])
    return hits["name"].tolist()


def top(frame: pd.DataFrame, by: str, n: int = 5) -> pd.DataFrame:
    return frame.nlargest(n, by) if len(frame) > n else frame.sort_values(by, ascending=False)


def analysed_span(trace: Trace) -> int:
    span = trace.span()
    return 0 if span is None else span[1] - span[0]


def range_labels(trace: Trace, times, max_depth: int = 1) -> np.ndarray:
    """For each time: 'outer > inner' names of the user NVTX ranges (depth <= max_depth)
    open at that time, '' where none. Vectorised per depth: the latest range to start
    at or before t, if it is still open at t."""
    times = np.asarray(times, dtype=np.int64)
    labels = np.full(times.shape, "", dtype=object)
    nv = trace.nvtx
    if nv.empty or times.size == 0:
        return labels
    nv = nv[~nv["library"]]
    for depth in range(max_depth + 1):
        level = nv[nv["depth"] == depth].sort_values("start")
        if level.empty:
            break
        s = level["start"].to_numpy(dtype=np.int64)
        e = level["end"].to_numpy(dtype=np.int64)
        names = level["name"].to_numpy(dtype=object)
        k = np.searchsorted(s, times, side="right") - 1
        ok = (k >= 0) & (times < e[np.maximum(k, 0)])
        if depth > 0:
            ok &= labels != ""  # a child only under a known parent
        part = np.where(ok, names[np.maximum(k, 0)], "")
        labels = np.where(ok, np.where(labels == "", part, labels + " > " + part), labels)
    return labels


def split_label(label: str) -> list[str]:
    return [p for p in label.split(" > ") if p]
