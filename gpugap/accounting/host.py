"""What a host thread was doing in CUDA: each API call's category, and each thread's calls
as one labelled partition of its time (nested calls resolved by priority).

Categories, highest priority first (a driver call nested in a runtime call takes the
nested call's category when that ranks higher: cuLibraryLoadData inside
cudaLaunchKernel is module loading, not launching):

- ``module-load``: cuLibraryLoad*, cuModuleLoad*, cuLink* (lazy loading, JIT linking),
  and a traced library creating its handle (nsys's cuBLAS/cuDNN ranges named *Create*
  or *Init*);
- ``synchronization``: *Synchronize, and copies that wait for the GPU: synchronous
  device-to-host/device-to-device copies, asynchronous ones into pageable memory
  (what ``.cpu()`` does; ``.item()`` is a pinned copy followed by cudaStreamSynchronize);
- ``allocation``: cudaMalloc/cudaFree and their driver, host and virtual-memory kin;
- ``blocking-copy``: host-to-device copies that hold the thread (pageable source, or a
  synchronous API);
- ``launch``: every other CUDA call (launches, async copies from pinned memory, events).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.api_names import ALLOCATE, ASYNC, MEMCPY, MODULE_LOAD, SYNCHRONIZE
from gpugap.memory import isin
from gpugap.report.loader import match_rows
from gpugap.report.table import Labels, Table
from gpugap.report.trace import Trace

if TYPE_CHECKING:
    from gpugap.program import Program

CATEGORIES = ("module-load", "synchronization", "allocation", "blocking-copy", "launch")
MODULE, SYNC, ALLOC, BLOCKING, LAUNCH = range(len(CATEGORIES))
OUTSIDE = len(CATEGORIES)            # not in any CUDA call
WAIT = OUTSIDE + 1                   # in an OS wait on other threads (ThreadWaits)
COMPILE = WAIT + 1                   # compiling (the program model's compile spans)
BLOCKING_CATEGORIES = (MODULE, SYNC, ALLOC, BLOCKING)


def matching(names: Labels | np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    """Boolean per row of a column of names: does its name match (``search``)? Labels
    (API and kernel names) are tested once per distinct name, so millions of rows cost
    little; plain strings (NVTX names) row by row, each as ``str`` (None: 'None')."""
    if isinstance(names, Labels):
        return names.matching(pattern)
    return np.array([bool(pattern.search(str(n))) for n in names.tolist()], dtype=bool)


def _name_category(name: str) -> int:
    if MODULE_LOAD.search(name):
        return MODULE
    if SYNCHRONIZE.search(name):
        return SYNC
    if ALLOCATE.search(name):
        return ALLOC
    if MEMCPY.search(name) and not ASYNC.search(name):
        return SYNC           # refined per copy below when the copy is known
    return LAUNCH


def copy_categories(kind: Labels, src: Labels, dst: Labels, is_async: np.ndarray
                    ) -> np.ndarray:
    """The category of copy calls from what they copied (labels as the loader gives them)."""
    h2d = kind.isin(["Host-to-Device"])
    d2h = kind.isin(["Device-to-Host"])
    out = np.full(len(kind), LAUNCH, dtype=np.int8)
    out[h2d & (src.isin(["Pageable"]) | ~is_async)] = BLOCKING
    out[d2h & (dst.isin(["Pageable"]) | ~is_async)] = SYNC
    out[~h2d & ~d2h & ~is_async] = SYNC
    return out


def api_categories(trace: Trace) -> np.ndarray:
    """The category code of every row of trace.api (computed each call: the accounting's
    index keeps it, gpugap.accounting.index.AccountingIndex.api_categories). A copy
    takes the category of what it copied: the loader's join of copies to their calls
    (Trace.memcpy_calls) says which call made each."""
    api = trace.table("api")
    if not len(api):
        return np.zeros(0, dtype=np.int8)
    names = api.labels("name")
    # code -1 (no name) reads the trailing LAUNCH
    lut = np.array([_name_category(c) for c in names.categories.tolist()] + [LAUNCH],
                   dtype=np.int8)
    out = lut[names.codes]
    m = trace.table("memcpys")
    if len(m):
        rows = trace.memcpy_calls
        if rows is None or rows.size != len(m):   # not from the loader: join them here
            rows = match_rows(m["pid"], m["corr"], api["pid"], api["corr"])
        hit = np.flatnonzero(rows >= 0)
        if hit.size:
            copies = m.rows(hit)
            cats = copy_categories(copies.labels("kind"), copies.labels("src_kind"),
                                   copies.labels("dst_kind"),
                                   copies.labels("api_name").matching(ASYNC))
            out[rows[hit]] = cats
    return out


def exclusive(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, order
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals labelled by code -> a partition of their union: each instant goes to the
    first code in *order* that covers it. Returns (starts, ends, codes) of the disjoint
    labelled pieces in time order.

    Most intervals overlap no other (a thread's calls one after another, serial
    kernels): each is its own piece. Only the few that overlap others are ranked, code
    by code (_ranked); then neighbours of one code that touch are joined, as the union
    of each code joins them."""
    order = list(order)
    starts, ends, codes = np.asarray(starts), np.asarray(ends), np.asarray(codes)
    keep = ends > starts
    # (Codes ranked nowhere are dropped: looked for only when some may occur.)
    lo, hi = (int(codes.min()), int(codes.max())) if codes.size else (0, -1)
    unranked = set(range(lo, hi + 1)) - set(order) if hi - lo <= 64 else None
    if unranked is None or any(bool((codes == u).any()) for u in unranked):
        keep &= np.isin(codes, np.asarray(order, dtype=codes.dtype))
    if not bool(keep.all()):
        starts, ends, codes = starts[keep], ends[keep], codes[keep]
    s = starts.astype(np.int64, copy=False)
    e = ends.astype(np.int64, copy=False)
    c = codes.astype(np.int8, copy=False)
    if not s.size:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0, dtype=np.int8)
    if not tl.is_sorted(s):
        o = np.argsort(s, kind="stable")
        s, e, c = s[o], e[o], c[o]
    reach = np.maximum.accumulate(e)
    alone = np.ones(s.size, dtype=bool)
    alone[1:] = s[1:] >= reach[:-1]                  # nothing before reaches into it
    alone[:-1] &= e[:-1] <= s[1:]                    # it reaches into nothing after
    del reach
    if not alone.all():
        rs, re_, rc = _ranked(s[~alone], e[~alone], c[~alone], order)
        s = np.r_[s[alone], rs]
        e = np.r_[e[alone], re_]
        c = np.r_[c[alone], rc]
        o = np.argsort(s, kind="stable")
        s, e, c = s[o], e[o], c[o]
    new = np.r_[True, (c[1:] != c[:-1]) | (s[1:] != e[:-1])]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, s.size - 1]
    return s[first], e[last], c[first]


def _ranked(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, order: list
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """exclusive's pieces of overlapping intervals: code by code, in *order*, each code's
    union less what the codes before it covered."""
    covered = tl.EMPTY
    parts_s, parts_e, parts_c = [], [], []
    present = [code for code in order if (codes == code).any()]
    for i, code in enumerate(present):
        sel = codes == code if len(present) > 1 else slice(None)
        u = tl.union(starts[sel], ends[sel])
        mine = tl.subtract(u, covered)
        if i + 1 < len(present):                      # the codes after it need it
            covered = tl.merge(covered, u) if covered[0].size else u
        parts_s.append(mine[0])
        parts_e.append(mine[1])
        parts_c.append(np.full(mine[0].size, code, dtype=np.int8))
    return np.concatenate(parts_s), np.concatenate(parts_e), np.concatenate(parts_c)


LIBRARY_INIT = re.compile(r"Create|Init", re.IGNORECASE)


def library_inits(trace: Trace, gtid: int) -> tuple[np.ndarray, np.ndarray]:
    """A thread's library handle creations (nsys's own library ranges, e.g. cuBLAS's
    cublasCreate_v2): (starts, ends)."""
    nv = trace.table("nvtx")
    if nv.empty:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    mine = nv.rows(nv["library"].astype(bool) & (nv["gtid"] == gtid))
    init = matching(mine["name"], LIBRARY_INIT)
    return mine["start"][init], mine["end"][init]


MIN_IDLE_WAIT_NS = 1_000_000
_NEVER = 2**62                  # after any time of a report


class ThreadWaits:
    """When launching threads waited on other threads while no thread of their process
    that launches GPU work had anything to launch: the OS runtime calls in which a
    thread blocks for another (gpugap.program.threads.WAIT_CALLS: a queue's lock or
    condition variable, a semaphore, poll, sleep), intersected over the process's
    *feeders* (pid -> the gtids of its threads that launch GPU work, helpers included).
    A thread that waits while another of them works (the autograd thread waiting for the
    forward pass, XLA's launching threads waiting for the Python thread to dispatch the
    next step) is fed by that one's work: not waiting for work.
    *calls*: those waits, as the program model read them (None: no OS runtime trace)."""

    def __init__(self, calls: Table | None, feeders: dict[int, list[int]],
                 last_call: dict[int, int] | None = None) -> None:
        self.calls = calls            # the launchers' OS waits (program.threads.wait_calls)
        self.feeders = feeders
        # When each feeder's last CUDA call ended: after it, it feeds nobody (a warm-up or
        # loading thread that has ended does not keep the others from waiting).
        self.last_call = last_call or {}
        self._idle: dict[int, tl.Intervals] = {}

    @classmethod
    def of(cls, program: Program, api: ApiCalls | None = None) -> ThreadWaits:
        """The waits of *program*'s threads that launched GPU work, each counted up to
        its last CUDA call in *api* (None: throughout)."""
        feeders = {p.pid: [t.gtid for t in p.threads] for p in program.processes}
        gtids = np.array([g for threads in feeders.values() for g in threads],
                         dtype=np.int64)
        return cls(program.waits, feeders, None if api is None else api.last_calls(gtids))

    def idle(self, gtid: int) -> tl.Intervals:
        """The times *gtid* waited while every feeder of its process waited too (or had
        made its last CUDA call)."""
        if gtid not in self._idle:
            self._read(int(gtid) >> 24 & 0xFFFFFF, int(gtid))
        return self._idle.get(gtid, tl.EMPTY)

    def _read(self, pid: int, gtid: int) -> None:
        threads = self.feeders.get(pid) or [gtid]
        if gtid not in threads:
            threads = [*threads, gtid]
        if self.calls is None:
            self._idle.update({g: tl.EMPTY for g in threads})
            return
        waits: dict[int, tl.Intervals] = {g: tl.EMPTY for g in threads}
        gtid, start, end = self.calls["gtid"], self.calls["start"], self.calls["end"]
        rows = np.flatnonzero(isin(gtid, threads))
        for g in threads:
            part = rows[gtid[rows] == g]
            if part.size:
                waits[g] = tl.union(start[part].astype(np.int64), end[part].astype(np.int64))
        # Another feeder keeps *g* from waiting for work until its last CUDA call: after
        # it, it feeds nobody (a warm-up or loading thread that has ended).
        idle_other = {g: tl.merge(waits[g], (np.array([self.last_call[g]]),
                                             np.array([_NEVER])))
                      if g in self.last_call else waits[g] for g in threads}
        for g in threads:
            together = waits[g]
            for other in threads:
                if other != g:
                    together = tl.intersect(together, idle_other[other])
            # Short waits of all launchers at once are hand-offs between them (the main
            # thread waking the autograd thread), not a lack of work.
            long = (together[1] - together[0]) >= MIN_IDLE_WAIT_NS
            self._idle[g] = (together[0][long], together[1][long])


# A call that overlaps a time started at most this long before it, unless it is one of
# the few longer calls (ApiCalls.long): a window's calls are a search away.
LOOKBACK_NS = 10_000_000


class ApiCalls:
    """The CUDA API calls (rows of trace.api) in start order, as arrays: the one structure
    of a thread's calls, for the calls of one thread in a window of time (the idle
    attribution's partition of a gap, the rules' evidence). Views of the frame's columns
    when the frame is in start order, as the loader leaves it (no copies); ``order``:
    the frame's row of each call otherwise (None: the same). Built once per trace by
    the accounting's index (gpugap.accounting.index.AccountingIndex.calls)."""

    def __init__(self, api: Table) -> None:
        start = api["start"].astype(np.int64, copy=False)
        end = api["end"].astype(np.int64, copy=False)
        gtid = api["gtid"]
        self.order = None if tl.is_sorted(start) else np.argsort(start, kind="stable")
        if self.order is not None:
            start, end, gtid = start[self.order], end[self.order], gtid[self.order]
        self.start, self.end, self.gtid = start, end, gtid
        # The calls longer than LOOKBACK_NS, listed apart (found in batches: no array of
        # every duration).
        step = 1 << 22
        self.long = np.concatenate(
            [i + np.flatnonzero(end[i:i + step] - start[i:i + step] > LOOKBACK_NS)
             for i in range(0, start.size, step)] or [np.zeros(0, np.int64)])
        self._names = api["name"]      # Labels (an object array only when there are none)

    def last_calls(self, gtids: np.ndarray) -> dict[int, int]:
        """For threads *gtids*: when its last call ended, of those that made any: the
        latest end of its calls in the last stretch of the report it called in, walking
        back a doubling stretch at a time (the threads that call until the end are all in
        its last stretch)."""
        left = {int(g) for g in np.asarray(gtids).tolist()}
        out: dict[int, int] = {}
        hi, size = self.gtid.size, 1 << 16
        while left and hi > 0:
            lo = max(0, hi - size)
            part = self.gtid[lo:hi]
            at = np.flatnonzero(isin(part, list(left)))
            if at.size:
                who, code = np.unique(part[at], return_inverse=True)
                last = np.full(who.size, np.iinfo(np.int64).min, dtype=np.int64)
                np.maximum.at(last, code, self.end[lo + at])
                for g, t in zip(who.tolist(), last.tolist(), strict=True):
                    out[int(g)] = int(t)
                    left.discard(int(g))
            hi, size = lo, size * 2
        return out

    def rows(self, i: np.ndarray) -> np.ndarray:
        """The frame's rows of the calls at positions *i* (in start order)."""
        return i if self.order is None else self.order[i]

    def overlapping(self, gtid: int, lo: int, hi: int) -> np.ndarray:
        """Positions (in start order) of *gtid*'s calls that overlap [lo, hi): end after
        lo, start before hi (the longer calls first)."""
        a = np.searchsorted(self.start, lo - LOOKBACK_NS, side="left")
        b = np.searchsorted(self.start, hi, side="left")
        rows = a + np.flatnonzero(self.gtid[a:b] == gtid)
        longer = self.long[(self.start[self.long] < lo - LOOKBACK_NS)
                           & (self.gtid[self.long] == gtid)]
        rows = np.r_[longer, rows]
        return rows[self.end[rows] > lo]

    def starting(self, gtid: int, lo: int, hi: int) -> np.ndarray:
        """Positions (in start order) of *gtid*'s calls that start in [lo, hi]."""
        a = int(np.searchsorted(self.start, lo, side="left"))
        b = int(np.searchsorted(self.start, hi, side="right"))
        return a + np.flatnonzero(self.gtid[a:b] == gtid)

    def names(self, i: np.ndarray) -> list[str]:
        """The names of the calls at positions *i*."""
        if not len(i):
            return []
        return self._names.take(self.rows(i)).strings().tolist()

    def partition(self, gtid: int, lo: int, hi: int, categories: np.ndarray,
                  inits: tl.Intervals, waits: tl.Intervals,
                  compiling: tl.Intervals = tl.EMPTY):
        """The thread's calls that can overlap [lo, hi) (labelled by *categories*: of
        every row of the frame, api_categories), its library handle creations (*inits*:
        library_inits) and waits (*waits*: ThreadWaits.idle) there, and the times it
        compiled (*compiling*, which override all else), as an exclusive labelled
        partition (exclusive)."""
        rows = self.overlapping(gtid, lo, hi)
        init_s, init_e = inits
        keep = (init_e > lo) & (init_s < hi)
        wait_s, wait_e = tl.clip(waits, lo, hi)
        comp_s, comp_e = compiling
        start = np.r_[self.start[rows], init_s[keep], wait_s, comp_s]
        end = np.maximum(np.r_[self.end[rows], init_e[keep], wait_e, comp_e], start)
        cats = np.r_[categories[self.rows(rows)],
                     np.full(int(keep.sum()), MODULE, dtype=np.int8),
                     np.full(wait_s.size, WAIT, dtype=np.int8),
                     np.full(comp_s.size, COMPILE, dtype=np.int8)]
        return exclusive(start, end, cats, [COMPILE, *range(len(CATEGORIES)), WAIT])
