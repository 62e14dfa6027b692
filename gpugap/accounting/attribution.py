"""One accounting of a device's time: every nanosecond of its window in exactly one bucket.

Busy time goes to the bucket of the work that ran (gpugap.accounting.buckets says which
wins where kinds overlap); idle time is explained gap by gap, by the thread that launched
the operation that ended the gap (gpugap.accounting.policy: its steps 1 to 5). This module
runs the walk and keeps what it gives:

1. ``_scan``: one walk over the device's ops finds the gaps of their union in the window,
   the op that ended each, the main launching thread and the host-to-device copies.
2. The work goes in time slices of ``CHUNK_GAPS`` gaps, cut at gap starts (no GPU
   operation spans one), each with the CUDA calls of its own time: memory stays bounded
   however long the report. In each slice, busy pieces by host.exclusive over the
   slice's ops; what the policy needs of each gap (policy.GapFacts); its idle pieces
   (policy.idle_pieces).
3. Each slice becomes a block of the compact partition (gpugap.accounting.partition).
4. The gaps are then read back from the partition when asked (gpugap.accounting.gaps):
   no array per gap is kept.

``DeviceAccount`` is the result: the partition, the gap index, the phases and the
device's work, and the queries the rules and the verdict ask of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from gpugap import forkjoin
from gpugap import intervals as tl
from gpugap.accounting import host, policy
from gpugap.accounting.buckets import BUSY_IDS, CODE, IDS
from gpugap.accounting.gaps import GapIndex, next_ops
from gpugap.accounting.index import AccountingIndex
from gpugap.accounting.partition import Partition, PartitionWriter
from gpugap.accounting.phases import Phases
from gpugap.accounting.policy import Settings, compile_windows
from gpugap.accounting.work import DeviceWork, Ops
from gpugap.memory import give_back
from gpugap.quantiles import column_quantiles
from gpugap.report.table import factorize
from gpugap.report.trace import Trace

if TYPE_CHECKING:
    import pandas as pd

CHUNK_GAPS = 1 << 15      # gaps handled at a time (a module setting: tests make it small)
_BUSY = [CODE[b] for b in BUSY_IDS]


@dataclass
class DeviceAccount:
    """The accounting of one device: its window's partition into buckets (compact,
    gpugap.accounting.partition), its idle gaps (gpugap.accounting.gaps), its phases
    and its work, and the queries on them."""

    device: int
    window: tuple[int, int]
    phases: Phases
    work: DeviceWork
    partition: Partition
    gaps: GapIndex
    settings: Settings
    # Gaps at least this long are host work, shorter ones launch overhead
    # (policy.host_work_gap_ns).
    host_work_gap_ns: float
    # partition.totals of the steady iterations (steady_iteration_totals), computed once.
    _steady_totals: np.ndarray | None = field(default=None, repr=False, compare=False)

    def decode(self, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, codes) of the pieces of blocks [k0, k1), in time order."""
        return self.partition.decode(k0, k1)

    def blocks(self, lo: int | None = None, hi: int | None = None, *,
               numbers: range | None = None):
        """(block start, block end, starts, ends, codes) of the blocks overlapping
        [lo, hi) (default: all), or of the blocks *numbers* (``block_range``), one at a
        time."""
        for _, *block in self.partition.blocks(lo, hi, numbers=numbers):
            yield tuple(block)

    def block_range(self, lo: int | None = None, hi: int | None = None) -> range:
        """The numbers of the blocks overlapping [lo, hi) (default: all)."""
        return self.partition.block_range(lo, hi)

    def pieces(self, lo: int, hi: int, buckets=None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces inside [lo, hi) (clipped), of *buckets* only if given."""
        return self.partition.pieces(lo, hi, buckets)

    @property
    def by_bucket(self) -> dict[str, tl.Intervals]:
        """Each bucket's pieces over the whole window (sorted, disjoint): decodes it all,
        for small reports and tests; large ones go through ``blocks``."""
        s, e, c = self.pieces(*self.window)
        return {b: (s[c == i], e[c == i]) for i, b in enumerate(IDS)}

    def totals(self, lo, hi) -> pd.DataFrame:
        """Bucket time (ns) inside each window [lo[i], hi[i]): one row per window, one
        column per bucket (rows add up to the window's overlap with the device's). A
        DataFrame, for users (the analysis reads ``bucket_sums``)."""
        return _bucket_frame(self.bucket_sums(lo, hi))

    def steady_iteration_totals(self) -> pd.DataFrame:
        """totals() of each steady iteration, for users (``steady_iteration_sums``)."""
        return _bucket_frame(self.steady_iteration_sums())

    def bucket_sums(self, lo, hi) -> np.ndarray:
        """totals() as an array: a row per window, a column per bucket (IDS)."""
        return self.partition.totals(lo, hi)

    def steady_iteration_sums(self) -> np.ndarray:
        """partition.totals of each steady iteration: a row per iteration, a column per
        bucket (IDS)."""
        if self._steady_totals is None:
            lo, hi = self.phases.iteration_windows(self.phases.steady_iterations)
            self._steady_totals = self.partition.totals(lo, hi)
        return self._steady_totals

    def totals_in(self, windows: tl.Intervals | None = None) -> dict[str, int]:
        """Bucket time inside a union of windows (default: the whole window)."""
        if windows is None:
            windows = (np.array([self.window[0]]), np.array([self.window[1]]))
        t = self.partition.totals(*windows).sum(axis=0)
        return {b: int(v) for b, v in zip(IDS, t.tolist(), strict=True)}

    def per_gap(self, bucket: str, span: tl.Intervals) -> tuple[np.ndarray, np.ndarray]:
        """(the gaps holding time of *bucket* inside *span*, that time in each)."""
        held, ns, _ = self.held_gaps(bucket, span)
        return held, ns

    def held_gaps(self, bucket: str, span: tl.Intervals
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """per_gap, with the end of each gap (read in the same pass): GapIndex.held."""
        return self.gaps.held(bucket, span)

    def summary(self) -> dict:
        """Phases, bucket time per phase, and the steady state's figures (share of each
        bucket, per-iteration median and p90), as plain data."""
        ph = self.phases
        out = ph.to_dict()
        spans = {phase: (lo, hi) for phase, (lo, hi) in ph.spans.items() if hi > lo}
        table = self.partition.totals([lo for lo, _ in spans.values()],
                                      [hi for _, hi in spans.values()])   # in one pass
        per_phase = {phase: dict(zip(IDS, row.tolist(), strict=True))
                     for phase, row in zip(spans, table, strict=True)}
        out["buckets_ns"] = {phase: {b: v for b, v in totals.items() if v}
                             for phase, totals in per_phase.items()}
        lo, hi = ph.spans["steady"]
        if hi <= lo:
            out["steady"] = None
            return out
        totals = per_phase["steady"]
        wall = hi - lo
        if ph.first_use.size:       # the steady state but its first-use iterations
            windows = ph.steady_windows()
            totals = dict(zip(IDS, self.partition.totals(*windows).sum(axis=0).tolist(),
                              strict=True))
            wall = tl.total(windows)
        busy = sum(totals[b] for b in BUSY_IDS)
        steady = {"wall_ns": int(wall), "gpu_busy_pct": round(100.0 * busy / wall, 3),
                  "buckets": {b: {"ns": int(v), "pct": round(100.0 * v / wall, 3)}
                              for b, v in totals.items() if v}}
        its = ph.steady_iterations
        if len(its):
            ilo, ihi = ph.iteration_windows(its)
            # The buckets' columns at once (a call per column costs more than the work).
            table = self.steady_iteration_sums()[:, [IDS.index(b) for b in steady["buckets"]]]
            medians, p90s = column_quantiles(table, 90)    # numpy's, without partitions
            for item, median, p90 in zip(steady["buckets"].values(), medians.tolist(),
                                         p90s.tolist(), strict=True):
                item["per_iteration_median_ns"] = int(median)
                item["per_iteration_p90_ns"] = int(p90)
            dur = ihi - ilo
            steady["iterations"] = int(len(its))
            steady["iteration_median_ns"] = int(np.median(dur))
            steady["iteration_p90_ns"] = int(np.percentile(dur, 90))
        out["steady"] = steady
        return out

    def relabel(self, old: str, new: str, where: tl.Intervals, min_share: float = 0.5
                ) -> int:
        """Pieces of bucket *old* that lie at least *min_share* inside *where* (a union)
        become *new* (both idle buckets: the gaps stay as they are); returns the time
        moved."""
        return self.partition.relabel(old, new, where, min_share)

    def gap_of(self, t) -> np.ndarray:
        """The gap (index) containing each time, -1 where the GPU was busy
        (GapIndex.containing)."""
        return self.gaps.containing(t)


def account_device(trace: Trace, work: DeviceWork, phases: Phases,
                   settings: Settings | None = None,
                   waits: host.ThreadWaits | None = None,
                   compiling: tl.Intervals = tl.EMPTY,
                   driver: Callable[[], int] | None = None,
                   interpreted: bool = False,
                   index: AccountingIndex | None = None,
                   processes: int | None = 1, loader: bool = False) -> DeviceAccount:
    """The partition of *work*'s device (module doc); *waits*: the launching threads
    of each process whose waits on other threads tell waiting for work apart
    (host.ThreadWaits; no waits are looked at without them); *compiling*: when
    the program compiled (a union; the program model's compile spans), extended to the
    launches of the thread that drives the device (compile_windows; *driver* says which,
    asked only when there was compiling);
    *interpreted*: it launches from a Python framework (policy.host_work_gap_ns); *index*:
    the trace's AccountingIndex (by default, AccountingIndex.of(trace)); *processes*: at
    most this many work on its slices (gpugap.forkjoin.run; None: every core); *loader*:
    a data loader feeds the program (policy step 5b)."""
    settings = settings or Settings()
    window = phases.window
    it = phases.iterations
    iterations_from = (int(it.cpu_start[0]) if it is not None and len(it)
                       else phases.spans["steady"][0])
    # 1. The gaps, the main launching thread, the batch uploads.
    gap_start, gap_next, main_gtid, h2d = _scan(work, window)
    uploads = policy.batch_uploads(work, h2d, settings.input_min_bytes)
    del h2d
    long_gap_ns = policy.host_work_gap_ns(work, main_gtid, settings, interpreted)
    if compiling[0].size:
        # The thread that launches the loop: a compile extends back to its last launch
        # (tracing), not to the last kernel of a thread that was busiest once (XLA's
        # autotuning threads); else the thread that kept the device busy longest.
        driving = policy.loop_thread(work, it.cpu_start) if it is not None and len(it) \
            else -1
        if driving < 0:
            driving = driver() if driver is not None else -1
        compiling = compile_windows(work, driving if driving >= 0 else main_gtid, compiling)
    calls = _ThreadTime(index or AccountingIndex.of(trace), waits)
    n = gap_start.size
    lo, hi = window
    per_block = CHUNK_GAPS

    def block(k: int) -> tuple[int, np.ndarray, np.ndarray]:
        # 2. A slice from a gap's start to the next slice's first gap's start: no GPU
        # operation spans its edges.
        g0, g1 = k, min(k + per_block, n)
        t0 = lo if k == 0 else int(gap_start[g0])
        t1 = int(gap_start[g1]) if g1 < n else hi
        o0, o1 = work.searchsorted([t0, t1], side="left").tolist()
        if g1 == n:
            o1 = len(work)
        ops = work.slice(o0, o1)
        bs, be, bc = host.exclusive(ops.start, ops.end, ops.bucket, _BUSY)
        # (The ops that end the slice's gaps and those before them are among its own.)
        facts = _gap_facts(trace, work, (ops, o0), gap_start[g0:g1], gap_next[g0:g1], hi,
                           main_gtid, uploads, iterations_from, compiling, settings)
        del ops
        is_, ie, ic = policy.idle_pieces(facts, settings, long_gap_ns, calls.of_thread,
                                         loader)
        # 3. The slice's pieces, a block of the partition.
        return PartitionWriter.block(t0, np.r_[bs, is_], np.r_[be, ie],
                                     np.r_[bc, ic].astype(np.int8))

    # The slices on every core allowed (gpugap.forkjoin), once the indexes most slices
    # read are filled here, shared by the processes (the calls, their categories, the
    # main launching thread's library handle creations and waits): a thread another
    # slice asks of is indexed where it runs.
    calls.of_thread(main_gtid, lo, lo)
    writer = PartitionWriter()
    for done in forkjoin.run([partial(block, k) for k in range(0, max(n, 1), per_block)],
                             max_processes=processes):
        writer.add(*done)
    give_back()                     # the blocks' working memory, before their parts are joined
    partition = writer.finish(hi)
    # 4. The gaps, read back from the partition from now on.
    gaps = GapIndex(partition, work, main_gtid, per_block, n)
    return DeviceAccount(work.device, window, phases, work, partition, gaps, settings,
                         long_gap_ns)


def _gap_facts(trace: Trace, work: DeviceWork, near: tuple[Ops, int], gs: np.ndarray,
               nxt: np.ndarray, hi: int, main_gtid: int, uploads: np.ndarray,
               iterations_from: int, compiling: tl.Intervals, settings: Settings
               ) -> policy.GapFacts:
    """What the policy needs of the gaps of one slice (starting at *gs*, ended by the
    ops *nxt*, -1 for the trailing gap, which ends at *hi* and follows *main_gtid*);
    *near*: (ops, o0), the slice's ops, from position o0 on."""
    has = np.flatnonzero(nxt >= 0)
    following = work.take(nxt[has], near)
    ge = np.full(gs.size, hi, dtype=np.int64)
    ge[has] = np.minimum(following.start, hi)
    gap_gtid = np.full(gs.size, main_gtid, dtype=np.int64)
    gap_gtid[has] = work.threads_of(following.source, following.row)
    api_end = np.full(gs.size, np.nan)
    api_end[has] = work.gather_rows("api_end", following.source, following.row)
    launched = work.gather_rows("api_start", following.source, following.row)
    is_input = np.zeros(gs.size, dtype=bool)
    is_input[has] = (_among(nxt[has], uploads)
                     & (np.nan_to_num(launched, nan=-1) >= iterations_from))
    is_jit = np.zeros(gs.size, dtype=bool)
    is_jit[has] = policy.jit_rows(trace, following.source, following.row,
                                  policy.BUILT_KERNEL)
    # A library zeroes the built kernel's workspace first (cuDNN, Inductor's buffers):
    # a gap ended by a memset is the kernel's that follows it.
    zeroing = np.flatnonzero(following.bucket == CODE["memset"])
    then = nxt[has][zeroing] + 1
    zeroing, then = zeroing[then < len(work)], then[then < len(work)]
    if then.size:
        after = work.take(then)
        is_jit[has[zeroing]] = policy.jit_rows(trace, after.source, after.row,
                                               policy.BUILT_KERNEL)
    reads_next = np.zeros(gs.size, dtype=bool)
    reads_next[has] = np.isin(following.bucket, policy.D2H)
    del following, launched
    return policy.GapFacts(
        start=gs, end=ge, has_next=nxt >= 0, api_end=api_end, gtid=gap_gtid,
        is_input=is_input, is_jit=is_jit,
        is_results=policy.after_results(work, gs, settings.input_min_bytes, near,
                                        reads_next),
        compile_end=policy.compiled_until(compiling, gs, ge))


def _among(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """np.isin(values, known) for *known* sorted (op positions): a search per value,
    where np.isin would tabulate the whole range of positions."""
    if not known.size:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(known, values), known.size - 1)
    return known[at] == values


def _scan(work: DeviceWork, window: tuple[int, int]
          ) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """One walk over the device's ops, slice by slice: the gaps of their union inside
    the window (starts: as intervals.gaps(intervals.union(...), *window) gives them), the
    op that ended each (gaps.next_ops of its end: int32, int64 for 2**31 ops or more;
    -1: none), the main launching thread (the one that launched most ops; ties: the
    first seen) and the positions of the host-to-device copies."""
    lo, hi = window
    reach = lo                   # the latest end so far (the window's start before any)
    # The gaps written in place, never joined from parts: at most one ends at each op,
    # and the trailing one (room left unwritten is never resident).
    starts = np.empty(len(work) + 1, dtype=np.int64)
    nexts = np.empty(len(work) + 1, dtype=np.int32 if len(work) < 2**31 - 1 else np.int64)
    n_gaps = 0
    h2d = []
    threads: dict[int, int] = {}
    for o0, o1 in work.slices():
        ops = work.slice(o0, o1)
        gtid = work.threads_of(ops.source, ops.row)
        seen, counts = _count_in_order(gtid[gtid >= 0])
        for g, count in zip(seen.tolist(), counts.tolist(), strict=True):
            threads[g] = threads.get(g, 0) + count
        del gtid
        h2d.append(o0 + np.flatnonzero(np.isin(ops.bucket, policy.H2D)))
        lasting = ops.end > ops.start               # ops of no length leave no mark
        s, e = ops.start[lasting], ops.end[lasting]
        if not s.size:
            continue
        after = np.maximum.accumulate(e)           # the reach after each op
        np.maximum(after, reach, out=after)
        before = np.r_[reach, after[:-1]]
        new = s > before                           # a gap ends at this op's start
        # The first op to start at a gap's end is the op itself, unless ops of no length
        # start with it (an op that lasts would have covered the time): those few (and
        # a slice's first op, whose tie may lie in the slice before) are searched for.
        at = np.flatnonzero(lasting)[new]
        ended_by = o0 + at
        tied = np.flatnonzero((at == 0) | (ops.start[at - 1] == ops.start[at]))
        ended_by[tied] = work.searchsorted(ops.start[at[tied]], side="left")
        del ops, lasting
        n_gaps = _add_gaps(work, starts, nexts, n_gaps, before[new], s[new], ended_by, hi)
        reach = int(after[-1])
    if hi > reach:                                 # the trailing gap
        n_gaps = _add_gaps(work, starts, nexts, n_gaps, np.array([reach]), np.array([hi]),
                           next_ops(work, [hi]), hi)
    main = max(threads, key=lambda g: threads[g]) if threads else -1   # first of the most
    return (starts[:n_gaps], nexts[:n_gaps], main,
            np.concatenate(h2d) if h2d else np.zeros(0, dtype=np.int64))


def _count_in_order(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values in order of first appearance (as pd.factorize orders them)
    and how many times each occurs. Factorized over the runs of equal values (a thread
    launches its ops in long runs), so the sort is of runs, not of every op."""
    if not values.size:
        return values, np.zeros(0, dtype=np.int64)
    run = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    codes, seen = factorize(values[run])
    lengths = np.diff(np.r_[run, values.size])
    return seen, np.bincount(codes, weights=lengths).astype(np.int64)


def _bucket_frame(sums: np.ndarray) -> pd.DataFrame:
    """Sums per window and bucket as a DataFrame, a column per bucket: what totals()
    returns to users (pandas is imported here, for them)."""
    import pandas as pd

    return pd.DataFrame(sums, columns=list(IDS))


def _add_gaps(work: DeviceWork, starts: np.ndarray, nexts: np.ndarray, count: int,
              s: np.ndarray, e: np.ndarray, ended_by: np.ndarray, hi: int) -> int:
    """Gaps [s, e) (in time order, each ending after it starts, none before the window),
    ended by the ops *ended_by*, clipped to the window's end *hi* (those left with no
    length dropped; one cut short is ended by the first op at or after *hi*), written
    after the *count* gaps in *starts*, *nexts*; returns the count then."""
    if s.size and int(e[-1]) > hi:             # ops beyond the window
        keep = s < hi
        s, ended_by = s[keep], ended_by[keep]
        if s.size and int(e[keep][-1]) > hi:
            ended_by[-1] = next_ops(work, [hi])[0]
    starts[count:count + s.size] = s
    nexts[count:count + s.size] = ended_by
    return count + s.size


class _ThreadTime:
    """What the idle attribution asks of a thread's host time on one device: its calls
    (the accounting's index: host.ApiCalls), library handle creations and waits on other
    threads (*waits*, None: not looked at) as one partition of a window."""

    def __init__(self, index: AccountingIndex, waits: host.ThreadWaits | None = None
                 ) -> None:
        self.index = index
        self.waits = waits

    def of_thread(self, gtid: int, lo: int, hi: int, compiling: tl.Intervals = tl.EMPTY):
        """host.ApiCalls.partition of the thread's time in [lo, hi)."""
        waits = self.waits.idle(gtid) if self.waits is not None else tl.EMPTY
        index = self.index
        return index.calls.partition(gtid, lo, hi, index.api_categories,
                                     index.library_inits(gtid), waits, compiling)
