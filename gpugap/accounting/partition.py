"""The partition of a device's window into buckets, stored compact, and queries on it.

Pieces in time order, one after another from the window's start to its end, as (length,
bucket code): 5 bytes each, in blocks (the accounting's time slices) whose start times
and first pieces are kept, so that any time range is decoded from its blocks alone:

    block_start:  [k=0 .................)[k=1 ..........)[k=2 ....)  window's end
    pieces:       |cmp|launch|cmp|sync|cmp|cmp|host-work|cmp|...
    length, code: one entry per piece; block_first[k]: block k's first piece

Queries never decode more than the blocks a time range touches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import BUSY_IDS, CODE, IDS
from gpugap.memory import joined

Pieces = tuple[np.ndarray, np.ndarray, np.ndarray]      # (starts, ends, bucket codes)

_LONGEST = np.iinfo(np.uint32).max
TOTALS_PIECES = 1 << 20       # pieces whose codes are read at a time (_codes_present)
# The busy buckets come first (buckets.BUCKETS): a code is idle from this one on (a
# comparison per piece, not a look-up).
FIRST_IDLE = len(BUSY_IDS)


@dataclass
class Partition:
    """A device window's pieces, compact (module doc)."""

    length: np.ndarray        # uint32 ns, pieces in time order (long ones split)
    code: np.ndarray          # int8 bucket code (index into buckets.IDS) of each
    block_start: np.ndarray   # int64: where block k begins (one more: the window's end)
    block_first: np.ndarray   # int64: its first piece (one more: the number of pieces)
    # Each block's time per bucket (float64, exact: see totals), computed when first
    # asked: a window's whole blocks are summed from it, not decoded.
    _block_totals: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def block_count(self) -> int:
        return self.block_start.size - 1

    def decode(self, k0: int, k1: int) -> Pieces:
        """(starts, ends, codes) of the pieces of blocks [k0, k1), in time order."""
        i0, i1 = int(self.block_first[k0]), int(self.block_first[k1])
        lengths = self.length[i0:i1].astype(np.int64)
        end = int(self.block_start[k0]) + np.cumsum(lengths)
        return end - lengths, end, self.code[i0:i1]

    def block_range(self, lo: int | None = None, hi: int | None = None) -> range:
        """The numbers of the blocks overlapping [lo, hi) (default: all)."""
        n = self.block_count
        k0 = 0 if lo is None else max(int(np.searchsorted(self.block_start, lo, "right")) - 1,
                                      0)
        k1 = n if hi is None else min(int(np.searchsorted(self.block_start, hi, "left")), n)
        return range(k0, k1)

    def blocks(self, lo: int | None = None, hi: int | None = None, *,
               numbers: range | None = None
               ) -> Iterator[tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray]]:
        """(number, start, end, starts, ends, codes) of each block overlapping [lo, hi)
        (default: all), or of the blocks *numbers*, one at a time."""
        for k in self.block_range(lo, hi) if numbers is None else numbers:
            yield (k, int(self.block_start[k]), int(self.block_start[k + 1]),
                   *self.decode(k, k + 1))

    def pieces(self, lo: int, hi: int, buckets=None) -> Pieces:
        """The pieces inside [lo, hi) (clipped), of *buckets* only if given."""
        codes = None if buckets is None else [IDS.index(b) for b in buckets if b in IDS]
        parts = []
        for _, _, _, s, e, c in self.blocks(lo, hi):
            keep = (e > lo) & (s < hi)
            if codes is not None:
                keep &= np.isin(c, codes)
            parts.append((np.maximum(s[keep], lo), np.minimum(e[keep], hi), c[keep]))
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0, dtype=np.int8)
        return tuple(np.concatenate(x) for x in zip(*parts, strict=True))

    def totals(self, lo, hi) -> np.ndarray:
        """Bucket time (ns) inside each window [lo[i], hi[i]): one row per window, one
        column per bucket code. All windows in one pass over the blocks they touch: the
        window edges cut time into elementary segments (between consecutive edges); the
        pieces are summed per segment and bucket (a piece across edges clipped to each
        segment it spans), and each window is the difference of two prefix sums over
        the segments."""
        lo = np.atleast_1d(np.asarray(lo, dtype=np.int64))
        hi = np.atleast_1d(np.asarray(hi, dtype=np.int64))
        out = np.zeros((lo.size, len(IDS)), dtype=np.int64)
        real = hi > lo
        if not real.any():
            return out
        edges = np.sort(np.r_[lo[real], hi[real]])
        edges = edges[np.r_[True, edges[1:] != edges[:-1]]]       # distinct, in order
        touched = self.block_range(int(edges[0]), int(edges[-1]))
        if not len(touched):
            return out
        # Columns for the buckets that occur in those blocks only.
        i0, i1 = int(self.block_first[touched[0]]), int(self.block_first[touched[-1] + 1])
        present = _codes_present(self.code[i0:i1])
        column = np.zeros(len(IDS), dtype=np.int64)
        column[present] = np.arange(present.size)
        per_segment = np.zeros((edges.size - 1, present.size), dtype=np.float64)
        # A block that lies inside one segment adds its totals there, undecoded.
        starts = self.block_start[touched[0]:touched[-1] + 2]
        seg = np.searchsorted(edges, starts[:-1], side="right") - 1
        within = (seg >= 0) & (seg < edges.size - 1) \
            & (edges[np.minimum(seg + 1, edges.size - 1)] >= starts[1:])
        if within.any():
            whole = np.asarray(touched)[within]
            np.add.at(per_segment, seg[within],
                      self.block_totals()[np.ix_(whole, present)])
        for k in np.asarray(touched)[~within].tolist():
            s, e, c = self.decode(k, k + 1)
            _add_per_segment(per_segment, edges, s, e, column[c])
        # (Float sums of integer lengths are exact below 2**53 ns: 104 days.)
        prefix = np.zeros((edges.size, present.size), dtype=np.float64)
        np.cumsum(per_segment, axis=0, out=prefix[1:])
        a = np.searchsorted(edges, lo[real])
        b = np.searchsorted(edges, hi[real])
        out[np.ix_(np.flatnonzero(real), present)] = prefix[b] - prefix[a]
        return out

    def block_totals(self) -> np.ndarray:
        """Each block's time per bucket code (float64: a row per block)."""
        if self._block_totals is None:
            width = len(IDS)
            totals = np.zeros((self.block_count, width), dtype=np.float64)
            first = self.block_first.tolist()
            # A block at a time: no array of a block number per piece (tens of millions
            # at 10M kernels), and its codes counted as they are.
            for k, (i0, i1) in enumerate(zip(first[:-1], first[1:], strict=True)):
                totals[k] = np.bincount(self.code[i0:i1], weights=self.length[i0:i1],
                                        minlength=width)
            self._block_totals = totals
        return self._block_totals

    def relabel(self, old: str, new: str, where: tl.Intervals, min_share: float = 0.5
                ) -> int:
        """Pieces of bucket *old* that lie at least *min_share* inside *where* (a union)
        become *new*; returns the time moved."""
        code_old, code_new = CODE[old], CODE[new]
        moved = 0
        if not where[0].size:
            return 0
        for k, _, _, s, e, c in self.blocks(int(where[0][0]), int(where[1][-1])):
            mine = np.flatnonzero(c == code_old)
            if not mine.size:
                continue
            inside = tl.covered_before(where, e[mine]) - tl.covered_before(where, s[mine])
            hit = mine[inside >= min_share * (e[mine] - s[mine])]
            if hit.size:
                self.code[int(self.block_first[k]) + hit] = code_new
                moved += int((e[hit] - s[hit]).sum())
                self._block_totals = None
        return moved


def _codes_present(code: np.ndarray) -> np.ndarray:
    """The bucket codes that occur in *code*, in order: a bit per code (fewer than 32),
    or-ed over TOTALS_PIECES at a time (no array of every piece's code widened: 160 MB
    of int64 for a 10M-kernel device; a bincount's is 4x slower)."""
    bits = 0
    for i in range(0, code.size, TOTALS_PIECES):
        # The shifts in int32 whatever the numpy: 1.x would shift in int8, the codes' type.
        shifts = code[i:i + TOTALS_PIECES].astype(np.int32)
        bits |= int(np.bitwise_or.reduce(np.left_shift(1, shifts, dtype=np.int32), initial=0))
    return np.flatnonzero((bits >> np.arange(len(IDS))) & 1)


def _add_per_segment(per_segment: np.ndarray, edges: np.ndarray, s: np.ndarray,
                     e: np.ndarray, column: np.ndarray) -> None:
    """Add the time of pieces (s, e) to *per_segment* (a row per segment between
    consecutive *edges*, a column per bucket: *column* of each piece). Most pieces lie
    inside one segment; the few across an edge are cut (pieces_in)."""
    n, width = per_segment.shape
    if not s.size:
        return
    # The pieces tile their block (each ends where the next starts): one search of
    # their edges gives both the segment of each piece's first ns and of its last.
    t = np.r_[s, e[-1:]]
    # Edges before each edge: counted among the edges within the pieces' time only.
    a = int(np.searchsorted(edges, t[0], side="left"))
    z = int(np.searchsorted(edges, t[-1], side="right"))
    near = edges[a:z]
    at = a + tl.search_sorted_times(near, t, side="left")
    # The few edges that a piece starts at, found from the edges' side (pieces have
    # length: each time of t is another).
    on_edge = np.zeros(t.size, dtype=bool)
    hit = np.minimum(np.searchsorted(t, near, side="left"), t.size - 1)
    on_edge[hit[t[hit] == near]] = True
    first = (at + on_edge)[:-1] - 1                         # segment of the first ns
    last = at[1:] - 1                                       # segment of the last ns
    k0, k1 = max(int(first[0]), 0), min(int(last[-1]), n - 1) + 1   # segments touched
    if k1 <= k0:
        return
    mine = per_segment[k0:k1].reshape(-1)                  # a view: added to in place
    whole = (first == last) & (first >= 0) & (first < n)
    mine += np.bincount((first[whole] - k0) * width + column[whole],
                        weights=(e - s)[whole], minlength=mine.size)
    across = np.flatnonzero(first != last)
    if across.size:
        ps, pe, i, k = tl.pieces_in(s[across], e[across],
                                    (edges[k0:k1], edges[k0 + 1:k1 + 1]))
        mine += np.bincount(k * width + column[across][i], weights=pe - ps,
                            minlength=mine.size)


def idle_runs(s: np.ndarray, e: np.ndarray, c: np.ndarray) -> tl.Intervals:
    """The gaps among pieces (in time order, one after another): runs of idle pieces
    (busy time always lies between two gaps)."""
    # Padded with busy at both ends: the changes alternate, a run's first piece then
    # the piece after its last.
    idle = np.zeros(c.size + 2, dtype=bool)
    np.greater_equal(c, FIRST_IDLE, out=idle[1:-1])
    change = np.flatnonzero(idle[1:] != idle[:-1])
    return s[change[0::2]], e[change[1::2] - 1]


class PartitionWriter:
    """Builds a Partition block by block: each block's labelled pieces compacted
    (``block``, which may run in another process), then added in time order (``add``)."""

    def __init__(self) -> None:
        self._lengths: list[np.ndarray] = []
        self._codes: list[np.ndarray] = []
        self._block_start: list[int] = []
        self._block_first = [0]

    @staticmethod
    def block(t0: int, s: np.ndarray, e: np.ndarray, c: np.ndarray
              ) -> tuple[int, np.ndarray, np.ndarray]:
        """Block starting at *t0*, of the labelled pieces (s, e, c) that tile it (any
        order; neighbours of one bucket that touch are merged), as ``add`` takes it:
        (t0, lengths, codes), 5 bytes a piece."""
        s, e, c = coalesce(s, e, c)
        keep = e > s
        return (t0, *_compact(e[keep] - s[keep], c[keep]))

    def add(self, t0: int, length: np.ndarray, code: np.ndarray) -> None:
        """The next block, as ``block`` made it."""
        self._lengths.append(length)
        self._codes.append(code)
        self._block_start.append(t0)
        self._block_first.append(self._block_first[-1] + length.size)

    def finish(self, hi: int) -> Partition:
        """The partition of the blocks added, the last ending at *hi*."""
        return Partition(joined(self._lengths, np.uint32), joined(self._codes, np.int8),
                         np.array([*self._block_start, hi], dtype=np.int64),
                         np.array(self._block_first, dtype=np.int64))


def coalesce(s: np.ndarray, e: np.ndarray, c: np.ndarray) -> Pieces:
    """Labelled pieces (any order) in time order, neighbours of one bucket that touch
    merged (inside and outside a launch call, both launch-bound, are one piece)."""
    if s.size < 2:
        return s, e, c
    order = np.argsort(s, kind="stable")
    s, e, c = s[order], e[order], c[order]
    new = np.r_[True, (c[1:] != c[:-1]) | (s[1:] != e[:-1])]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, s.size - 1]
    return s[first], e[last], c[first]


def _compact(length: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths as uint32 (a piece longer than 4.29 s is split into several)."""
    if length.size and int(length.max()) > _LONGEST:
        parts = -(-length // _LONGEST)                 # ceil: pieces each becomes
        code = np.repeat(code, parts)
        first = np.r_[0, np.cumsum(parts)[:-1]]
        out = np.full(int(parts.sum()), _LONGEST, dtype=np.int64)
        out[first + parts - 1] = length - (parts - 1) * _LONGEST
        length = out
    return length.astype(np.uint32), code.astype(np.int8)
