"""Helpers shared by rules: CUDA API name patterns, a thread's calls, NVTX attribution."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from gpugap.accounting.host import MODULE_LOAD, name_mask  # noqa: F401 (used by rules)
from gpugap.report.trace import Trace

# Calls that block the host until the GPU (or part of it) is done.
SYNC = re.compile(r"Synchronize$")
LAUNCH = re.compile(r"Launch")
MEMCPY = re.compile(r"Memcpy")
# Copies that are asynchronous by API contract (they may still block, e.g. pageable).
ASYNC = re.compile(r"Async")


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
        self.reach = np.maximum.accumulate(end) if end.size else end
        self._names = api["name"]

    def names(self, i: np.ndarray) -> list[str]:
        if not len(i):
            return []
        return self._names.iloc[i if self.rows is None else self.rows[i]].astype(str).tolist()


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
    from gpugap.ranges import user_ranges

    nv = user_ranges(trace)
    if nv.empty:
        return np.zeros(times.shape, dtype=np.int64), empty
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


def _normal_label(label: str) -> str:
    from gpugap.accounting.phases import base_name, shown_name

    return " > ".join(shown_name(base_name(p), base_name(p) != p) for p in split_label(label))


def folded_label_codes(trace: Trace, times, max_depth: int = 1
                       ) -> tuple[np.ndarray, np.ndarray]:
    """range_label_codes with numbered instances folded into one name ('batch 7' and
    'batch 8' -> 'batch N'): where repeats of one problem across iterations happen."""
    codes, labels = range_label_codes(trace, times, max_depth)
    folded = np.array([_normal_label(str(x)) for x in labels], dtype=object)
    uniq, remap = np.unique(folded, return_inverse=True)
    return remap[codes], uniq


def ranges_of(trace: Trace, times, weights=None) -> list[str]:
    """The NVTX ranges (outer first) most of *times* (or most of their *weights*: the
    time each stands for) fall in, numbered instances named as one ('batch 7' ->
    'batch N'): where a finding folded over iterations happens."""
    codes, labels = folded_label_codes(trace, times)
    if not codes.size:
        return []
    return split_label(str(labels[np.bincount(codes, weights=weights).argmax()]))
