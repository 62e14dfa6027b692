"""NVTX labels of moments: which user ranges were open at each time ('outer > inner'),
numbered instances folded into one name ('batch 7' -> 'batch N'), and the range most of
a finding's moments fall in. Beside the range table (gpugap.accounting.ranges), which
turns ranges into windows of GPU time; rules label their findings with these."""

from __future__ import annotations

import numpy as np

from gpugap import intervals as tl
from gpugap.program.nvtx import base_name, program_ranges, shown_name
from gpugap.report.table import Labels, factorize, unique_in_order
from gpugap.report.trace import Derived, Trace


def name_codes(names: Labels | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row, the distinct names) of a column of names, in order of first
    appearance as pd.factorize numbers them (a missing name, None, is one of them):
    Labels (API, kernel names) by their codes, plain strings (NVTX names) as they are."""
    if isinstance(names, Labels):
        codes, used = factorize(names.codes)
        return codes, np.append(names.categories, None)[used]
    # Plain strings are numbered through a dict, a hash table as pd.factorize's: O(n),
    # where sorting them (factorize's np.unique) compares Python strings, 5x slower on
    # the 45k NVTX ranges of a 1M-kernel report. (Labels need no such pass.)
    first: dict[object, int] = {}
    codes = np.fromiter((first.setdefault(n, len(first)) for n in names.tolist()),
                        dtype=np.intp, count=len(names))
    return codes, np.array(list(first), dtype=object)


def range_labels(trace: Trace, times, max_depth: int = 1) -> np.ndarray:
    """For each time: 'outer > inner' names of the user NVTX ranges (depth <= max_depth)
    open at that time, '' where none. Vectorised per depth: the latest range to start
    at or before t, if it is still open at t."""
    codes, labels = range_label_codes(trace, times, max_depth)
    return labels[codes]


class RangeLabels(Derived):
    """The rules' derived state of a trace's NVTX ranges (gpugap.report.trace.Derived):
    per max_depth, the user ranges of each depth in start order (``levels``) and how
    many levels finding labels keep (``depth``), each decided once per trace so that
    labelling times costs searches, not a pass over every range or name."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        self._levels: dict[int, tuple] = {}        # levels, per max_depth
        self._depth: dict[int, int] = {}           # depth, per max_depth

    def levels(self, max_depth: int):
        """The user ranges of each depth <= max_depth in start order (starts, ends, name
        codes), the names (``vocab``) and which are ''."""
        found = self._levels.get(max_depth)
        if found is None:
            found = self._levels[max_depth] = _label_levels(self.trace, max_depth)
        return found

    def depth(self, max_depth: int) -> int:
        """label_depth, decided once."""
        found = self._depth.get(max_depth)
        if found is None:
            found = self._depth[max_depth] = _label_depth(self, max_depth)
        return found


def _label_levels(trace: Trace, max_depth: int):
    """RangeLabels.levels, computed."""
    nv = program_ranges(trace)
    code, vocab = name_codes(nv["name"])
    depth, start, end = nv["depth"], nv["start"], nv["end"]
    levels = []
    for d in range(max_depth + 1):
        rows = np.flatnonzero(depth == d)
        if not rows.size:
            break
        rows = rows[np.argsort(start[rows], kind="stable")]
        levels.append((start[rows], end[rows], code[rows]))
    blank = np.array([str(v) == "" for v in vocab], dtype=bool) if vocab.size else vocab
    return levels, vocab, blank


# Times labelled at a time by range_label_codes: its working arrays (a few per depth,
# and factorize's sort) are then megabytes, not tens of them, for a million times.
_LABEL_CHUNK = 1 << 18


def range_label_codes(trace: Trace, times, max_depth: int = 1
                      ) -> tuple[np.ndarray, np.ndarray]:
    """range_labels as (code per time, distinct labels): labels[codes] are the labels.
    The strings are built once per distinct label, not once per time; the work per call
    is a search per time and depth, whatever the number of ranges or names."""
    times = np.asarray(times, dtype=np.int64)
    if times.size <= _LABEL_CHUNK:
        return _range_label_codes(trace, times, max_depth)
    # Labels are numbered in sorted order: each batch's codes are renumbered into the
    # sorted labels of all batches (the same numbers as labelling all times at once).
    codes = np.empty(times.size, dtype=np.int64)
    batch_labels = []
    for i in range(0, times.size, _LABEL_CHUNK):
        codes[i:i + _LABEL_CHUNK], found = _range_label_codes(
            trace, times[i:i + _LABEL_CHUNK], max_depth)
        batch_labels.append(found)
    labels = np.unique(np.concatenate(batch_labels))
    for i, found in zip(range(0, times.size, _LABEL_CHUNK), batch_labels, strict=True):
        codes[i:i + _LABEL_CHUNK] = np.searchsorted(labels, found)[codes[i:i + _LABEL_CHUNK]]
    return codes, labels


def _range_label_codes(trace: Trace, times: np.ndarray, max_depth: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """range_label_codes of one batch of times."""
    empty = np.array([""], dtype=object)
    if trace.table("nvtx").empty or times.size == 0:
        return np.zeros(times.shape, dtype=np.int64), empty
    levels, vocab, blank = RangeLabels.of(trace).levels(max_depth)
    if not levels:
        return np.zeros(times.shape, dtype=np.int64), empty
    # Per time and depth: 1 + the code of the open range's name, 0 where none; the
    # combination numbered level by level (factorize), so no key can overflow.
    width = np.int64(vocab.size + 1)
    key = np.zeros(times.shape, dtype=np.int64)
    parts = []
    attached = np.ones(times.shape, dtype=bool)   # a child only under a named parent
    for depth, (s, e, c) in enumerate(levels):
        k = tl.search_sorted_times(s, times, side="right") - 1
        kk = np.maximum(k, 0)
        ok = attached & (k >= 0) & (times < e[kk])
        part = np.where(ok, c[kk] + 1, 0)
        parts.append(part)
        key = factorize(key * width + part)[0].astype(np.int64)
        if depth == 0:
            attached = ok & ~blank[c[kk]]
    # key holds codes 0, 1, 2... numbered in order of first appearance (factorize): each
    # first appears where it exceeds every key before it.
    first = np.flatnonzero(np.r_[True, key[1:] > np.maximum.accumulate(key)[:-1]])
    texts = []
    for i in first.tolist():
        texts.append(" > ".join(vocab[p[i] - 1] for p in parts if p[i]))
    # Distinct keys give distinct label strings unless names contain ' > '; fold them so
    # equal labels share one code.
    labels, fold = np.unique(np.array(texts, dtype=object), return_inverse=True)
    return fold[key], labels


def split_label(label: str) -> list[str]:
    return [p for p in label.split(" > ") if p]


def _normal_label(label: str) -> str:

    return " > ".join(shown_name(base_name(p), base_name(p) != p) for p in split_label(label))


# Findings are grouped by the NVTX range they happen in. A nesting level whose ranges
# have more distinct names than this (numbered instances such as 'step 7' folded) names
# one-off ranges (torch's emit_nvtx 'aten::mm, seq = 812', a name per item...), not the
# program's structure: findings are then placed at the level above, and where that is
# the outermost level, in MANY_RANGES.
MAX_LABEL_NAMES = 256
MANY_RANGES = "<many distinct ranges>"


def label_depth(trace: Trace, max_depth: int = 1) -> int:
    """How many nesting levels (from the outermost) finding labels keep: the levels
    before the first with more than MAX_LABEL_NAMES distinct folded names. Decided once
    per trace (RangeLabels)."""
    return RangeLabels.of(trace).depth(max_depth)


def _label_depth(labels: RangeLabels, max_depth: int) -> int:
    """label_depth, computed: folds names only until the count is exceeded."""
    levels, vocab, _ = labels.levels(max_depth)
    keep = len(levels)
    for depth, (_, _, c) in enumerate(levels):
        codes = unique_in_order(c)
        if codes.size <= MAX_LABEL_NAMES:
            continue
        seen: set[str] = set()
        for name in vocab[codes].tolist():
            seen.add(base_name(str(name)))
            if len(seen) > MAX_LABEL_NAMES:
                break
        if len(seen) > MAX_LABEL_NAMES:
            keep = depth
            break
    return keep


def folded_label_codes(trace: Trace, times, max_depth: int = 1
                       ) -> tuple[np.ndarray, np.ndarray]:
    """range_label_codes with numbered instances folded into one name ('batch 7' and
    'batch 8' -> 'batch N'): where repeats of one problem across iterations happen.
    Levels too fine to group by (label_depth) are cut off."""
    codes, labels = range_label_codes(trace, times, max_depth)
    keep = label_depth(trace, max_depth)
    folded = []
    for x in labels.tolist():
        parts = split_label(_normal_label(str(x)))
        if len(parts) > keep:
            parts = parts[:keep] or [MANY_RANGES]
        folded.append(" > ".join(parts))
    uniq, remap = np.unique(np.array(folded, dtype=object), return_inverse=True)
    return remap[codes], uniq


def ranges_of(trace: Trace, times, weights=None) -> list[str]:
    """The NVTX ranges (outer first) most of *times* (or most of their *weights*: the
    time each stands for) fall in, numbered instances named as one ('batch 7' ->
    'batch N'): where a finding folded over iterations happens."""
    codes, labels = folded_label_codes(trace, times)
    if not codes.size:
        return []
    return split_label(str(labels[np.bincount(codes, weights=weights).argmax()]))
