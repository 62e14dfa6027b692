"""Which events a timeline keeps when a report has more than a page should hold.

A page draws at most *max_events* events per panel. Past that, events shorter than a
time quantum ``q`` that follow each other on a lane with gaps shorter than ``q`` are
merged into one span (drawn as one rectangle, its count in the hover): what a pixel
cannot show once the view is zoomed in so far that ``q`` is a pixel. ``q`` is the
smallest quantum that leaves at most *max_events* spans and events. Protected events
(a finding's evidence, the initial view) are never merged, and nothing merges across
them.

One number per event decides it. Walking a lane in start order, event i begins a new
span at quantum q unless it is short (dur_i < q), its predecessor was short, and it
starts within q of the lane's reach so far (the latest end before it)::

    lane ──[a]─[b]──[c]─────────────[  d (long)  ][e][f]──
             ╰── one span ──╯  gap ≥ q: new      d alone   e, f: a span
    t_i = max(dur_i, dur_(i-1), start_i - reach_(i-1));  i starts a span iff t_i ≥ q

so the number kept at q is #{i: t_i ≥ q}: a histogram of t (log-spaced bins) gives
the quantum in one pass, a second pass cuts the spans. Both passes walk the events in
time slices of about CHUNK events across all sources (each sorted by start), carrying
each lane's reach and last duration from slice to slice: memory stays a slice's worth,
whatever the report's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

INF = np.iinfo(np.int64).max
# The candidate quanta: 1 ns to 2^50 ns (13 days), 8 per power of two (~9% apart).
EDGES = np.unique(np.round(2.0 ** (np.arange(0, 50 * 8 + 1) / 8)).astype(np.int64))
# Events per time slice: ~100 bytes each while a slice is sorted and walked (25 MB),
# under what the analysis itself held at its peak (1M kernels: 1 << 20 raised it 40 MB).
CHUNK = 1 << 18


@dataclass
class Source:
    """One frame's events: *start* and *end* (ns, *start* sorted ascending), *lanes*
    (rows lo..hi -> lane index) and *protected* (rows lo..hi -> bool: never merged)."""

    start: np.ndarray
    end: np.ndarray
    lanes: Callable[[int, int], np.ndarray]
    protected: Callable[[int, int], np.ndarray]


@dataclass
class Kept:
    """Per source: the rows kept (ascending), the end of the span each one starts (its
    own end when it stands alone) and how many events it stands for (1: itself)."""

    rows: list[np.ndarray]
    end: list[np.ndarray]
    count: list[np.ndarray]
    quantum_ns: int
    events: int

    @property
    def kept(self) -> int:
        return sum(r.size for r in self.rows)

    @property
    def spans(self) -> int:
        return sum(int((c > 1).sum()) for c in self.count)


def decimate(sources: Sequence[Source], lanes: int, max_events: int,
             chunk: int = CHUNK) -> Kept:
    """The events and spans to draw: at most *max_events* (plus the protected events
    when those alone are more), see the module's docstring."""
    hist = np.zeros(EDGES.size + 1, dtype=np.int64)
    for s in _Walk(sources, lanes, chunk).slices():
        hist += np.bincount(np.searchsorted(EDGES, s.t, side="right"),
                            minlength=hist.size)
    # kept(EDGES[j]) = #{t >= EDGES[j]} = events in the buckets after j.
    tail = np.cumsum(hist[::-1])[::-1]
    fits = np.flatnonzero(tail[1:] <= max_events)
    quantum = int(EDGES[fits[0]]) if fits.size else INF
    return _cut(sources, lanes, quantum, chunk)


@dataclass
class _Slice:
    src: np.ndarray        # per event (in lane, start order): its source
    row: np.ndarray        # its row in the source
    lane: np.ndarray
    end: np.ndarray
    first: np.ndarray      # the first of its lane in this slice
    t: np.ndarray          # its threshold (module docstring)


class _Walk:
    """The events in time slices, each sorted by (lane, start, end), with each event's
    threshold t computed across slice boundaries."""

    def __init__(self, sources: Sequence[Source], lanes: int, chunk: int) -> None:
        self.sources, self.chunk = sources, chunk
        self.reach = np.full(lanes, np.iinfo(np.int64).min, dtype=np.int64)
        self.last_dur = np.full(lanes, INF, dtype=np.int64)
        self.seen = np.zeros(lanes, dtype=bool)

    def _bounds(self) -> np.ndarray:
        """Slice boundaries (start times): every chunk-th of a sample of each source's
        starts (a sample point stands for <= stride events of its source)."""
        stride = max(1, self.chunk // 16)
        sample = np.sort(np.concatenate([s.start[::stride] for s in self.sources]
                                        or [np.zeros(0, dtype=np.int64)]))
        return np.unique(sample[::max(1, self.chunk // stride)])

    def slices(self) -> Iterator[_Slice]:
        bounds = self._bounds()
        edges = np.concatenate([bounds, [INF]]) if bounds.size else np.array([INF])
        lo = [0] * len(self.sources)
        for b in edges[1:].tolist() + [None]:
            parts = []
            for k, s in enumerate(self.sources):
                hi = s.start.size if b is None else int(np.searchsorted(s.start, b, "left"))
                if hi > lo[k]:
                    parts.append((k, lo[k], hi))
                lo[k] = hi
            if parts:
                yield self._slice(parts)

    def _slice(self, parts: list[tuple[int, int, int]]) -> _Slice:
        src = np.concatenate([np.full(hi - lo, k, dtype=np.int8) for k, lo, hi in parts])
        row = np.concatenate([np.arange(lo, hi, dtype=np.int64) for _, lo, hi in parts])
        lane = np.concatenate([self.sources[k].lanes(lo, hi) for k, lo, hi in parts])
        start = np.concatenate([self.sources[k].start[lo:hi] for k, lo, hi in parts])
        end = np.concatenate([self.sources[k].end[lo:hi] for k, lo, hi in parts])
        prot = np.concatenate([self.sources[k].protected(lo, hi) for k, lo, hi in parts])
        end = np.maximum(end, start)
        order = np.lexsort((end, start, lane))
        src, row, lane, start, end, prot = (a[order] for a in
                                            (src, row, lane, start, end, prot))
        n = start.size
        first = np.ones(n, dtype=bool)
        first[1:] = lane[1:] != lane[:-1]
        last = np.ones(n, dtype=bool)
        last[:-1] = first[1:]
        # The lane's reach (latest end so far) before each event: a running maximum per
        # lane (lanes kept apart by an offset), after the reach carried in.
        seg = np.cumsum(first) - 1
        base = int(start.min())
        width = int(end.max()) - base + 1
        reach = np.maximum.accumulate(end - base + seg * width) - seg * width + base
        before = np.empty(n, dtype=np.int64)
        before[1:] = reach[:-1]
        before[first] = self.reach[lane[first]]
        before = np.maximum(before, self.reach[lane])
        dur = end - start
        own = np.where(prot, INF, dur)
        prev = np.empty(n, dtype=np.int64)
        prev[1:] = own[:-1]
        prev[first] = self.last_dur[lane[first]]
        gap = np.where(before == np.iinfo(np.int64).min, INF, start - before)
        t = np.maximum(np.maximum(own, prev), gap)
        t[first & ~self.seen[lane]] = INF            # a lane's first event
        ends = lane[last]
        self.reach[ends] = np.maximum(self.reach[ends], reach[last])
        self.last_dur[ends] = own[last]
        self.seen[ends] = True
        return _Slice(src, row, lane, end, first, t)


def _cut(sources: Sequence[Source], lanes: int, quantum: int, chunk: int) -> Kept:
    """The spans at *quantum*: each event with t >= quantum starts one, which takes the
    events after it on its lane up to the next such (across slices)."""
    src_parts, row_parts, end_parts, count_parts = [], [], [], []
    grow_at, grow_end, grow_count = [], [], []
    open_span = np.full(lanes, -1, dtype=np.int64)    # per lane: the span being extended
    made = 0
    events = 0
    for s in _Walk(sources, lanes, chunk).slices():
        events += s.t.size
        leader = s.t >= quantum
        blocks = np.flatnonzero(leader | s.first)
        block_end = np.maximum.reduceat(s.end, blocks)
        block_count = np.diff(np.append(blocks, s.t.size))
        new = leader[blocks]
        at = blocks[new]
        src_parts.append(s.src[at])
        row_parts.append(s.row[at])
        end_parts.append(block_end[new])
        count_parts.append(block_count[new])
        cont = ~new                     # a lane's first block in the slice: no leader
        if cont.any():
            grow_at.append(open_span[s.lane[blocks[cont]]])
            grow_end.append(block_end[cont])
            grow_count.append(block_count[cont])
        open_span[s.lane[at]] = made + np.arange(at.size)
        made += at.size
    src = np.concatenate(src_parts) if src_parts else np.zeros(0, dtype=np.int8)
    row = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
    end = np.concatenate(end_parts) if end_parts else np.zeros(0, dtype=np.int64)
    count = np.concatenate(count_parts) if count_parts else np.zeros(0, dtype=np.int64)
    if grow_at:
        at = np.concatenate(grow_at)
        np.maximum.at(end, at, np.concatenate(grow_end))
        np.add.at(count, at, np.concatenate(grow_count))
    rows, ends, counts = [], [], []
    for k in range(len(sources)):
        mine = np.flatnonzero(src == k)
        order = mine[np.argsort(row[mine], kind="stable")]
        rows.append(row[order])
        ends.append(end[order])
        counts.append(count[order])
    return Kept(rows, ends, counts, quantum, events)
