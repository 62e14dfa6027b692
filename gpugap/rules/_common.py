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


CATEGORIES = ("module-load", "sync", "launch", "other")


def api_category_codes(api: pd.DataFrame) -> np.ndarray:
    """The category of every API row as an index into CATEGORIES (int8), computed once
    per distinct name."""
    names = api["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    lut = np.array([CATEGORIES.index(category(str(c))) for c in names.cat.categories]
                   + [CATEGORIES.index("other")], dtype=np.int8)
    return lut[names.cat.codes.to_numpy()]       # code -1 (NaN) reads the trailing 'other'


class ThreadApi:
    """One thread's CUDA API calls (rows of trace.api in start order) with what window
    queries need: ``reach`` is the running max of their ends, so the calls that end after
    t are exactly those from ``searchsorted(reach, t, 'right')`` on. Views of the frame's
    columns when the thread made every call (no copies); build it where needed and let it
    go: it is not cached."""

    def __init__(self, trace: Trace, gtid: int) -> None:
        api = trace.api
        mine = api["gtid"].to_numpy() == gtid
        start = api["start"].to_numpy(dtype=np.int64)
        end = api["end"].to_numpy(dtype=np.int64)
        category = trace_api_categories(trace)
        if bool(mine.all()):
            self.rows = None
        else:
            index = np.int32 if len(api) < 2**31 else np.int64
            self.rows = np.flatnonzero(mine).astype(index)
            start, end, category = start[self.rows], end[self.rows], category[self.rows]
        del mine
        if start.size > 1 and not bool((start[1:] >= start[:-1]).all()):
            order = np.argsort(start, kind="stable")    # the loader sorts; others may not
            self.rows = order if self.rows is None else self.rows[order]
            start, end, category = start[order], end[order], category[order]
        self.start, self.end, self.category = start, end, category
        self.reach = np.maximum.accumulate(end) if end.size else end
        self._names = api["name"]

    def names(self, i: np.ndarray) -> list[str]:
        if not len(i):
            return []
        return self._names.iloc[i if self.rows is None else self.rows[i]].astype(str).tolist()

    def coverage(self, lo: np.ndarray, hi: np.ndarray, categories: int) -> np.ndarray:
        """For windows [lo, hi) sorted and disjoint: (windows x categories) time the
        thread spent inside calls of each category (overlapping calls counted once).
        Calls are clipped to the windows and each category's running max of ends taken
        over the clipped pieces: pieces of earlier windows end before a window starts."""
        out = np.zeros((lo.size, categories), dtype=np.int64)
        first = np.searchsorted(self.reach, lo, side="right")
        last = np.maximum(np.searchsorted(self.start, hi, side="left"), first)
        counts = last - first
        cum = np.cumsum(counts)
        a = 0
        while a < lo.size:
            base = int(cum[a - 1]) if a else 0
            b = max(int(np.searchsorted(cum, base + (1 << 20), side="right")), a + 1)
            n = int(counts[a:b].sum())
            if n:
                w = np.repeat(np.arange(a, b), counts[a:b])
                idx = np.arange(n) - np.repeat(np.cumsum(counts[a:b]) - counts[a:b]
                                               - first[a:b], counts[a:b])
                ps = np.maximum(self.start[idx], lo[w])
                pe = np.minimum(self.end[idx], hi[w])
                cat = self.category[idx]
                del idx
                for c in range(categories):
                    mask = (cat == c) & (pe > ps)
                    if not mask.any():
                        continue
                    e_c = np.where(mask, pe, np.iinfo(np.int64).min)
                    prev = np.empty_like(e_c)
                    prev[0] = np.iinfo(np.int64).min
                    np.maximum.accumulate(e_c[:-1], out=prev[1:])
                    np.maximum(prev, ps, out=prev)
                    gain = np.where(mask, np.maximum(pe - prev, 0), 0)
                    out[:, c] += np.bincount(w, weights=gain, minlength=lo.size
                                             ).astype(np.int64)
            a = b
        return out


def trace_api_categories(trace: Trace) -> np.ndarray:
    """api_category_codes of trace.api, computed once per trace."""
    cached = trace.__dict__.get("_api_category_codes")
    if cached is None:
        cached = api_category_codes(trace.api)
        trace.__dict__["_api_category_codes"] = cached
    return cached


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
    codes, labels = range_label_codes(trace, times, max_depth)
    return labels[codes]


def range_label_codes(trace: Trace, times, max_depth: int = 1
                      ) -> tuple[np.ndarray, np.ndarray]:
    """range_labels as (code per time, distinct labels): labels[codes] are the labels.
    The strings are built once per distinct label, not once per time."""
    times = np.asarray(times, dtype=np.int64)
    nv = trace.nvtx
    empty = np.array([""], dtype=object)
    if nv.empty or times.size == 0:
        return np.zeros(times.shape, dtype=np.int64), empty
    nv = nv[~nv["library"]]
    vocab = np.array(sorted(set(nv["name"].astype(object).tolist())), dtype=object)
    width = len(vocab) + 1
    # Per time, one digit per depth: 1 + the name's index in vocab, 0 where no range.
    key = np.zeros(times.shape, dtype=np.int64)
    attached = np.ones(times.shape, dtype=bool)   # a child only under a named parent
    for depth in range(max_depth + 1):
        level = nv[nv["depth"] == depth].sort_values("start")
        if level.empty:
            break
        s = level["start"].to_numpy(dtype=np.int64)
        e = level["end"].to_numpy(dtype=np.int64)
        c = np.searchsorted(vocab, level["name"].to_numpy(dtype=object))
        k = np.searchsorted(s, times, side="right") - 1
        ok = attached & (k >= 0) & (times < e[np.maximum(k, 0)])
        key = key * width + np.where(ok, c[np.maximum(k, 0)] + 1, 0)
        if depth == 0:
            attached = ok & (vocab[c[np.maximum(k, 0)]] != "")
    codes, distinct = pd.factorize(key)
    texts = []
    for value in distinct.tolist():
        parts = []
        while value:
            value, part = divmod(value, width)
            if part:
                parts.append(vocab[part - 1])
        texts.append(" > ".join(reversed(parts)))
    # Distinct keys give distinct label strings unless names contain ' > '; fold them so
    # equal labels share one code.
    labels, fold = np.unique(np.array(texts, dtype=object), return_inverse=True)
    return fold[codes], labels


def split_label(label: str) -> list[str]:
    return [p for p in label.split(" > ") if p]
