"""The idle-time policy: which bucket each idle nanosecond of a device goes to.

Idle time is explained gap by gap, by the thread that launched the operation that ended
the gap (the trailing gap: the device's main launching thread):

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
   ``triton_*`` kernels, which torch.compile's Inductor generates; cuDNN's run-time
   compiled ``cudnn_generated_*`` engines, built per new shape), everything the
   thread did in the gap up to its last module load (compiling outside CUDA, often
   waiting for compile worker processes, then loading the new kernels) is compilation.
   A gap whose last module load comes before any such kernel is plain module loading.
   Time the program model saw a compiler run in (``compile_windows``) is compilation
   wherever it lies.
5. Time outside CUDA and inside other calls (launches) goes to the first of these that
   applies:
   a. module-load, between the first and the last module load of the gap: a library
      loading its kernels does host work between the loads (cuBLAS initialising);
   b. thread-wait, in a long gap (below), inside an OS wait on another thread while no
      thread of the process that launches GPU work had any (host.ThreadWaits): nothing to
      do; but when a data loader feeds the program (its threads: the program model's
      ``data_loader``) and the gap ends in a batch upload (d), the wait is for the
      loader's next batch: input;
   c. results, in a long gap that began as a batch's results came back (a
      device-to-host copy of at least ``input_min_bytes`` ended just before it), or
      between two reads back of any size (the host reading values one at a time and
      working on each);
   d. input, when the next operation uploads a batch inside the iterations: the first of
      a run of host-to-device copies, at least ``input_min_bytes`` together (the host was
      loading data);
   e. when the thread was blocked (module load, synchronisation, allocation, blocking
      copy) at the moment the gap began, the bucket of the latest blocking call before
      it in the gap, for as long as the host was held while the GPU still had work (its
      lost lead: without the block the host would have been that far ahead, and what
      follows is the aftermath); beyond that lead, as below;
   f. launch-bound when the whole gap is shorter than the host-work length
      (``host_work_gap_ns``: ``min_gap_us``, or in a Python framework up to ten times
      the launching thread's pace), host-work when longer ("long gaps").

``idle_pieces`` applies the policy to the gaps of one time slice from what is known of
each (``GapFacts``); gpugap.accounting.attribution gathers those facts and stores what
comes out. The thresholds are the accounting's (``Settings``): the launch-gap rule's
``min_gap_us`` is ``MIN_GAP_US`` here, and a value set for it reaches the accounting
through ``Settings.with_min_gap``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting import host
from gpugap.accounting.buckets import BUCKETS, CODE
from gpugap.accounting.work import DeviceWork, Ops
from gpugap.report.trace import Trace

# Gaps shorter than this (us), spent launching and between launches, are launch-bound;
# longer ones host work: a launch takes 5-10 us from call to execution, a
# synchronise-then-launch round trip 10-30 us. The launch-gap rule's min_gap_us.
MIN_GAP_US = 100


@dataclass(frozen=True)
class Settings:
    min_gap_us: float = MIN_GAP_US   # shorter gaps of launches + Python: launch-bound
    # In Python frameworks, longer gaps too when within 10x the thread's launch pace
    # (host_work_gap_ns); off where the user set min_gap_us: theirs decides alone.
    adaptive_gap: bool = True
    queued_min_us: float = 30.0      # queued this long while idle: a dependency held it
    input_min_bytes: int = 65536     # host-to-device copies this big together: a batch
    warmup_factor: float = 2.0       # iterations this much slower than the median: warm-up

    @classmethod
    def with_min_gap(cls, min_gap_us: float | None) -> Settings:
        """The settings for a chosen ``min_gap_us`` (the launch-gap rule's threshold):
        None or the default keep the defaults; any other value decides alone (no
        adaptation to a Python framework's launch pace)."""
        if min_gap_us is None or float(min_gap_us) == cls.min_gap_us:
            return cls()
        return cls(min_gap_us=float(min_gap_us), adaptive_gap=False)


# The bucket of time inside a blocking call, by the call's category (host.CATEGORIES):
# the bucket that names that category as its calls' (buckets.Bucket.call_category);
# -1 for categories that do not block (launches, and the codes beyond: outside CUDA,
# waiting on a thread, compiling).
BLOCKED_BUCKET = np.full(max(host.OUTSIDE, host.WAIT, host.COMPILE) + 1, -1, dtype=np.int8)
for _bucket in BUCKETS:
    if _bucket.call_category is not None:
        _category = host.CATEGORIES.index(_bucket.call_category)
        if _category in host.BLOCKING_CATEGORIES:
            BLOCKED_BUCKET[_category] = CODE[_bucket.id]
assert (BLOCKED_BUCKET[list(host.BLOCKING_CATEGORIES)] >= 0).all(), \
    "each blocking category of calls needs a bucket (buckets.Bucket.call_category)"

H2D = (CODE["copy-h2d-pageable"], CODE["copy-h2d-pinned"])
D2H = (CODE["copy-d2h-pageable"], CODE["copy-d2h-pinned"])


@dataclass
class GapFacts:
    """What the policy needs to know of each gap of a time slice (one entry per gap)."""

    start: np.ndarray        # int64
    end: np.ndarray          # int64
    has_next: np.ndarray     # bool: an operation ended it (False: the trailing gap)
    api_end: np.ndarray      # float: when the next op's launch call returned (NaN: none)
    gtid: np.ndarray         # int64: the thread it follows (-1: unknown)
    is_input: np.ndarray     # bool: its next op uploads a batch (5d)
    is_jit: np.ndarray       # bool: its next op is a kernel a JIT compiler built (4)
    is_results: np.ndarray   # bool: it began as a batch's results came back (5c)
    compile_end: np.ndarray  # int64: the end of a compilation that ran in it, -1: none


@dataclass
class HostPieces:
    """One thread's time inside its gaps, in time order (so grouped by gap)."""

    start: np.ndarray        # int64
    end: np.ndarray          # int64
    category: np.ndarray     # int8: host category, or host.OUTSIDE / WAIT / COMPILE
    gap: np.ndarray          # the gap (index into GapFacts) each lies in
    call_start: np.ndarray   # int64: where the call a piece belongs to began (unclipped)


# A thread's time in [lo, hi) as host.exclusive gives it (starts, ends, categories),
# with the times it compiled overriding all else.
ThreadTime = Callable[[int, int, int, tl.Intervals],
                      tuple[np.ndarray, np.ndarray, np.ndarray]]


def idle_pieces(facts: GapFacts, settings: Settings, host_work_gap_ns: float,
                thread_time: ThreadTime, loader: bool = False
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labelled partition of the gaps of one time slice (module doc), as (starts,
    ends, bucket codes); *thread_time* gives each thread's time in a window; *loader*:
    a data loader feeds the program (5b)."""
    gs, ge, api_end, gtid = facts.start, facts.end, facts.api_end, facts.gtid
    # 1. queued: after the next op's launch call returned.
    q0 = np.maximum(np.nan_to_num(api_end, nan=np.inf), gs)
    queued = facts.has_next & ~np.isnan(api_end) & (ge - q0 >= settings.queued_min_us * 1e3)
    q0 = np.where(queued, q0, ge).astype(np.int64)
    out_s, out_e = [q0[queued]], [ge[queued]]
    out_c = [np.full(int(queued.sum()), CODE["queued-wait"], dtype=np.int8)]
    rem_s, rem_e = gs, q0                             # the rest of each gap
    # 2. unknown: no thread to follow.
    unknown = (gtid < 0) & (rem_e > rem_s)
    out_s.append(rem_s[unknown])
    out_e.append(rem_e[unknown])
    out_c.append(np.full(int(unknown.sum()), CODE["unknown"], dtype=np.int8))
    for g in np.unique(gtid[~unknown & (gtid >= 0)]).tolist():
        idx = np.flatnonzero((gtid == g) & (rem_e > rem_s))
        if not idx.size:
            continue
        rs, re_ = rem_s[idx], rem_e[idx]
        compiled = facts.compile_end[idx] > rs
        cs_all, ce_all, cat_all = thread_time(
            g, int(rs[0]), int(re_[-1]),
            (rs[compiled], np.minimum(facts.compile_end[idx][compiled], re_[compiled])))
        # 3-5: the thread's labelled calls and its time outside them, one tiling of a
        # span holding every gap, cut by the gaps: (gap, tile) in gap order is time order.
        ts, te, tc = _with_outside(cs_all, ce_all, cat_all,
                                   min(int(rs[0]), int(cs_all[0]) if cs_all.size else 0),
                                   max(int(re_[-1]), int(ce_all[-1]) if ce_all.size else 0))
        ps, pe, pg, tile = tl.pieces_in(rs, re_, (ts, te))
        labelled = label_host_pieces(HostPieces(ps, pe, tc[tile], idx[pg], ts[tile]),
                                     facts, host_work_gap_ns, loader)
        for part, values in zip((out_s, out_e, out_c), labelled, strict=True):
            part.append(values)
    return np.concatenate(out_s), np.concatenate(out_e), np.concatenate(out_c)


def _with_outside(s: np.ndarray, e: np.ndarray, c: np.ndarray, lo: int, hi: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labelled pieces (sorted, disjoint, inside [lo, hi)) with the holes among them
    labelled host.OUTSIDE: a tiling of [lo, hi) in time order. Hole i lies before piece i
    (the last, after the last piece): interleaved, no sort."""
    hole_s, hole_e = np.r_[lo, e], np.r_[s, hi]
    n = s.size
    ts = np.empty(2 * n + 1, dtype=np.int64)
    te = np.empty(2 * n + 1, dtype=np.int64)
    tc = np.empty(2 * n + 1, dtype=np.int8)
    ts[0::2], te[0::2], tc[0::2] = hole_s, hole_e, host.OUTSIDE
    ts[1::2], te[1::2], tc[1::2] = s, e, c
    keep = te > ts
    return ts[keep], te[keep], tc[keep]


def label_host_pieces(pieces: HostPieces, facts: GapFacts, host_work_gap_ns: float,
                      loader: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Buckets of one thread's pieces of its gaps, by steps 3 to 5 of the module doc.
    Returns (starts, ends, bucket codes); an aftermath (5e) that covers part of a piece
    splits it in two. Per-gap figures are taken once per gap and spread over its run of
    pieces (repeat); the steps that concern few gaps (module loads, a lead lost) look at
    those gaps' pieces only."""
    ps, pe, pc, pg = pieces.start, pieces.end, pieces.category, pieces.gap
    if ps.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0, dtype=np.int8)
    blocked_bucket = BLOCKED_BUCKET[pc]                   # -1: not a blocking call
    blocking = blocked_bucket >= 0
    first = np.flatnonzero(np.r_[True, pg[1:] != pg[:-1]])     # each gap's first piece
    sizes = np.diff(np.r_[first, ps.size])
    gap = pg[first]
    gap_start = facts.start[gap]
    long_gap = ((facts.end - facts.start) >= host_work_gap_ns)[gap]
    jit = facts.is_jit | (facts.compile_end > facts.start)

    def spread(per_gap: np.ndarray) -> np.ndarray:
        return np.repeat(per_gap, sizes)

    # The default bucket, then each step over it, the one that decides last first: 5f,
    # 5d, 5c, 5b, 5a, 3, 4. (Each step is skipped where nothing in the slice can take
    # it: no module load, no batch upload, no gap that began blocked; the steady state is
    # mostly launches.)
    # 5f. Launch overhead or host work, by the gap's length.
    bucket = spread(np.where(long_gap, np.int8(CODE["host-work"]),
                             np.int8(CODE["launch-bound"])))
    # 5d. Loading the next batch.
    input_gap = facts.is_input[gap]
    gap_input = spread(input_gap) if input_gap.any() else None
    if gap_input is not None:
        bucket[gap_input] = CODE["input"]
    # 5c. Working on results just read back (not loading the next batch, and not time
    # the blocked copy lost: the work needs its results, it could not have run earlier).
    results_gap = long_gap & facts.is_results[gap]
    gap_results = spread(results_gap) if results_gap.any() else None
    if gap_results is not None:
        bucket[gap_results] = CODE["results"]
    # 5b. Waiting on another thread while no launching thread had work: nothing to do.
    waits = pc == host.WAIT
    if waits.any():
        # (A data loader's next batch, when one feeds the program: input, as 5d said.)
        waiting = waits & spread(long_gap)
        if loader and gap_input is not None:
            waiting &= ~gap_input
        bucket[waiting] = CODE["thread-wait"]
    # 5a. Between the first and the last module load of a gap: loading in progress.
    loading = compiling = None
    loads = np.flatnonzero(pc == host.MODULE)
    if loads.size:
        in_gap = np.searchsorted(first, loads, side="right") - 1   # the run of each load
        new = np.r_[True, in_gap[1:] != in_gap[:-1]]
        load_gap = in_gap[new]
        first_load, last_load = loads[new], loads[np.r_[new[1:], True]]
        between = _spans(first_load + 1, last_load)
        loading = np.zeros(ps.size, dtype=bool)
        loading[between] = ~blocking[between]
        bucket[loading] = CODE["module-load"]
        # 4. Compiling: up to the last module load of a gap before a JIT-compiled
        # kernel, or of a gap in which a compiler ran (loading what it built).
        built = jit[gap[load_gap]]
        compiling = np.zeros(ps.size, dtype=bool)
        compiling[_spans(first[load_gap[built]], last_load[built] + 1)] = True
    compiled = pc == host.COMPILE
    if compiled.any():
        compiling = compiled if compiling is None else compiling | compiled
    # 3. Inside a blocking call: its bucket; 4. compiling overrides all.
    np.copyto(bucket, blocked_bucket, where=blocking)
    if compiling is not None:
        bucket[compiling] = CODE["compilation"]
    # 5e. Blocked when the gap began, and since when: the lead the host lost.
    held = blocking[first] & (ps[first] == gap_start)
    lead = np.where(held, gap_start - pieces.call_start[first], 0)
    lost = np.flatnonzero(lead > 0)
    if not lost.size:                                     # no lead lost: no aftermath
        return ps + 0, pe, bucket
    at = _spans(first[lost], first[lost] + sizes[lost])   # the pieces of those gaps
    lost_sizes = sizes[lost]
    # (Waiting on another thread is no aftermath: unblocked, the host would have waited
    # all the same.)
    eligible = ~blocking[at] & ~waits[at]
    for step in (loading, compiling, gap_input, gap_results):
        if step is not None:
            eligible &= ~step[at]
    eligible_ns = np.where(eligible, pe[at] - ps[at], 0)
    before = np.cumsum(eligible_ns) - eligible_ns
    lost_first = np.r_[0, np.cumsum(lost_sizes)[:-1]]
    used = before - np.repeat(before[lost_first], lost_sizes)   # eligible earlier in gap
    aftermath = np.minimum(eligible_ns, np.maximum(np.repeat(lead[lost], lost_sizes) - used, 0))
    split = ps + 0                                        # [ps, split): aftermath
    split[at] += aftermath
    cut = aftermath > 0
    # A cut piece's gap began blocked: its latest blocking piece lies in that gap.
    latest = np.maximum.accumulate(np.where(blocking[at], at, -1))
    cut_at = at[cut]
    return (np.r_[ps[cut_at], split], np.r_[split[cut_at], pe],
            np.r_[blocked_bucket[latest[cut]], bucket])


def _spans(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions from lo[i] up to hi[i] (excluded), span after span."""
    n = np.maximum(hi - lo, 0)
    return np.arange(int(n.sum())) + np.repeat(lo - (np.cumsum(n) - n), n)


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
    """The length from which a gap is host work rather than launch overhead (5f);
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
        g = work.threads_of(ops[2], ops[3])
        parts.append(t[(g == gtid) & ~np.isnan(t)])
    return np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, np.int64)


def loop_thread(work: DeviceWork, starts: np.ndarray) -> int:
    """The thread that launched the device's iterations (the ops launched at *starts*,
    the iterations' cpu_start): the one that launched most of them; -1 when none was
    found."""
    starts = np.unique(np.asarray(starts, dtype=np.int64))
    if not starts.size:
        return -1
    found = []
    for o0, o1 in work.slices():
        ops = work.order.slice(o0, o1)
        t = work.gather_rows("api_start", ops[2], ops[3])
        at = np.flatnonzero(~np.isnan(t))
        hit = at[np.isin(t[at].astype(np.int64), starts)]
        if hit.size:
            found.append(work.threads_of(ops[2][hit], ops[3][hit]))
    threads = np.concatenate(found) if found else np.zeros(0, np.int64)
    threads = threads[threads >= 0]
    if not threads.size:
        return -1
    ids, counts = np.unique(threads, return_counts=True)
    return int(ids[np.argmax(counts)])


# Launches of the driving thread during a compiler's run that show the program went on.
WENT_ON_LAUNCHES = 2


def compile_windows(work: DeviceWork, driver: int, compiling: tl.Intervals) -> tl.Intervals:
    """How long the device's program was compiling, from what compilers left (a union:
    their spans): from the last launch of the thread that drives the device (*driver*:
    the one that launches its loop, where it has one) before each span to its first
    launch after it. Compiling is more than the compiler processes'
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


def compiled_until(compiling: tl.Intervals, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
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


def batch_uploads(work: DeviceWork, h2d: np.ndarray, min_bytes: int) -> np.ndarray:
    """Positions (increasing) of the host-to-device copies (*h2d*, increasing) that begin
    a batch's upload (5d): the first of a run of such copies one after another on the
    device, the run together at least *min_bytes* (a batch and its labels, in either
    order, whichever threads launched them: XLA launches a step's copies from a pool).
    Runs are of the device's order, not of each stream's: a kernel of another stream
    that starts between a small first copy and the batch splits them (the gap before the
    small one is then not called input), and two processes' copies can form one run."""
    if not h2d.size:
        return h2d
    first = np.r_[True, h2d[1:] != h2d[:-1] + 1]            # runs of adjacent positions
    run = np.cumsum(first) - 1
    nbytes = np.nan_to_num(work.gather("bytes", h2d).astype(np.float64))
    run_bytes = np.bincount(run, weights=nbytes)
    starts = h2d[first]
    return starts[run_bytes >= min_bytes]


def after_results(work: DeviceWork, gap_start: np.ndarray, min_bytes: int,
                  near: tuple[Ops, int] | None = None,
                  reads_next: np.ndarray | None = None) -> np.ndarray:
    """Per gap: did it begin as a batch's results came back (5c), the op that ended just
    before it a device-to-host copy of at least *min_bytes* (a scalar read back by
    .item() is a synchronisation, not results to work on), or of any size where the gap
    ends in another device-to-host copy (*reads_next*, per gap): the host reading values
    back one at a time and working on each in between (a Python loop over a device
    array)? *near*: (ops, o0), the ops from position o0 on, every op that starts from the
    first gap's start up to the last one's among them (a slice of the device's ops):
    looked in, not the device's order."""
    if near is None:
        before = work.searchsorted(gap_start, side="left") - 1
    else:
        before = near[1] + np.searchsorted(near[0].start, gap_start, side="left") - 1
    out = np.zeros(gap_start.size, dtype=bool)
    known = before >= 0
    if not known.any():
        return out
    ops = work.take(before[known], near)
    d2h = np.isin(ops.bucket, D2H) & (ops.end >= gap_start[known] - 1_000)
    if d2h.any():
        rows = np.flatnonzero(known)[d2h]
        nbytes = work.gather_rows("bytes", ops.source[d2h], ops.row[d2h])
        out[rows] = np.nan_to_num(nbytes) >= min_bytes
        if reads_next is not None:
            out[rows] |= reads_next[rows]
    return out


# Kernels generated by a JIT compiler at run time: Triton's (torch.compile's Inductor
# names them triton_poi_*, triton_per_*, triton_red_*, triton_tem_*...).
JIT_KERNEL = re.compile(r"^(?:void )?triton_")
# ... and those a library builds for each new problem shape at run time: cuDNN's
# runtime-compiled engines (cudnn_generated_*: its SDPA and fusion kernels, compiled
# with NVRTC and loaded with cuLibraryLoadData at the first use of a shape). Step 4
# counts the gap before either as compilation up to its last module load.
BUILT_KERNEL = re.compile(r"^(?:void )?(?:triton_|cudnn_generated_)")


def jit_ops(trace: Trace, work: DeviceWork, at) -> np.ndarray:
    """Per op at positions *at* of *work*: is it a kernel a JIT compiler generated
    (Triton's, Inductor's)?"""
    ops = work.take(at)
    return jit_rows(trace, ops.source, ops.row)


def jit_rows(trace: Trace, source: np.ndarray, row: np.ndarray,
             pattern: re.Pattern[str] = JIT_KERNEL) -> np.ndarray:
    """jit_ops of ops given by (source, row) (gpugap.accounting.work.SOURCES); kernels
    whose name matches *pattern* (BUILT_KERNEL: a library's run-time built ones too)."""
    out = np.zeros(source.size, dtype=bool)
    kernels = trace.table("kernels")
    sel = source == 0
    if len(kernels) and sel.any():
        # the kernels asked for only, each name tested once (Labels.matching)
        out[sel] = kernels.labels("name").take(row[sel]).matching(pattern)
    return out
