"""Interval algebra on numpy arrays: unions, gaps, coverage, overlap. No loops over events.

An *interval set* is a pair of int64 arrays (starts, ends) of half-open intervals
[start, end). A *union* is an interval set that is sorted, disjoint and non-adjacent:
the form ``union`` returns and most functions here expect.

    events:   [====)    [=====)
                 [=====)          [==)
    union:    [========)[=====)   [==)   (adjacent pieces stay apart only if not touching)
    gaps:               ^ none   ^^^ gap between 11 and 14, within [lo, hi)
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]

EMPTY: Intervals = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def as_intervals(starts, ends) -> Intervals:
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    if bool(keep.all()):
        return s, e
    return s[keep], e[keep]


_SORTED_CHUNK = 1 << 20


def is_sorted(a: np.ndarray, tie: np.ndarray | None = None, *, strict: bool = False
              ) -> bool:
    """Whether *a* never decreases (*strict*: always increases); with *tie*, whether
    the rows are in (a, tie) order: where *a* stays the same, *tie* never decreases.
    Checked a million steps at a time (no array of every step's comparison: 24 MB for
    24M calls), stopping at the first out of order."""
    for i in range(0, a.size - 1, _SORTED_CHUNK):
        part = slice(i, i + _SORTED_CHUNK + 1)
        x = a[part]
        if strict:
            ok = bool((x[1:] > x[:-1]).all())
        else:
            ok = bool((x[1:] >= x[:-1]).all())
            if ok and tie is not None:
                t = tie[part]
                ok = bool(((x[1:] > x[:-1]) | (t[1:] >= t[:-1])).all())
        if not ok:
            return False
    return True


def search_sorted_times(a: np.ndarray, v: np.ndarray,
                        side: Literal["left", "right"] = "left") -> np.ndarray:
    """np.searchsorted(a, v, side) (a sorted). Where *v* is sorted too and several times
    longer than *a*, the positions are counted instead of searched: each of *a* is
    searched among *v* (the fewer searches) and the counts summed up, a pass over *v*
    instead of a binary search per value."""
    if v.size < 4 * a.size or not is_sorted(v):
        return np.searchsorted(a, v, side=side)
    # a[j] lies before v[i] (side right: a[j] <= v[i]; left: a[j] < v[i]) exactly when
    # a[j] is searched to at most i among v from the other side.
    at = np.searchsorted(v, a, side="left" if side == "right" else "right")
    counts = np.bincount(at, minlength=v.size + 1)[:v.size]
    return np.cumsum(counts, out=counts)             # in place: one array per time


def union(starts, ends) -> Intervals:
    """Merge overlapping or touching intervals into a sorted disjoint set."""
    s, e = as_intervals(starts, ends)
    if s.size == 0:
        return EMPTY
    if not is_sorted(s):             # events usually come in start order already
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # A new piece starts where an interval begins after everything before it ended.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    del reach
    first = np.flatnonzero(new)
    del new
    return s[first], np.maximum.reduceat(e, first)


def total(iv: Intervals) -> int:
    return int((iv[1] - iv[0]).sum())


def clip(iv: Intervals, lo: int, hi: int) -> Intervals:
    s = np.clip(iv[0], lo, hi)
    e = np.clip(iv[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def gaps(u: Intervals, lo: int | None = None, hi: int | None = None) -> Intervals:
    """Holes of a union between lo and hi (default: its own first start and last end)."""
    s, e = u
    if s.size == 0:
        if lo is None or hi is None or hi <= lo:
            return EMPTY
        return np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)
    lo = int(s[0]) if lo is None else lo
    hi = int(e[-1]) if hi is None else hi
    gs = np.r_[lo, e]
    ge = np.r_[s, hi]
    return clip((gs, ge), lo, hi)


def covered_before(u: Intervals, t: np.ndarray) -> np.ndarray:
    """For each time t: how much of union u lies before t (vectorised via prefix sums)."""
    s, e = u
    t = np.asarray(t, dtype=np.int64)
    if s.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    lengths = np.r_[0, np.cumsum(e - s)]
    # The last piece starting at or before t (piece 0 before the first: t lies before
    # it, so nothing of it counts, and nothing lies before it).
    k = np.maximum(np.searchsorted(s, t, side="right") - 1, 0)
    return lengths[k] + np.maximum(np.minimum(t, e[k]) - s[k], 0)


def _covered_between(u: Intervals, lo, hi) -> np.ndarray:
    """Per window [lo[i], hi[i]): how much of union u lies inside (covered_before of both
    ends in one pass over u)."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    both = covered_before(u, np.concatenate([lo.ravel(), hi.ravel()]))
    return np.maximum(both[lo.size:].reshape(hi.shape) - both[:lo.size].reshape(lo.shape), 0)


def overlap_each(starts, ends, u: Intervals) -> np.ndarray:
    """Per interval [starts[i], ends[i]): length of its overlap with union u."""
    return _covered_between(u, starts, ends)


def intersect_total(a: Intervals, b: Intervals) -> int:
    """Length of the intersection of two unions."""
    return int(overlap_each(a[0], a[1], b).sum())


def coverage_profile(starts, ends, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Step function of how many intervals are active: (times, level from that time on).

    With *weights*, each interval adds its weight instead of 1."""
    s, e = as_intervals(starts, ends)
    if s.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    w = np.ones(s.size, dtype=np.int64) if weights is None else np.asarray(weights)[
        (np.asarray(ends) > np.asarray(starts))]
    times = np.r_[s, e]
    deltas = np.r_[w, -w]
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)
    # Keep the last level at each distinct time.
    last = np.r_[times[1:] != times[:-1], True]
    return times[last], level[last]


def time_at_level(times: np.ndarray, level: np.ndarray, predicate) -> tuple[int, int]:
    """(Σ level·dt, Σ dt) over the steps of a coverage profile where predicate(level)."""
    if times.size < 2:
        return 0, 0
    dt = np.diff(times)
    lv = level[:-1]
    mask = predicate(lv)
    return int((lv[mask] * dt[mask]).sum()), int(dt[mask].sum())


def within(points, u: Intervals) -> np.ndarray:
    """Boolean: does each time point lie inside union u?"""
    s, e = u
    p = np.asarray(points, dtype=np.int64)
    if s.size == 0:
        return np.zeros(p.shape, dtype=bool)
    k = np.searchsorted(s, p, side="right") - 1
    return (k >= 0) & (p < e[np.maximum(k, 0)])


def shared_idle_each(starts, ends, shares, chunk: int = 1 << 18
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per interval: (idle, own), in ns. *idle*: the share of a resource left unused
    while it ran, split among the intervals running at the same time; *own*: its share
    of the wall time, split the same way (the own times of all intervals add up to the
    length of their union).

    Interval i holds shares[i] (0..1) of the resource (a kernel: the share of the SMs its
    grid covers). At each instant the unused part, 1 - min(1, sum of active shares), is
    split equally among the active intervals; each gets the integral of its part over
    its lifetime. Alone, an interval gets (1 - share) x its length; intervals that fill
    the resource together get 0, so the results add up to the idle capacity without
    counting any instant twice, and sum(idle) / sum(own) over a set of intervals is the
    idle share of the resource while they ran.

    Works in start-ordered batches of *chunk* intervals (SharedIdle), carrying the ones
    still running into the next batch, so memory stays bounded on millions of
    intervals.
    """
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    w = np.asarray(shares, dtype=np.float64)
    n = s.size
    if n == 0:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.float64)
    order = None if is_sorted(s) else np.argsort(s, kind="stable")
    if order is not None:
        s, e, w = s[order], e[order], w[order]
    idle, own = SharedIdle(s, e, w, chunk).take(0, n)
    if order is not None:
        back = np.empty_like(order)
        back[order] = np.arange(n)
        idle, own = idle[back], own[back]
    return idle, own


class SharedIdle:
    """shared_idle_each of intervals already in start order, read a stretch at a time:
    ``take(i0, i1)`` (stretches in order, each from where the last ended) sweeps only as
    far as those intervals need, and keeps only the values not yet taken, so a caller
    walking millions of intervals in batches holds no array of them all. *shares*: an
    array, or a function giving the shares of the intervals at given indices (an array
    of them, or a slice)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, shares, chunk: int = 1 << 18
                 ) -> None:
        self._s, self._e = starts, ends          # an end below its start reads as the start
        self._shares = shares
        self._chunk = chunk
        self._n = starts.size
        self._last_end = (max(int(ends.max()), int(starts.max())) if self._n else 0)
        self._next = 0                            # the next batch's first interval
        self._carry = np.zeros(0, dtype=np.int64)
        self._base = 0                            # the buffer's row 0 is this interval
        self._idle = np.zeros(0, dtype=np.float64)
        self._own = np.zeros(0, dtype=np.float64)

    def _share(self, at: np.ndarray) -> np.ndarray:
        shares = self._shares
        return shares(at) if callable(shares) else np.asarray(shares, np.float64)[at]

    def _room(self, rows: int) -> None:
        """A buffer for at least *rows* intervals from the base (doubling, so that a
        sweep past a take grows it a few times, not once per batch)."""
        if rows <= self._idle.size:
            return
        size = min(max(rows, 2 * self._idle.size), self._n - self._base)
        for name in ("_idle", "_own"):
            old = getattr(self, name)
            grown = np.zeros(size)
            grown[:old.size] = old
            setattr(self, name, grown)

    def _sweep(self) -> None:
        """One batch: window [lo, hi) from its first start to the next batch's (every
        instant in exactly one window), with the intervals carried into it."""
        a, n, s = self._next, self._n, self._s
        b = min(a + self._chunk, n)
        lo, hi = int(s[a]), (int(s[b]) if b < n else self._last_end)
        self._room(b - self._base)
        # The carried intervals, then the batch's (a slice of the arrays: no gather).
        carry = self._carry
        start = np.concatenate([s[carry], s[a:b]])
        end = np.concatenate([self._e[carry], self._e[a:b]])
        np.maximum(end, start, out=end)
        ps, pe = np.maximum(start, lo), np.minimum(end, hi)
        live = pe > ps
        if live.all():                            # as a rule: the batch read as it is
            shares = np.concatenate([self._share(carry), self._share(slice(a, b))])
            piece_idle, piece_own = _shared_window(ps, pe, shares)
            del ps, pe, shares
            rows = slice(a - self._base, b - self._base)
            self._idle[carry - self._base] += piece_idle[:carry.size]
            self._idle[rows] += piece_idle[carry.size:]
            self._own[carry - self._base] += piece_own[:carry.size]
            self._own[rows] += piece_own[carry.size:]
        elif live.any():
            at = np.concatenate([carry, np.arange(a, b, dtype=np.int64)])[live]
            piece_idle, piece_own = _shared_window(ps[live], pe[live], self._share(at))
            self._idle[at - self._base] += piece_idle
            self._own[at - self._base] += piece_own
        running = end > hi
        self._carry = np.concatenate([carry[running[:carry.size]],
                                      a + np.flatnonzero(running[carry.size:])])
        self._next = b

    def _done(self) -> int:
        """Intervals before this one have their final values."""
        if self._next >= self._n:
            return self._n
        return int(self._carry.min()) if self._carry.size else self._next

    def take(self, i0: int, i1: int) -> tuple[np.ndarray, np.ndarray]:
        """(idle, own) of intervals [i0, i1); i0 is where the last take ended (0 first)."""
        if i0 != self._base:
            raise ValueError(f"SharedIdle.take({i0}, {i1}): takes must follow one another "
                             f"(next: {self._base})")
        # The stretch taken and the batch that may sweep past it: one buffer, not one
        # regrown (and copied) batch after batch.
        self._room(min(i1 - i0 + self._chunk, self._n - i0))
        while self._done() < i1:
            self._sweep()
        idle, own = self._idle[:i1 - i0], self._own[:i1 - i0]
        # What was taken goes: the rest moves to a buffer of its own (no reference to the
        # taken part, whose memory goes with it).
        self._idle, self._own = self._idle[i1 - i0:].copy(), self._own[i1 - i0:].copy()
        self._base = i1
        return idle, own


def _shared_window(ps: np.ndarray, pe: np.ndarray, w: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(idle, own) of the pieces [ps, pe) of one window, *ps* in order: the running
    sums of the shares (level) and of each step's rates over the window's 2m steps,
    worked in place where numpy allows (fewer arrays of megabytes made)."""
    m = ps.size
    times = np.concatenate([ps, pe])
    order = np.argsort(times, kind="stable")
    dt = np.diff(times[order])
    del times
    level = np.concatenate([w, -w])[order]
    np.cumsum(level, out=level)
    # Intervals running in each step: starts so far less ends so far, exact integers, at
    # least 0 (an end sorts after its start); a step with none has no owner (own_rate 0),
    # however much level rounding leaves.
    is_end = order >= m
    ends_so_far = is_end[:-1].astype(np.int64)  # summed as int64: numpy's cumsum of
    np.cumsum(ends_so_far, out=ends_so_far)     # bools casts step by step, 20x slower
    active = np.arange(1, 2 * m, dtype=np.int64)
    active -= ends_so_far
    active -= ends_so_far
    del ends_so_far
    # 1 / active, looked up (a few distinct counts; the same division as each step's).
    inverse = np.zeros(int(active.max()) + 1)
    np.divide(1.0, np.arange(1, inverse.size), out=inverse[1:])
    own_rate = inverse.take(active)
    del active
    idle_rate = np.clip(level[:-1], 0.0, 1.0, out=level[:-1])
    np.subtract(1.0, idle_rate, out=idle_rate)
    idle_rate *= own_rate
    # Where each interval's start and end fall among the steps: the starts (in order, a
    # stable sort keeps them so) in turn, the ends wherever they sorted.
    first = np.flatnonzero(~is_end)
    last = np.empty(m, dtype=np.intp)
    at_end = np.flatnonzero(is_end)
    last[order[at_end] - m] = at_end
    del order, is_end, at_end

    def per_interval(rate: np.ndarray) -> np.ndarray:
        integral = np.empty(rate.size + 1)
        integral[0] = 0.0
        rate *= dt
        np.cumsum(rate, out=integral[1:])
        return integral[last] - integral[first]

    return per_interval(idle_rate), per_interval(own_rate)


def pieces(starts, ends, u: Intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of intervals [starts[i], ends[i]) (sorted by start, disjoint) that lie
    inside union u: (piece starts, piece ends, index i of the interval each came from),
    in time order. Linear in the sizes of both plus the pieces.

        intervals:  [=========)      [====)
        u:             [==)  [=====)    [=====)
        pieces:        [==)  [==)       [=)
    """
    ps, pe, i, _ = pieces_in(starts, ends, u)
    return ps, pe, i


def pieces_in(starts, ends, u: Intervals
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """pieces, with the index in u of the piece of u each lies in."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    us, ue = u
    if s.size == 0 or us.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    first = np.searchsorted(ue, s, side="right")      # first piece of u ending after s
    last = np.searchsorted(us, e, side="left")        # pieces of u starting before e
    counts = np.maximum(last - first, 0)
    n_pieces = int(counts.sum())
    if n_pieces != np.count_nonzero(counts):              # some in several pieces of u
        idx = np.repeat(np.arange(s.size), counts)
        # piece j of interval i: first[i] + (j - the position of i's first piece)
        k = np.arange(n_pieces) + np.repeat(first - (np.cumsum(counts) - counts), counts)
        s, e = s[idx], e[idx]
    elif n_pieces == s.size:                              # each in one
        idx, k = np.arange(s.size), first
    else:                                                 # each in one or none
        idx = np.flatnonzero(counts)
        k = first[idx]
        s, e = s[idx], e[idx]
    ps, pe = np.maximum(s, us[k]), np.minimum(e, ue[k])
    keep = pe > ps
    if bool(keep.all()):                              # intervals of no length leave none
        return ps, pe, idx, k
    return ps[keep], pe[keep], idx[keep], k[keep]


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two unions (a union)."""
    ps, pe, _ = pieces(a[0], a[1], b)
    return ps, pe


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a minus b, for unions a and b (a union)."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    lo = int(min(a[0][0], b[0][0]))
    hi = int(max(a[1][-1], b[1][-1]))
    return intersect(a, gaps(b, lo, hi))


def merge(a: Intervals, b: Intervals) -> Intervals:
    """Union of two interval sets."""
    return union(np.r_[a[0], b[0]], np.r_[a[1], b[1]])


def total_between(u: Intervals, lo, hi) -> np.ndarray:
    """For windows [lo[i], hi[i]): how much of union u lies inside each."""
    return _covered_between(u, lo, hi)
