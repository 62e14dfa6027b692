"""One accounting of a device's time: every nanosecond of its window in exactly one bucket.

Busy time goes to the bucket of the work that ran (gpugap.accounting.buckets says which
wins where kinds overlap). Idle time is explained gap by gap, by the thread that launched
the operation that ended the gap (the trailing gap: the device's main launching thread):

    gap:      [.................................................)
    next op launched:                 [launch call)       queued  [op ...
    thread:   [cudaStreamSync)  python  [launch call)  python
    buckets:  synchronization | after the sync ...  |  ...      | queued-wait

1. queued-wait: the part of the gap after the next operation's launch call returned, when
   it is at least ``queued_min_us``: the work was queued but something that is not GPU
   work held it.
2. unknown: the next operation has no launch call in the report.
3. The rest follows the thread (but 4 comes first): time inside a module load, a
   synchronisation, an allocation or a blocking copy goes to that bucket (nested calls:
   the highest ranking, see gpugap.accounting.host).
4. Compilation: when the next operation is a kernel that a JIT just built (Triton's
   ``triton_*`` kernels, which torch.compile's Inductor generates), everything the
   thread did in the gap up to its last module load (compiling outside CUDA, often
   waiting for compile worker processes, then loading the new kernels) is compilation.
   A gap whose last module load comes before any such kernel is plain module loading.
5. Time outside CUDA and inside other calls (launches):
   - module-load, between the first and the last module load of the gap: a library
     loading its kernels does host work between the loads (cuBLAS initialising);
   - input, when the next operation uploads a batch inside the iterations: a
     host-to-device copy of at least ``input_min_bytes`` that is the first of its group
     (the host was loading data);
   - else, when the thread was blocked (module load, synchronisation, allocation,
     blocking copy) at the moment the gap began, the bucket of the latest blocking call
     before it in the gap, for as long as the host was held while the GPU still had
     work (its lost lead: without the block the host would have been that far ahead,
     and what follows is the aftermath); beyond that lead, as below;
   - else launch-bound when the whole gap is shorter than ``min_gap_us`` (launch
     overhead between back-to-back launches), host-work when longer.

The work goes in time slices of a bounded number of gaps, cut at gap starts (no GPU
operation spans one), each with the CUDA calls of its own time: memory stays bounded
however long the report. The partition is kept bucket by bucket (``by_bucket``), in
time order within each.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpugap import intervals as tl
from gpugap.accounting import host
from gpugap.accounting.buckets import BUSY_IDS, CODE, IDS
from gpugap.accounting.index import AccountingIndex
from gpugap.accounting.phases import Phases
from gpugap.accounting.work import DeviceWork
from gpugap.report.trace import Trace


@dataclass(frozen=True)
class Settings:
    min_gap_us: float = 100.0        # shorter gaps of launches + Python: launch-bound
    # In Python frameworks, longer gaps too when within 10x the thread's launch pace
    # (host_work_gap_ns); off where the user set min_gap_us: theirs decides alone.
    adaptive_gap: bool = True
    queued_min_us: float = 30.0      # queued this long while idle: a dependency held it
    input_min_bytes: int = 65536     # a host-to-device copy this big uploads a batch
    warmup_factor: float = 2.0       # iterations this much slower than the median: warm-up


CHUNK_GAPS = 1 << 15      # gaps handled at a time (a module setting: tests make it small)
HOST_BUCKET = np.array([CODE["module-load"], CODE["synchronization"], CODE["allocation"],
                        CODE["blocking-copy"]], dtype=np.int8)
_H2D = (CODE["copy-h2d-pageable"], CODE["copy-h2d-pinned"])
_BUSY = [CODE[b] for b in BUSY_IDS]


class Gaps:
    """The idle gaps of a device, with the operation that ended each: ``start``, ``end``
    and ``next_op`` (its position in DeviceWork, -1 for none), indexed like arrays.

    While the accounting builds the partition they are arrays of starts and next ops (a
    gap ends where its next op starts, or at the window's end *hi*); once it is built
    (``read_back``) they are read back from it, a block at a time: a gap is a run of
    idle pieces, and block k of the partition holds gaps k * CHUNK_GAPS on. So a device
    account holds no array per gap (a device of ten million kernels has as many)."""

    def __init__(self, start: np.ndarray, next_op: np.ndarray, main_gtid: int,
                 work: DeviceWork, hi: int) -> None:
        self._arrays: tuple[np.ndarray, np.ndarray] | None = (start, next_op)
        self._count = start.size
        self.main_gtid = main_gtid       # the thread the trailing gap follows
        self._work, self._hi = work, hi
        self._account: DeviceAccount | None = None
        self._last: tuple[int, tl.Intervals] | None = None     # the block read last

    def __len__(self) -> int:
        return self._count

    @property
    def start(self) -> _GapColumn:
        return _GapColumn(self, 0)

    @property
    def end(self) -> _GapColumn:
        return _GapColumn(self, 1)

    @property
    def next_op(self) -> _GapColumn:
        """int32 position in DeviceWork (int64 for 2**31 ops or more), -1: none."""
        return _GapColumn(self, 2)

    def read_back(self, account: DeviceAccount) -> None:
        """From now on, read the gaps from *account*'s partition (the arrays go)."""
        self._account = account
        self._arrays = None

    def next_after(self, ends: np.ndarray, work: DeviceWork) -> np.ndarray:
        """next_op of gaps that end at *ends*: the first op to start at or after."""
        found = work.searchsorted(ends, side="left")
        return np.where(found < len(work), found, -1).astype(
            np.int32 if len(work) < 2**31 - 1 else np.int64)

    def _read(self, column: int, at) -> np.ndarray:
        if self._arrays is not None:
            if column != 1:
                return self._arrays[column // 2][at]
            nxt = self._arrays[1][at]
            following = np.atleast_1d(nxt)
            ends = np.full(following.size, self._hi, dtype=np.int64)
            known = following >= 0
            ends[known] = np.minimum(self._work.take(following[known]).start, self._hi)
            return ends.reshape(np.shape(nxt)) if np.ndim(nxt) else ends[0]
        index = np.arange(self._count)[at] if isinstance(at, slice) else np.asarray(at)
        flat = index.ravel().astype(np.int64)
        out = np.empty(flat.size, dtype=np.int64)
        block = flat // CHUNK_GAPS
        for k in np.unique(block).tolist():
            sel = block == k
            runs = self._block(k)[1 if column == 2 else column]
            out[sel] = runs[flat[sel] - k * CHUNK_GAPS]
        if column == 2:
            out = self.next_after(out, self._work)
        return out.reshape(index.shape) if index.ndim else out.reshape(())[()]

    def _block(self, k: int) -> tl.Intervals:
        """The gaps of block k (starts, ends), read from its pieces."""
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        assert self._account is not None
        runs = gap_runs(*self._account.decode(k, k + 1))
        self._last = (k, runs)
        return runs

    def thread(self, work: DeviceWork, g) -> np.ndarray:
        """The thread held responsible for gaps *g* (-1: unknown)."""
        nxt = self.next_op[np.asarray(g)]
        found = work.gather("gtid", np.maximum(nxt, 0))
        found = np.where(np.isnan(found), -1, np.nan_to_num(found)).astype(np.int64)
        return np.where(nxt >= 0, found, self.main_gtid)


class _GapColumn(np.lib.mixins.NDArrayOperatorsMixin):
    """One column of Gaps: indexed like an array, read where it is needed."""

    def __init__(self, gaps: Gaps, column: int) -> None:
        self._gaps, self._column = gaps, column

    def __len__(self) -> int:
        return len(self._gaps)

    def __getitem__(self, at):
        return self._gaps._read(self._column, at)

    @property
    def size(self) -> int:
        return len(self._gaps)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self._gaps._read(self._column, slice(None))
        return whole if dtype is None else whole.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(np.asarray(x) if isinstance(x, _GapColumn) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)


_IDLE = np.array([b not in BUSY_IDS for b in IDS])


def gap_runs(s: np.ndarray, e: np.ndarray, c: np.ndarray) -> tl.Intervals:
    """The gaps among pieces (in time order, one after another): runs of idle pieces
    (busy time always lies between two gaps)."""
    idle = _IDLE[c]
    before = np.r_[False, idle[:-1]]
    after = np.r_[idle[1:], False]
    return s[idle & ~before], e[idle & ~after]


@dataclass
class DeviceAccount:
    """The partition of a device's window into buckets, compact: pieces in time order as
    (length, bucket code), 5 bytes each, in blocks (the accounting's time slices) whose
    start times and first pieces are kept, so that any time range is decoded from its
    blocks alone (``pieces``, ``blocks``)."""

    device: int
    window: tuple[int, int]
    phases: Phases
    work: DeviceWork
    length: np.ndarray        # uint32 ns, pieces in time order (long ones split)
    code: np.ndarray          # int8 bucket code (index into buckets.IDS) of each
    block_start: np.ndarray   # int64: where block k begins (one more: the window's end)
    block_first: np.ndarray   # int64: its first piece (one more: the number of pieces)
    gaps: Gaps
    settings: Settings = field(default_factory=Settings)
    # Gaps at least this long are host work, shorter ones launch overhead (host_work_gap_ns).
    host_work_gap_ns: float = 100e3
    _steady_totals: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def decode(self, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, codes) of the pieces of blocks [k0, k1), in time order."""
        i0, i1 = int(self.block_first[k0]), int(self.block_first[k1])
        lengths = self.length[i0:i1].astype(np.int64)
        end = int(self.block_start[k0]) + np.cumsum(lengths)
        return end - lengths, end, self.code[i0:i1]

    def blocks(self, lo: int | None = None, hi: int | None = None):
        """(block start, block end, starts, ends, codes) of the blocks overlapping
        [lo, hi) (default: all), one at a time."""
        for _, *block in self._blocks(lo, hi):
            yield tuple(block)

    def _blocks(self, lo: int | None = None, hi: int | None = None):
        """blocks, each with its number first."""
        n = self.block_start.size - 1
        k0 = 0 if lo is None else max(int(np.searchsorted(self.block_start, lo, "right")) - 1,
                                      0)
        k1 = n if hi is None else min(int(np.searchsorted(self.block_start, hi, "left")), n)
        for k in range(k0, k1):
            yield (k, int(self.block_start[k]), int(self.block_start[k + 1]),
                   *self.decode(k, k + 1))

    def pieces(self, lo: int, hi: int, buckets=None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces inside [lo, hi) (clipped), of *buckets* only if given."""
        codes = None if buckets is None else [IDS.index(b) for b in buckets if b in IDS]
        parts = []
        for _, _, s, e, c in self.blocks(lo, hi):
            keep = (e > lo) & (s < hi)
            if codes is not None:
                keep &= np.isin(c, codes)
            parts.append((np.maximum(s[keep], lo), np.minimum(e[keep], hi), c[keep]))
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0, dtype=np.int8)
        return tuple(np.concatenate(x) for x in zip(*parts, strict=True))

    @property
    def by_bucket(self) -> dict[str, tl.Intervals]:
        """Each bucket's pieces over the whole window (sorted, disjoint): decodes it all,
        for small reports and tests; large ones go through ``blocks``."""
        s, e, c = self.pieces(*self.window)
        return {b: (s[c == i], e[c == i]) for i, b in enumerate(IDS)}

    def totals(self, lo, hi) -> pd.DataFrame:
        """Bucket time (ns) inside each window [lo[i], hi[i]): one row per window, one
        column per bucket (rows add up to the window's overlap with the device's)."""
        lo = np.atleast_1d(np.asarray(lo, dtype=np.int64))
        hi = np.atleast_1d(np.asarray(hi, dtype=np.int64))
        out = np.zeros((lo.size, len(IDS)), dtype=np.int64)
        if lo.size:
            for blo, bhi, s, e, c in self.blocks(int(lo.min()), int(hi.max())):
                near = np.flatnonzero((lo < bhi) & (hi > blo))
                if not near.size:
                    continue
                for i in np.unique(c).tolist():
                    mine = c == i
                    out[near, i] += _between(s[mine], e[mine], lo[near], hi[near])
        return pd.DataFrame(out, columns=list(IDS))

    def steady_iteration_totals(self) -> pd.DataFrame:
        """totals() of each steady iteration (computed once: summaries and rules ask)."""
        if self._steady_totals is None:
            lo, hi = self.phases.iteration_windows(self.phases.steady_iterations)
            self._steady_totals = self.totals(lo, hi)
        return self._steady_totals

    def totals_in(self, windows: tl.Intervals | None = None) -> dict[str, int]:
        """Bucket time inside a union of windows (default: the whole window)."""
        if windows is None:
            windows = (np.array([self.window[0]]), np.array([self.window[1]]))
        t = self.totals(*windows).sum(axis=0)
        return {b: int(v) for b, v in t.items()}

    def per_gap(self, bucket: str, span: tl.Intervals) -> tuple[np.ndarray, np.ndarray]:
        """(the gaps holding time of *bucket* inside *span*, that time in each)."""
        held, ns, _ = self.held_gaps(bucket, span)
        return held, ns

    def held_gaps(self, bucket: str, span: tl.Intervals
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """per_gap, with the end of each gap (read in the same pass)."""
        gaps, ns, ends = [], [], []
        code = IDS.index(bucket)
        z = np.zeros(0, dtype=np.int64)
        if span[0].size == 0:
            return z, z, z
        for k, blo, bhi, s, e, c in self._blocks(int(span[0].min()), int(span[1].max())):
            mine = c == code
            ps, pe = tl.intersect((s[mine], e[mine]), tl.clip(span, blo, bhi))
            if ps.size:
                gs, ge = gap_runs(s, e, c)
                local = np.searchsorted(gs, ps, side="right") - 1
                inside = (local >= 0) & (ps < ge[np.maximum(local, 0)]) if gs.size \
                    else np.zeros(ps.size, dtype=bool)
                gaps.append(np.where(inside, k * CHUNK_GAPS + local, -1))
                ends.append(ge[np.maximum(local, 0)] if gs.size else ps)
                ns.append(pe - ps)
        if not gaps:
            return z, z, z
        held, first, inverse = np.unique(np.concatenate(gaps), return_index=True,
                                         return_inverse=True)
        return (held, np.bincount(inverse, weights=np.concatenate(ns)).astype(np.int64),
                np.concatenate(ends)[first])

    def summary(self) -> dict:
        """Phases, bucket time per phase, and the steady state's figures (share of each
        bucket, per-iteration median and p90), as plain data."""
        ph = self.phases
        out = ph.to_dict()
        out["buckets_ns"] = {phase: {b: v for b, v in self.totals_in(
            (np.array([lo]), np.array([hi]))).items() if v}
            for phase, (lo, hi) in ph.spans.items() if hi > lo}
        lo, hi = ph.spans["steady"]
        if hi <= lo:
            out["steady"] = None
            return out
        totals = self.totals_in((np.array([lo]), np.array([hi])))
        wall = hi - lo
        busy = sum(totals[b] for b in BUSY_IDS)
        steady = {"wall_ns": int(wall), "gpu_busy_pct": round(100.0 * busy / wall, 3),
                  "buckets": {b: {"ns": int(v), "pct": round(100.0 * v / wall, 3)}
                              for b, v in totals.items() if v}}
        its = ph.steady_iterations
        if len(its):
            ilo, ihi = ph.iteration_windows(its)
            table = self.steady_iteration_totals()
            for b, item in steady["buckets"].items():
                item["per_iteration_median_ns"] = int(np.median(table[b]))
                item["per_iteration_p90_ns"] = int(np.percentile(table[b], 90))
            dur = ihi - ilo
            steady["iterations"] = int(its.stop - its.start)
            steady["iteration_median_ns"] = int(np.median(dur))
            steady["iteration_p90_ns"] = int(np.percentile(dur, 90))
        out["steady"] = steady
        return out

    def relabel(self, old: str, new: str, where: tl.Intervals, min_share: float = 0.5
                ) -> int:
        """Pieces of bucket *old* that lie at least *min_share* inside *where* (a union)
        become *new* (both idle buckets: the gaps stay as they are); returns the time
        moved."""
        code_old, code_new = CODE[old], CODE[new]
        moved = 0
        if not where[0].size:
            return 0
        for k, _, _, s, e, c in self._blocks(int(where[0][0]), int(where[1][-1])):
            mine = np.flatnonzero(c == code_old)
            if not mine.size:
                continue
            inside = _covered(where, e[mine]) - _covered(where, s[mine])
            hit = mine[inside >= min_share * (e[mine] - s[mine])]
            if hit.size:
                self.code[int(self.block_first[k]) + hit] = code_new
                moved += int((e[hit] - s[hit]).sum())
        return moved

    def gap_of(self, t) -> np.ndarray:
        """The gap (index) containing each time, -1 where the GPU was busy. A gap lies in
        one block: each time is looked for in the gaps of its block."""
        t = np.asarray(t, dtype=np.int64)
        n = self.block_start.size - 1
        block = np.clip(np.searchsorted(self.block_start, t, side="right") - 1, 0, n - 1)
        out = np.full(t.shape, -1, dtype=np.int64)
        for k in np.unique(block).tolist():
            sel = block == k
            gs, ge = self.gaps._block(k) if self.gaps._arrays is None else (
                self.gaps.start[k * CHUNK_GAPS:(k + 1) * CHUNK_GAPS],
                self.gaps.end[k * CHUNK_GAPS:(k + 1) * CHUNK_GAPS])
            if not gs.size:
                continue
            local = np.searchsorted(gs, t[sel], side="right") - 1
            ok = (local >= 0) & (t[sel] < ge[np.maximum(local, 0)])
            out[sel] = np.where(ok, k * CHUNK_GAPS + local, -1)
        return out


def _covered(where: tl.Intervals, t: np.ndarray) -> np.ndarray:
    """How much of the union *where* lies before each time *t*."""
    ws, we = where
    prefix = np.r_[0, np.cumsum(we - ws)]
    i = np.searchsorted(ws, t, side="right")          # intervals starting at or before t
    last = np.maximum(i - 1, 0)
    partial = np.where(i > 0, np.clip(t - ws[last], 0, (we - ws)[last]), 0)
    return prefix[last] * (i > 0) + partial


def _between(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Time of the sorted disjoint pieces (s, e) inside each window [lo, hi): the pieces
    wholly inside summed (reduceat over their lengths), the cut ones at both ends
    clipped."""
    out = np.zeros(lo.size, dtype=np.int64)
    if s.size == 0 or lo.size == 0:
        return out
    a = np.searchsorted(e, lo, side="right")          # first piece ending after lo
    b = np.searchsorted(s, hi, side="left")           # pieces starting before hi
    some = b > a
    if not some.any():
        return out
    a, b, wlo, whi = a[some], b[some], lo[some], hi[some]
    # Sum of whole lengths over [a, b): prefix sums over the touched range only.
    lengths = e - s
    order = np.argsort(a, kind="stable")
    bounds = np.empty(2 * a.size, dtype=np.int64)
    bounds[0::2], bounds[1::2] = a[order], b[order]
    if (bounds[1:] >= bounds[:-1]).all():            # windows in order, not overlapping
        sums = np.add.reduceat(np.r_[lengths, 0], bounds)[0::2]
        whole = np.empty(a.size, dtype=np.int64)
        whole[order] = sums
    else:                                            # overlapping windows: one cumsum
        prefix = np.r_[0, np.cumsum(lengths)]
        whole = prefix[b] - prefix[a]
    # The first and last piece may stick out of the window.
    cut_lo = np.maximum(wlo - s[a], 0)
    cut_hi = np.maximum(e[b - 1] - whi, 0)
    total = whole - np.minimum(cut_lo, lengths[a]) - np.minimum(cut_hi, lengths[b - 1])
    # A single piece covering the whole window: both ends cut from one piece.
    single = b - a == 1
    total = np.where(single, np.minimum(e[a], whi) - np.maximum(s[a], wlo), total)
    out[some] = np.maximum(total, 0)
    return out


def _scan(work: DeviceWork, window: tuple[int, int]
          ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """One walk over the device's ops, slice by slice: the gaps of their union inside
    the window (starts, ends: as intervals.gaps(intervals.union(...), *window) gives
    them), the main launching thread (the one that launched most ops; ties: the first
    seen) and the positions of the host-to-device copies."""
    lo, hi = window
    reach = lo                   # the latest end so far (the window's start before any)
    starts, ends, h2d = [], [], []
    threads: dict[int, int] = {}
    for o0, o1 in work.slices():
        ops = work.slice(o0, o1)
        gtid = work.threads_of(ops.source, ops.row)
        codes, seen = pd.factorize(gtid[gtid >= 0])     # in order of first appearance
        for g, count in zip(seen.tolist(), np.bincount(codes).tolist(), strict=True):
            threads[g] = threads.get(g, 0) + count
        del gtid, codes
        h2d.append(o0 + np.flatnonzero((ops.bucket == _H2D[0]) | (ops.bucket == _H2D[1])))
        lasting = ops.end > ops.start               # ops of no length leave no mark
        s, e = ops.start[lasting], ops.end[lasting]
        del ops, lasting
        if not s.size:
            continue
        after = np.maximum.accumulate(e)           # the reach after each op
        np.maximum(after, reach, out=after)
        before = np.r_[reach, after[:-1]]
        new = s > before                           # a gap ends at this op's start
        _add_gaps(starts, ends, before[new], s[new], hi)
        reach = int(after[-1])
    if hi > reach:                                 # the trailing gap
        _add_gaps(starts, ends, np.array([reach]), np.array([hi]), hi)
    main = max(threads, key=lambda g: threads[g]) if threads else -1   # first of the most
    return (_joined(starts), _joined(ends), main,
            np.concatenate(h2d) if h2d else np.zeros(0, dtype=np.int64))


def _add_gaps(starts: list[np.ndarray], ends: list[np.ndarray], s: np.ndarray,
              e: np.ndarray, hi: int) -> None:
    """Gaps (in time order, each ending after it starts, none before the window) clipped
    to the window's end *hi* (those left with no length dropped)."""
    if s.size and int(e[-1]) > hi:             # ops beyond the window
        s, e = tl.clip((s, e), int(s[0]), hi)
    starts.append(s)
    ends.append(e)


def _joined(parts: list[np.ndarray], dtype=np.int64) -> np.ndarray:
    """np.concatenate, letting each part go once copied (the peak is one copy)."""
    out = np.empty(sum(p.size for p in parts), dtype=dtype)
    at = 0
    while parts:
        part = parts.pop(0)
        out[at:at + part.size] = part
        at += part.size
    return out


def _batch_uploads(work: DeviceWork, h2d: np.ndarray, min_bytes: int) -> np.ndarray:
    """Positions (increasing) of the host-to-device copies (*h2d*) that upload a batch:
    big enough, and first of their group in their thread's launch order (the op their
    thread launched before them is no host-to-device copy)."""
    if not h2d.size:
        return h2d
    before = work.launched_before(h2d)
    after_h2d = np.zeros(h2d.size, dtype=bool)
    known = before >= 0
    after_h2d[known] = np.isin(work.take(before[known]).bucket, _H2D)
    first = h2d[~after_h2d]
    return first[work.gather("bytes", first) >= min_bytes]


def _with_next_ops(work: DeviceWork, gs: np.ndarray, ge: np.ndarray, main_gtid: int,
                   hi: int) -> Gaps:
    """The gaps, with the op that ended each: the first to start at or after its end."""
    nxt = np.empty(gs.size, dtype=np.int32 if len(work) < 2**31 - 1 else np.int64)
    for g0 in range(0, gs.size, CHUNK_GAPS):
        found = work.searchsorted(ge[g0:g0 + CHUNK_GAPS], side="left")
        nxt[g0:g0 + CHUNK_GAPS] = np.where(found < len(work), found, -1)
    return Gaps(gs, nxt, main_gtid, work, hi)


# Where a Python framework launches (PyTorch, JAX, CuPy), each operation costs tens to
# hundreds of microseconds of interpreter and dispatcher time: there a gap is host work
# only when it lasts an order of magnitude longer than the launching thread's own pace
# (the median time from one launch to the next): a framework spending 150 us of Python
# on an op while its launches come every 50 us is launch-bound. At least min_gap_us
# (a C++ program's launches cost microseconds: there min_gap_us alone decides); any gap
# of HOST_WORK_GAP_CAP_NS is host work whatever the pace.
PACE_FACTOR = 10
HOST_WORK_GAP_CAP_NS = 1_000_000
PACE_SAMPLE = 100_000        # ops the pace is measured on


def host_work_gap_ns(work: DeviceWork, gtid: int, settings: Settings,
                     interpreted: bool = False) -> float:
    """The length from which a gap is host work rather than launch overhead;
    *interpreted*: the program launches from a Python framework."""
    floor = settings.min_gap_us * 1e3
    if not interpreted or not settings.adaptive_gap:
        return floor
    # The pace from a slice of ops in the middle of the device's work (the steady part
    # of most programs): a median needs no more, and one slice costs no walk of all.
    middle = len(work) // 2
    sample = thread_launches(work, gtid, (max(0, middle - PACE_SAMPLE // 2),
                                          min(len(work), middle + PACE_SAMPLE // 2)))
    return float(min(max(floor, PACE_FACTOR * launch_pace(sample)),
                     max(floor, HOST_WORK_GAP_CAP_NS)))


def launch_pace(launched: np.ndarray) -> float:
    """The median time between consecutive launches (sorted times; 0: fewer than 3)."""
    if launched.size < 3:
        return 0.0
    return float(np.median(np.diff(launched)))


def thread_launches(work: DeviceWork, gtid: int,
                    between: tuple[int, int] | None = None) -> np.ndarray:
    """When thread *gtid* launched the device's ops (those at positions *between* only,
    if given), sorted, int64."""
    parts = []
    for o0, o1 in ([between] if between is not None else work.slices()):
        ops = work.order.slice(o0, o1)
        t = work.gather_rows("api_start", ops[2], ops[3])
        g = work.gather_rows("gtid", ops[2], ops[3])
        parts.append(t[(g == gtid) & ~np.isnan(t)])
    return np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, np.int64)


# Launches of the driving thread during a compiler's run that show the program went on.
WENT_ON_LAUNCHES = 2


def compile_windows(work: DeviceWork, driver: int, compiling: tl.Intervals) -> tl.Intervals:
    """How long the device's program was compiling, from what compilers left (a union:
    their spans): from the last launch of the thread that drives the device before each
    span to its first launch after it. Compiling is more than the compiler processes'
    lifetimes: tracing and lowering before them, autotuning (kernels of another thread)
    and loading the result after them, until the program goes on with its work."""
    cs, ce = compiling
    if not cs.size or driver < 0:
        return compiling
    launched = thread_launches(work, driver)
    if not launched.size:
        return compiling
    # A compiler the program did not wait for (its work went on meanwhile: a worker
    # pool's child, a background compile) stopped nothing.
    went_on = (np.searchsorted(launched, ce, side="left")
               - np.searchsorted(launched, cs, side="right")) > WENT_ON_LAUNCHES
    cs, ce = cs[~went_on], ce[~went_on]
    if not cs.size:
        return cs, ce
    before = np.searchsorted(launched, cs, side="right") - 1
    after = np.searchsorted(launched, ce, side="left")
    start = np.where(before >= 0, launched[np.maximum(before, 0)], cs)
    end = np.where(after < launched.size, launched[np.minimum(after, launched.size - 1)], ce)
    return tl.union(np.minimum(start, cs), np.maximum(end, ce))


def _compiled_until(compiling: tl.Intervals, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
    """Per gap [gs, ge): the end of the last compilation (of the union *compiling*) that
    overlaps it, clipped to it; -1 where none does. A gap in which a compiler ran was
    compiling from its start (tracing and lowering come before the compiler runs) to
    there."""
    out = np.full(gs.size, -1, dtype=np.int64)
    cs, ce = compiling
    if not cs.size or not gs.size:
        return out
    k = np.searchsorted(cs, ge, side="left") - 1          # last span starting before ge
    hit = (k >= 0) & (ce[np.maximum(k, 0)] > gs)
    out[hit] = np.minimum(ce[k[hit]], ge[hit])
    return out


_D2H = (CODE["copy-d2h-pageable"], CODE["copy-d2h-pinned"])


def _after_results(work: DeviceWork, gap_start: np.ndarray, min_bytes: int) -> np.ndarray:
    """Per gap: did it begin as a batch's results came back, the op that ended just
    before it a device-to-host copy of at least *min_bytes* (a scalar read back by
    .item() is a synchronisation, not results to work on)?"""
    before = work.searchsorted(gap_start, side="left") - 1
    out = np.zeros(gap_start.size, dtype=bool)
    known = before >= 0
    if not known.any():
        return out
    ops = work.take(before[known])
    d2h = np.isin(ops.bucket, _D2H) & (ops.end >= gap_start[known] - 1_000)
    if d2h.any():
        rows = np.flatnonzero(known)[d2h]
        nbytes = work.gather_rows("bytes", ops.source[d2h], ops.row[d2h])
        out[rows] = np.nan_to_num(nbytes) >= min_bytes
    return out


# Kernels generated by a JIT compiler at run time: Triton's (torch.compile's Inductor
# names them triton_poi_*, triton_per_*, triton_red_*, triton_tem_*...).
JIT_KERNEL = re.compile(r"^(?:void )?triton_")


def jit_ops(trace: Trace, work: DeviceWork, at) -> np.ndarray:
    """Per op at positions *at* of *work*: is it a kernel a JIT compiler generated?"""
    ops = work.take(at)
    return _jit_rows(trace, ops.source, ops.row)


def _jit_rows(trace: Trace, source: np.ndarray, row: np.ndarray) -> np.ndarray:
    out = np.zeros(source.size, dtype=bool)
    kernels = trace.kernels
    sel = source == 0
    if len(kernels) and sel.any():
        names = kernels["name"]
        if isinstance(names.dtype, pd.CategoricalDtype):     # per distinct name
            hit = np.array([bool(JIT_KERNEL.search(str(c))) for c in names.cat.categories]
                           + [False])
            out[sel] = hit[names.cat.codes.to_numpy()[row[sel]]]
        else:
            out[sel] = host.name_mask(names, JIT_KERNEL)[row[sel]]
    return out


class _ThreadTime:
    """What the idle attribution asks of a thread's host time on one device: its calls
    (the accounting's index: host.ApiCalls), library handle creations and waits on other
    threads (*waits*, None: not looked at) as one partition of a window, and the gap
    length from which a gap is host work (*long_gap_ns*)."""

    def __init__(self, index: AccountingIndex, waits: host.ThreadWaits | None = None,
                 long_gap_ns: float = 100e3) -> None:
        self.index = index
        self.waits = waits
        self.long_gap_ns = long_gap_ns      # gaps at least this long are host work

    def of_thread(self, gtid: int, lo: int, hi: int, compiling: tl.Intervals = tl.EMPTY):
        """host.ApiCalls.partition of the thread's time in [lo, hi)."""
        waits = self.waits.idle(gtid) if self.waits is not None else tl.EMPTY
        index = self.index
        return index.calls.partition(gtid, lo, hi, index.api_categories,
                                     index.library_inits(gtid), waits, compiling)


def _idle_pieces(calls: _ThreadTime, gaps: Gaps, idx_range: slice, settings: Settings,
                 api_end: np.ndarray, gtid: np.ndarray, is_input: np.ndarray,
                 is_jit: np.ndarray, is_results: np.ndarray, compile_end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labelled partition of the gaps in *idx_range* (api_end: of each gap's next
    op's launch call, NaN if none; gtid: the thread each follows; is_input: its next op
    uploads a batch; is_jit: its next op is a JIT-compiled kernel; is_results: it began
    when a batch's results had just been read back; compile_end: the end of the
    compilation that ran in it, -1 for none)."""
    gs, ge = gaps.start[idx_range], gaps.end[idx_range]
    has = gaps.next_op[idx_range] >= 0
    # 1. queued: after the next op's launch call returned.
    q0 = np.maximum(np.nan_to_num(api_end, nan=np.inf), gs)
    queued = has & ~np.isnan(api_end) & (ge - q0 >= settings.queued_min_us * 1e3)
    q0 = np.where(queued, q0, ge).astype(np.int64)
    out_s, out_e = [q0[queued]], [ge[queued]]
    out_c = [np.full(int(queued.sum()), CODE["queued-wait"], dtype=np.int8)]
    rem_s, rem_e = gs, q0                             # the rest of each gap
    # 2. unknown: no thread to follow.
    unknown = (gtid < 0) & (rem_e > rem_s)
    out_s.append(rem_s[unknown])
    out_e.append(rem_e[unknown])
    out_c.append(np.full(int(unknown.sum()), CODE["unknown"], dtype=np.int8))
    long_gap = (ge - gs) >= calls.long_gap_ns
    for g in np.unique(gtid[~unknown & (gtid >= 0)]).tolist():
        idx = np.flatnonzero((gtid == g) & (rem_e > rem_s))
        if not idx.size:
            continue
        rs, re_ = rem_s[idx], rem_e[idx]
        compiled = compile_end[idx] > rs
        cs_all, ce_all, cat_all, covered = calls.of_thread(
            g, int(rs[0]), int(re_[-1]),
            (rs[compiled], np.minimum(compile_end[idx][compiled], re_[compiled])))
        # 3. inside CUDA calls: the thread's labelled calls within the gaps...
        cs, ce, ci, cgap = tl.pieces_in(cs_all, ce_all, (rs, re_))
        cgap = idx[cgap]
        # ... and outside them.
        outside = tl.gaps(covered, min(int(rs[0]), int(cs_all[0]) if cs_all.size else 0),
                          max(int(re_[-1]), int(ce_all[-1]) if ce_all.size else 0))
        os_, oe, oi = tl.pieces(rs, re_, outside)
        ps, pe = np.r_[cs, os_], np.r_[ce, oe]
        pc = np.r_[cat_all[ci], np.full(os_.size, host.OUTSIDE, dtype=np.int8)]
        pg = np.r_[cgap, idx[oi]]
        pstart = np.r_[cs_all[ci], os_]              # unclipped start of each piece
        order = np.argsort(ps, kind="stable")
        labelled = _label_host_pieces(ps[order], pe[order], pc[order], pg[order],
                                      pstart[order], rem_s, long_gap, is_input,
                                      is_jit | (compile_end > gs), is_results)
        for part, values in zip((out_s, out_e, out_c), labelled, strict=True):
            part.append(values)
    return np.concatenate(out_s), np.concatenate(out_e), np.concatenate(out_c)


def coalesce(s: np.ndarray, e: np.ndarray, c: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _label_host_pieces(ps, pe, pc, pg, pstart, gap_start, long_gap, is_input, is_jit,
                       is_results):
    """Buckets of one thread's pieces of its gaps (in time order, so grouped by gap; pc:
    host category or OUTSIDE; pg: the gap of each; pstart: where the call a piece belongs
    to began), by the rules of the module doc. Returns (starts, ends, bucket codes); an
    aftermath that covers part of a piece splits it in two. Per-gap figures are
    reductions over each gap's run of pieces (reduceat), spread back with repeat."""
    if ps.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0, dtype=np.int8)
    pos = np.arange(ps.size)
    blocking = pc < host.LAUNCH
    first = np.flatnonzero(np.r_[True, pg[1:] != pg[:-1]])     # each gap's first piece
    sizes = np.diff(np.r_[first, ps.size])
    gap = pg[first]

    def spread(per_gap: np.ndarray) -> np.ndarray:
        return np.repeat(per_gap, sizes)

    # (Each step is skipped where nothing in the slice can take it: no module load, no
    # batch upload, no gap that began blocked; the steady state is mostly launches.)
    # Between the first and the last module load of a gap: loading in progress.
    loads = pc == host.MODULE
    loading = compiling = np.zeros(ps.size, dtype=bool)
    if loads.any():
        first_load = np.minimum.reduceat(np.where(loads, pos, ps.size), first)
        last_load = np.maximum.reduceat(np.where(loads, pos, -1), first)
        loading = ~blocking & (pos > spread(first_load)) & (pos < spread(last_load))
        # Compiling: up to the last module load of a gap before a JIT-compiled kernel,
        # or of a gap in which a compiler ran (loading what it built).
        compiling = spread(is_jit[gap]) & (pos <= spread(last_load))
    compiling = compiling | (pc == host.COMPILE)
    gap_input = spread(is_input[gap]) if is_input[gap].any() else loading & False
    long = spread(long_gap[gap])
    default = np.where(long, CODE["host-work"], CODE["launch-bound"])
    default = np.where(gap_input, CODE["input"], default)
    gap_results = long & spread(is_results[gap]) if is_results[gap].any() else loading & False
    # Working on results just read back (not loading the next batch, and not time the
    # blocked copy lost: the work needs its results, it could not have run earlier).
    default = np.where(gap_results, CODE["results"], default)
    # Waiting on another thread while no launching thread had work: nothing to do.
    waiting = long & (pc == host.WAIT)
    default = np.where(waiting, CODE["thread-wait"], default)
    default = np.where(loading, CODE["module-load"], default)
    bucket = np.where(blocking, HOST_BUCKET[np.minimum(pc, 3)], default)
    bucket = np.where(compiling, CODE["compilation"], bucket).astype(np.int8)
    # Blocked when the gap began, and since when: the lead the host lost.
    held = blocking[first] & (ps[first] == gap_start[gap])
    if not held.any():                                    # no lead lost: no aftermath
        return ps + 0, pe, bucket
    lead = spread(np.where(held, gap_start[gap] - pstart[first], 0))
    last = np.maximum.accumulate(np.where(blocking, pos, -1))   # latest blocking piece
    # (Waiting on another thread is no aftermath: unblocked, the host would have waited
    # all the same.)
    eligible = np.where(~blocking & ~loading & ~compiling & ~gap_input & ~gap_results
                        & (pc != host.WAIT) & (lead > 0), pe - ps, 0)
    before = np.cumsum(eligible) - eligible
    used = before - spread(before[first])                 # eligible time earlier in gap
    aftermath = np.minimum(eligible, np.maximum(lead - used, 0))
    split = ps + aftermath                                # [ps, split): aftermath
    cut = aftermath > 0
    return (np.r_[ps[cut], split], np.r_[split[cut], pe],
            np.r_[HOST_BUCKET[np.minimum(pc[np.maximum(last, 0)], 3)][cut], bucket]
            .astype(np.int8))


def account_device(trace: Trace, work: DeviceWork, phases: Phases,
                   settings: Settings | None = None,
                   waits: host.ThreadWaits | None = None,
                   compiling: tl.Intervals = tl.EMPTY,
                   driver: Callable[[], int] | None = None,
                   interpreted: bool = False,
                   index: AccountingIndex | None = None) -> DeviceAccount:
    """The partition of *work*'s device (module doc); *waits*: the launching threads
    of each process whose waits on other threads tell waiting for work apart
    (host.ThreadWaits; no waits are looked at without them); *compiling*: when
    the program compiled (a union; the program model's compile spans), extended to the
    launches of the thread that drives the device (compile_windows; *driver* says which,
    asked only when there was compiling);
    *interpreted*: it launches from a Python framework (host_work_gap_ns); *index*:
    the trace's AccountingIndex (by default, AccountingIndex.of(trace))."""
    settings = settings or Settings()
    window = phases.window
    it = phases.iterations
    iterations_from = (int(it.cpu_start[0]) if it is not None and len(it)
                       else phases.spans["steady"][0])
    gs, ge, main_gtid, h2d = _scan(work, window)
    uploads = _batch_uploads(work, h2d, settings.input_min_bytes)
    del h2d
    gaps = _with_next_ops(work, gs, ge, main_gtid, window[1])
    del gs, ge
    long_gap_ns = host_work_gap_ns(work, main_gtid, settings, interpreted)
    if compiling[0].size:
        driving = driver() if driver is not None else -1
        compiling = compile_windows(work, driving if driving >= 0 else main_gtid, compiling)
    calls = _ThreadTime(index or AccountingIndex.of(trace), waits, long_gap_ns)
    lengths: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    block_start, block_first = [], [0]
    n = len(gaps)
    lo, hi = window
    for k in range(0, max(n, 1), CHUNK_GAPS):
        # A slice from a gap's start to the next slice's first gap's start: no GPU
        # operation spans its edges.
        g0, g1 = k, min(k + CHUNK_GAPS, n)
        t0 = lo if k == 0 else int(gaps.start[g0])
        t1 = int(gaps.start[g1]) if g1 < n else hi
        o0, o1 = work.searchsorted([t0, t1], side="left").tolist()
        if g1 == n:
            o1 = len(work)
        ops = work.slice(o0, o1)
        bs, be, bc, _ = host.exclusive(ops.start, ops.end, ops.bucket, _BUSY)
        del ops
        # What the attribution needs of each gap's next op (none: the trailing gap).
        nxt = gaps.next_op[g0:g1]
        has = np.flatnonzero(nxt >= 0)
        following = work.take(nxt[has])
        gap_gtid = np.full(g1 - g0, main_gtid, dtype=np.int64)
        gap_gtid[has] = work.threads_of(following.source, following.row)
        api_end = np.full(g1 - g0, np.nan)
        api_end[has] = work.gather_rows("api_end", following.source, following.row)
        launched = work.gather_rows("api_start", following.source, following.row)
        gap_input = np.zeros(g1 - g0, dtype=bool)
        gap_input[has] = (np.isin(nxt[has], uploads)
                          & (np.nan_to_num(launched, nan=-1) >= iterations_from))
        gap_jit = np.zeros(g1 - g0, dtype=bool)
        gap_jit[has] = _jit_rows(trace, following.source, following.row)
        del following, launched
        gap_results = _after_results(work, gaps.start[g0:g1], settings.input_min_bytes)
        gap_compile = _compiled_until(compiling, gaps.start[g0:g1], gaps.end[g0:g1])
        is_, ie, ic = _idle_pieces(calls, gaps, slice(g0, g1), settings, api_end,
                                   gap_gtid, gap_input, gap_jit, gap_results, gap_compile)
        s, e, c = coalesce(np.r_[bs, is_], np.r_[be, ie], np.r_[bc, ic].astype(np.int8))
        keep = e > s
        length, code = _compact(e[keep] - s[keep], c[keep])
        lengths.append(length)
        codes.append(code)
        block_start.append(t0)
        block_first.append(block_first[-1] + length.size)
    block_start.append(hi)
    account = DeviceAccount(work.device, window, phases, work, _joined(lengths, np.uint32),
                            _joined(codes, np.int8), np.array(block_start, dtype=np.int64),
                            np.array(block_first, dtype=np.int64), gaps, settings,
                            long_gap_ns)
    gaps.read_back(account)
    return account


_LONGEST = np.iinfo(np.uint32).max


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
