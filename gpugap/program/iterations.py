"""A device's iterations: what repeats on its timeline, and where each repetition runs.

In order of preference:

1. ``--iteration NAME``: the user's NVTX range of that name (numbers at the end of
   instance names are ignored: ``step`` matches ``step 0``, ``step 1``...).
2. NVTX: ranges of the program's domains (not libraries') repeated at one nesting level
   of one thread, at least 3 times, one after another, most instances launching GPU work
   and all of them together at least 30% of the device's launches (a repeated 'setup'
   or 'log' range is not an iteration): the outermost such level (then the one with
   most instances). ``step 12``, ``iter_3``, ``batch#7`` are instances of one name.
3. Repetition of GPU work: the main launching thread's operations (kernels, copies,
   memsets and CUDA graph launches alike) in launch order. An *anchor* is an operation
   that starts each repetition: one that recurs, and whose consecutive occurrences
   begin similar runs of operations (compared op by op from each occurrence). The
   anchor whose similar occurrences cover the most operations wins; among near ties,
   the one most alike from one repetition to the next, a CUDA graph launch (a
   repeating graph launch is an iteration), then the one after the longest pause of
   the host (a loop's natural boundary). Repetitions may drift: one with a few more or
   other operations (a longer KV cache, a checkpoint) still starts like the others.
   Inside a single outer NVTX range (``generate``, ``infer``) this finds the loop the
   range holds. Loops of about the winner's weight that run right before or after it
   on its thread (a benchmark timing one variant, then the next) join it: the program
   runs its loops in turn, and its steady state holds them all.
4. None: start-up lasts until the end of the last module-load call before regular work
   (gpugap.accounting.phases), the rest is one steady window.

Host ranges run ahead of the GPU, so each iteration is mapped onto the GPU through the
work launched in it: iteration i starts on the GPU at b_i = max(its host start, the end
of everything launched before it). The boundaries tile the timeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from gpugap.errors import UsageError, option
from gpugap.jsonout import Record
from gpugap.program.nvtx import base_name, program_ranges, shown_name
from gpugap.program.ops import DeviceOps, Launches, group_sums
from gpugap.quantiles import median as median_of
from gpugap.report.table import Labels, Table, factorize, sorted_codes
from gpugap.report.trace import Trace

MIN_ITERATIONS = 3
MIN_LAUNCH_SHARE = 0.3      # of the device's launches, inside a level's instances
SOURCES = ("nvtx", "graph", "kernels", "approximate")

# Repetition finding (3.). Candidates: the most frequent operations.
MAX_ANCHORS = 48
# Two repetitions are alike when at least this share of the longer one's operations
# match the other's, op by op from their anchors (the first COMPARED ops of each).
ALIKE = 0.5
COMPARED = 256
# Odd repetitions bridged: a repetition unlike its neighbours (a checkpoint, an extra
# log) makes two pairs unlike; up to this many unlike pairs in a row do not cut a loop.
BRIDGED = 2
# Repetitions are exact (source "kernels") when this share of consecutive pairs are
# identical, else approximate (they drift).
EXACT = 0.9
# Repetitions are even when the 90th percentile of their lengths is at most REGULAR x
# the 10th; an even anchor covering REGULAR_COVERAGE of the best beats an uneven one.
REGULAR = 1.1
REGULAR_COVERAGE = 0.8
# Anchors covering at least this share of the best coverage are near ties.
NEAR_COVERAGE = 0.9
# Loops of different threads covering about the same work compare by how alike their
# repetitions are, in steps of this much.
ALIKE_STEP = 0.05
# Beyond this many ops the anchor is chosen on the middle of the sequence (the steady
# part of most programs), then its repetitions are found over all of it.
CHOOSE_ON = 200_000
# A CUDA graph launch wins among near ties when its repetitions are at least this alike.
GRAPH_ALIKE = 0.9


@dataclass
class Iterations(Record):
    source: str                    # one of SOURCES
    name: str                      # "step N", the anchor op's name, a graph's label
    cpu_start: np.ndarray          # host time each iteration began
    cpu_end: np.ndarray
    bounds: np.ndarray             # GPU-side boundaries, one more than iterations
    labels: list[str] = field(default_factory=list)
    how: str = ""                  # how they were found, for people
    period: int | None = None      # operations per repetition (median), repetition only
    within: str | None = None      # the one NVTX range holding them all, repetition only
    # A loop inside each iteration (a decode's tokens inside 'request N'): how many
    # repetitions of how many operations, starting at which, in the median iteration.
    inner: dict | None = None
    processes: int = 1             # processes that repeat the same NVTX range
    runner_up: str | None = None   # the structure that came close, for people
    # Loops run in turn that the iterations join (a benchmark of one kernel, then of
    # the next): each loop's iteration count, in order; empty for one loop.
    loops: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return self.cpu_start.size

    @property
    def durations(self) -> np.ndarray:
        return np.diff(self.bounds)

    def to_dict(self) -> dict:
        return {"source": self.source, "name": self.name, "count": len(self),
                "how": self.how, "period": self.period, "within": self.within,
                "inner": self.inner, "processes": self.processes,
                "runner_up": self.runner_up, "loops": self.loops}


def _user_ranges(trace: Trace, pids: np.ndarray) -> Table:
    nv = program_ranges(trace)
    return nv.rows(np.isin(nv["pid"], pids)) if len(nv) else nv


def _sequential(start: np.ndarray, end: np.ndarray) -> bool:
    return start.size < 2 or bool((start[1:] >= end[:-1]).all())


@dataclass
class _Level:
    """Ranges of one name repeated at one nesting level of one thread (and domain): a
    candidate for the iterations, ``start``/``end``/``labels`` in start order."""

    gtid: int
    domain: str
    base: str
    depth: int
    start: np.ndarray
    end: np.ndarray
    labels: list[str]
    numbered: bool
    reach: np.ndarray       # latest end of the ops launched before each start, the last end
    pid: int = -1

    @property
    def count(self) -> int:
        return self.start.size


def _first_appearance_groups(keys: list[np.ndarray]) -> np.ndarray:
    """A group number per row of *keys* (arrays of one length), groups numbered in order
    of first appearance (as pandas' groupby(sort=False) visits them)."""
    order = np.lexsort(keys[::-1])
    change = np.zeros(order.size, dtype=bool)
    change[:1] = True
    for k in keys:
        ordered = k[order]
        change[1:] |= ordered[1:] != ordered[:-1]
    # Each group's first row leads its run of the (stable) sort: groups ranked by it.
    rank = np.empty(int(change.sum()), dtype=np.int64)
    rank[np.argsort(order[change], kind="stable")] = np.arange(rank.size)
    group = np.empty(order.size, dtype=np.int64)
    group[order] = rank[np.cumsum(change) - 1]
    return group


def _distinct_strings(labels: Labels) -> tuple[np.ndarray, list[str]]:
    """Per row, a code of its string (str(): a missing value reads 'None', as the frame's
    strings did), and the strings: codes of equal strings are equal."""
    strings = [str(c) for c in labels.categories.tolist()] + ["None"]
    codes, distinct = factorize(np.array(strings, dtype=object))
    return codes[labels.codes], distinct.tolist()


def _used(labels: Labels) -> list[str]:
    """The distinct strings the rows of *labels* hold."""
    return [str(labels.categories[c]) for c in np.unique(labels.codes).tolist() if c >= 0]


def _check_named(trace: Trace, wanted: str) -> None:
    """UsageError unless some process of the report has an NVTX range that *wanted*
    selects as _nvtx_candidates does (``step``, ``step N``, ``domain:step``): a name
    given for the iterations that matches nothing is a mistake, never a report without
    iterations."""
    nv = program_ranges(trace)
    if nv.empty:
        raise UsageError(f"no NVTX range named '{wanted}' for {option('iteration')}: "
                         f"{trace.info.path} has no NVTX ranges; leave the option out to "
                         "find the iterations from the repeating GPU work")
    names = _used(nv.labels("name"))
    bases = {base_name(n) for n in names}
    wants = [wanted] + [wanted[len(d) + 1:] for d in _used(nv.labels("domain"))
                        if wanted.startswith(d + ":")]
    if wanted in names or any(base_name(w.removesuffix(" N")) in bases for w in wants):
        return
    raise UsageError(f"no NVTX range named '{wanted}' for {option('iteration')} in "
                     f"{trace.info.path} (ranges: {', '.join(sorted(bases)[:12])}); name "
                     "one of those, or leave the option out to find the iterations")


def _nvtx_candidates(trace: Trace, ops: DeviceOps, wanted: str | None,
                     seen: Launches | None = None) -> list[_Level]:
    """Groups of repeated ranges: one per (thread, domain, base name, depth), the
    likeliest iterations first (shallowest, then most instances, then earliest);
    *seen*: the device's launches read already."""
    nv = _user_ranges(trace, ops.pids)
    if nv.empty:
        if wanted is not None:
            _check_named(trace, wanted)     # another process may have it: not an error
        return []
    name_code, name_of = _distinct_strings(nv.labels("name"))
    domain_code, domain_of = _distinct_strings(nv.labels("domain"))
    base_code, base_of = factorize(np.array([base_name(n) for n in name_of], dtype=object))
    base_of = base_of.tolist()
    numbered = (np.array(base_of, dtype=object)[base_code] != np.array(name_of, dtype=object)
                )[name_code]
    base_code = base_code[name_code]                        # per row from here on
    gtid, depth = nv["gtid"], nv["depth"]
    keep = np.ones(len(nv), dtype=bool)
    if wanted is not None:
        want = base_name(wanted.removesuffix(" N"))
        # "domain:base": the base each domain would need to make *wanted*.
        needed = np.array([wanted[len(d) + 1:] if wanted.startswith(d + ":") else None
                           for d in domain_of], dtype=object)[domain_code]
        keep = ((np.array(base_of, dtype=object) == want)[base_code]
                | (np.array(base_of, dtype=object)[base_code] == needed)
                | (np.array(name_of, dtype=object) == wanted)[name_code])
        if not keep.any():
            _check_named(trace, wanted)     # another process may have it: not an error
            return []
    rows = np.flatnonzero(keep)
    group = _first_appearance_groups([k[rows] for k in (gtid, domain_code, base_code, depth)])
    if wanted is None:      # groups too small to repeat, left out before the loop over groups
        repeated = np.bincount(group)[group] >= MIN_ITERATIONS
        rows, group = rows[repeated], group[repeated]
    at = np.argsort(group, kind="stable")                # each group's rows, in order
    by_group = rows[at]
    bounds = np.flatnonzero(np.diff(group[at], prepend=-1, append=-1)).tolist()
    groups = []             # (rows, starts, ends) of the groups of sequential ranges
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        mine = by_group[lo:hi]
        mine = mine[np.argsort(nv["start"][mine], kind="quicksort")]   # as sort_values
        s, e = nv["start"][mine].astype(np.int64), nv["end"][mine].astype(np.int64)
        if _sequential(s, e):
            groups.append((mine, s, e))
    levels = []
    if groups:
        # The launches before each start and end (and before +inf: all of them), and the
        # latest end of the work launched before each (map_to_gpu), in one walk over
        # the ops.
        times = np.concatenate([np.r_[s, e] for _, s, e in groups] + [[np.inf]])
        launched, reach = (seen or ops).launched_by(times)
        at = 0
        for mine, s, e in groups:
            n = s.size
            launches = launched[at + n:at + 2 * n] - launched[at:at + n]
            ends_before = np.r_[reach[at:at + n], reach[at + 2 * n - 1]]
            at += 2 * n
            if wanted is None and ((launches > 0).mean() < 0.5
                                   or launches.sum() < MIN_LAUNCH_SHARE * launched[-1]):
                continue        # host-only or marginal ranges (logging, setup): not steps
            first = int(mine[0])
            levels.append(_Level(int(gtid[first]), domain_of[domain_code[first]],
                                 base_of[base_code[first]], int(depth[first]), s, e,
                                 [name_of[c] for c in name_code[mine].tolist()],
                                 bool(numbered[mine].any()), ends_before,
                                 int(nv["pid"][first])))
    if not levels and wanted is not None:
        raise UsageError(f"the NVTX range '{wanted}' never repeats one instance after "
                         "another on one thread; pick a range that marks one "
                         f"iteration with {option('iteration')}")
    # Stable, as pandas' sort of several columns.
    return sorted(levels, key=lambda c: (c.depth, -c.count, int(c.start[0])))


def codes_of(trace: Trace, src: np.ndarray, row: np.ndarray) -> np.ndarray:
    """A code per op given by (source, row) naming what it is (the kernel, by its full
    demangled name: template instances apart; copy kind; memset; CUDA graph)."""
    kernels = trace.table("kernels")
    kernel = kernels.labels("demangled" if "demangled" in kernels else "name")
    width = kernel.categories.size + 1
    m_codes = trace.table("memcpys").labels("kind").codes.astype(np.int64)
    out = np.full(src.size, -1, dtype=np.int64)
    sel = src == 0
    out[sel] = kernel.codes[row[sel]]
    sel = src == 1
    out[sel] = width + m_codes[row[sel]]
    memset_code = 2 * width + 1 + (m_codes.max(initial=0) if m_codes.size else 0)
    out[src == 2] = memset_code
    sel = src == 3                  # graph executions: one code per graph
    out[sel] = memset_code + 1 + trace.table("graphs")["graph_id"][row[sel]].astype(np.int64)
    return out


@dataclass
class Repetition:
    """Repetitions found in a sequence of op codes: ``starts`` (indices into it, one per
    repetition), the median ``period``, the index after the last repetition (``stop``),
    how alike consecutive repetitions are (``alike``: mean share of matching ops) and
    whether they are all the same (``exact``)."""

    starts: np.ndarray
    period: int
    stop: int
    alike: float
    exact: bool
    anchor: int                    # the anchor's code
    graph: bool = False            # the anchor is a CUDA graph launch
    # Loops run in turn that the repetitions join (_in_turn), in order: (count, period,
    # the index of the first one's start); empty for one loop.
    loops: tuple[tuple[int, int, int], ...] = ()


def _pair_alike(codes: np.ndarray, starts: np.ndarray, stop: int) -> np.ndarray:
    """For each pair of consecutive repetitions beginning at *starts* (the last one ends
    at *stop*): the share of the longer one's first COMPARED ops that match the other's
    op by op (repetitions of other lengths match less); whether the pair is identical;
    how many ops the share is of (the longer one's, at most COMPARED)."""
    lengths = np.diff(np.r_[starts, stop])
    if starts.size < 2:
        return np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    n = np.minimum(np.minimum(lengths[:-1], lengths[1:]), COMPARED)
    longer = np.minimum(np.maximum(lengths[:-1], lengths[1:]), COMPARED)
    offsets = np.r_[0, np.cumsum(n)[:-1]]
    total = int(n.sum())
    within = np.arange(total) - np.repeat(offsets, n)
    a = np.repeat(starts[:-1], n) + within
    b = np.repeat(starts[1:], n) + within
    same = (codes[a] == codes[b]).astype(np.float64)
    matched = np.add.reduceat(same, offsets) if total else np.zeros(n.size)
    share = matched / np.maximum(longer, 1)
    identical = (share == 1.0) & (lengths[:-1] == lengths[1:])
    return share, identical, longer


def _longest_alike_run(share: np.ndarray, lengths: np.ndarray) -> tuple[int, int]:
    """[first, last] pairs of the longest run of alike pairs (of repetitions of
    *lengths*). Up to BRIDGED unlike pairs between alike ones are bridged, when the
    repetitions on both sides are about as long (one odd repetition does not cut a loop,
    but a loop of another length is another loop)."""
    good = share >= ALIKE
    if not good.any():
        return -1, -1
    # An unlike stretch is bridged when it is short and alike pairs surround it.
    edges = np.diff(np.r_[1, good.astype(np.int8), 1])
    bad_start, bad_end = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
    short = (bad_end - bad_start <= BRIDGED) & (bad_start > 0) & (bad_end < good.size)
    before = lengths[np.maximum(bad_start, 0)]              # first of the odd pair
    after = lengths[np.minimum(bad_end + 1, lengths.size - 1)]   # second of the next
    short &= (np.minimum(before, after) * 1.5 >= np.maximum(before, after))
    if short.any():
        mark = np.zeros(good.size + 1, dtype=np.int64)
        np.add.at(mark, bad_start[short], 1)
        np.add.at(mark, bad_end[short], -1)
        good = good | (np.cumsum(mark)[:-1] > 0)
    edges = np.diff(np.r_[0, good.astype(np.int8), 0])
    run_start = np.flatnonzero(edges == 1)
    run_end = np.flatnonzero(edges == -1) - 1
    k = int(np.argmax(run_end - run_start))
    return int(run_start[k]), int(run_end[k])


def _alike_runs(share: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every run of alike pairs (_longest_alike_run's, bridged alike), as [first, last]
    pair indexes: (firsts, lasts)."""
    good = share >= ALIKE
    if not good.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    edges = np.diff(np.r_[1, good.astype(np.int8), 1])
    bad_start, bad_end = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
    short = (bad_end - bad_start <= BRIDGED) & (bad_start > 0) & (bad_end < good.size)
    before = lengths[np.maximum(bad_start, 0)]
    after = lengths[np.minimum(bad_end + 1, lengths.size - 1)]
    short &= (np.minimum(before, after) * 1.5 >= np.maximum(before, after))
    if short.any():
        mark = np.zeros(good.size + 1, dtype=np.int64)
        np.add.at(mark, bad_start[short], 1)
        np.add.at(mark, bad_end[short], -1)
        good = good | (np.cumsum(mark)[:-1] > 0)
    edges = np.diff(np.r_[0, good.astype(np.int8), 0])
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1


def _last_stop(codes: np.ndarray, positions: np.ndarray, period: int) -> int:
    """The index after the last repetition (at positions[-1]): a period's length on, but
    no further than its last op that matches the repetition before it at the same
    offset. The loop ends inside that length (the last iteration is the shorter one);
    what follows is the program's tail (the result copied back, the buffers freed), not
    part of an iteration."""
    a = int(positions[-1])
    stop = min(a + period, codes.size)
    if positions.size < 2:
        return stop
    prev = int(positions[-2])
    n = min(stop - a, a - prev)
    same = np.flatnonzero(codes[a:a + n] == codes[prev:prev + n])
    # (Beyond the previous repetition's length there is nothing to compare: kept.)
    if not same.size or (n < stop - a and same.size == n):
        return stop
    return a + int(same[-1]) + 1


def _ranges(firsts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """np.concatenate of np.arange(first, stop) for each pair, without a call each."""
    sizes = np.maximum(stops - firsts, 0)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    return np.arange(int(sizes.sum())) - np.repeat(offsets - firsts, sizes)


def _segment_medians(values: np.ndarray, firsts: np.ndarray, stops: np.ndarray
                     ) -> np.ndarray:
    """np.median of each values[first:stop] (none empty), in one sort: a loop's anchor
    can have thousands of runs, and a median each is a Python call each."""
    sizes = stops - firsts
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    seg = np.repeat(np.arange(sizes.size), sizes)
    taken = values[_ranges(firsts, stops)]
    ordered = taken[np.lexsort((taken, seg))].astype(np.float64)
    return (ordered[offsets + (sizes - 1) // 2] + ordered[offsets + sizes // 2]) / 2


def _anchor_run(codes: np.ndarray, positions: np.ndarray
                ) -> tuple[np.ndarray, int, float] | None:
    """The repetitions of one loop that start at the occurrences *positions* of one
    code: the longest run of alike repetitions, and every other run as long (at least
    MIN_ITERATIONS) whose repetitions are about as long: the same loop, resumed after
    other work (an evaluation every epoch, a checkpoint), which joins the repetition
    before it. Returns (their starts, the index after the last, how alike they are: the
    share of matching ops over all the pairs, so that a short pair weighs little)."""
    if positions.size < MIN_ITERATIONS:
        return None
    spacing = np.diff(positions)
    stop = _last_stop(codes, positions, int(median_of(spacing)))
    share, _, weight = _pair_alike(codes, positions, stop)
    lengths = np.diff(np.r_[positions, stop])
    firsts, lasts = _alike_runs(share, lengths)
    long_enough = lasts - firsts + 2 >= MIN_ITERATIONS
    firsts, lasts = firsts[long_enough], lasts[long_enough]
    if not firsts.size:
        return None
    k = int(np.argmax(lasts - firsts))
    runs = _segment_medians(lengths, firsts, lasts + 2)
    period = float(runs[k])
    same = (runs <= 1.5 * period) & (period <= 1.5 * runs)
    chosen = np.flatnonzero(same)
    starts = positions[_ranges(firsts[chosen], lasts[chosen] + 2)]
    last = int(lasts[chosen[-1]])
    end = int(positions[last + 2]) if last + 2 < positions.size else stop
    pairs = _ranges(firsts[chosen], lasts[chosen] + 1)
    w = weight[pairs]
    alike = float((share[pairs] * w).sum() / max(int(w.sum()), 1))
    return starts, end, alike


def repetition(codes: np.ndarray, pause_before: np.ndarray | None = None,
               is_graph: np.ndarray | None = None, weight: np.ndarray | None = None
               ) -> Repetition | None:
    """Repetitions in a sequence of op codes (module doc, 3.). *pause_before*: the host's
    pause before each op (its launch minus the previous op's), to prefer the anchor at a
    loop's natural boundary; *is_graph*: which ops are CUDA graph launches; *weight*:
    what each op stands for of the program (its share of the operations and of the
    GPU's work, ``coverage_weights``): the loop that covers most of it wins, not the one
    of most operations (200 graph replays carry a program more than the 288 kernels of
    its eager warm-up). Without weights, every op counts one."""
    n = codes.size
    if n < 2 * MIN_ITERATIONS:
        return None
    lo = 0
    if n > CHOOSE_ON:                      # choose the anchor on the middle of the sequence
        lo = (n - CHOOSE_ON) // 2
    window = codes[lo:lo + CHOOSE_ON]
    covered = (np.arange(window.size + 1, dtype=np.float64) if weight is None
               else np.r_[0.0, np.cumsum(weight[lo:lo + CHOOSE_ON], dtype=np.float64)])
    values, inverse = sorted_codes(window)
    counts = np.bincount(inverse, minlength=values.size)
    by_code = np.argsort(inverse, kind="stable")
    first_of = np.r_[0, np.cumsum(counts)[:-1]]
    scored = []
    for ci in np.argsort(-counts, kind="stable")[:MAX_ANCHORS].tolist():
        if counts[ci] < MIN_ITERATIONS:
            break
        positions = by_code[first_of[ci]:first_of[ci] + counts[ci]]
        found = _anchor_run(window, positions)
        if found is None:
            continue
        starts, end, alike = found
        coverage = float(covered[end] - covered[int(starts[0])])
        at = lo + starts
        at = at[at > 0]
        pause = (float(np.median(pause_before[at])) if pause_before is not None and at.size
                 else 0.0)
        graph = bool(is_graph[lo + starts[0]]) if is_graph is not None else False
        lengths = np.diff(np.r_[starts, end])
        regular = bool(np.percentile(lengths, 90) <= REGULAR * max(
            float(np.percentile(lengths, 10)), 1.0))
        # A graph launch that starts alike repetitions is the iteration (module doc).
        scored.append((coverage, graph and alike >= GRAPH_ALIKE, round(alike / 0.02), pause,
                       int(values[ci]), regular))
    if not scored:
        return None
    best = max(s[0] for s in scored)
    near = [s for s in scored if s[0] >= NEAR_COVERAGE * best]
    choice = max(near, key=lambda s: s[1:4])
    if not choice[5]:
        # Repetitions of uneven length (a forward pass that starts both the evaluation's
        # forwards and the training steps) lose to an anchor whose repetitions are even
        # and about as alike (the training steps, the evaluations inside two of them)
        # where it covers nearly as much: what it leaves out is a start-up's work.
        even = [s for s in scored if s[5] and s[0] >= REGULAR_COVERAGE * best
                and s[2] >= choice[2]]
        if even:
            choice = max(even, key=lambda s: (s[0], s[1:4]))
    anchor = choice[4]
    # The chosen anchor's repetitions over the whole sequence.
    found = _anchor_run(codes, np.flatnonzero(codes == anchor))
    if found is None:
        return None
    starts, stop, alike = found
    starts, stop = _rotate(codes, starts, stop)
    _, identical, _ = _pair_alike(codes, starts, stop)
    # The same ops every time, but for a few odd ones (a first one that differs, a log
    # every N: two unlike pairs in a row): a repeating sequence. One that changes for good
    # (a lone unlike pair between like ones: a kernel variant for a longer KV cache)
    # drifts.
    changes = (~identical[1:-1] & identical[:-2] & identical[2:]).any() \
        if identical.size >= 3 else False
    exact = bool(identical.mean() >= EXACT and not changes) if identical.size else True
    graph = bool(is_graph[np.flatnonzero(codes == anchor)[:1]].any()) \
        if is_graph is not None else False
    return Repetition(starts, int(median_of(np.diff(np.r_[starts, stop]))), stop, alike,
                      exact, anchor, graph)


def coverage_weights(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per op (in launch order): its share of the operations plus its share of the GPU's
    work (its duration over all ops'): what a loop covering it covers of the program.
    Either alone misleads: operations favour an eager warm-up's many small kernels over
    the CUDA graph replays that follow it, GPU time one long kernel. (The host's wall
    time between launches does too: a start-up's slow weight copies, a verification
    after the loop.)"""
    dur = np.maximum(np.nan_to_num(end - start), 0.0)
    return 1.0 / max(dur.size, 1) + dur / max(float(dur.sum()), 1.0)


def _rotate(codes: np.ndarray, starts: np.ndarray, stop: int) -> tuple[np.ndarray, int]:
    """Repetitions moved to start where the loop does: the anchor may sit inside each
    repetition (a loop whose only once-per-iteration op comes last), so the ops before
    the first anchor that match those before the second belong to the first repetition.
    Every start moves back by as many ops, when the op found there is the same in nearly
    every repetition; then whole copies of the last repetition that follow are added
    (the loop's last iteration, which the anchor ended)."""
    if starts.size < 2:
        return starts, stop
    first, second = int(starts[0]), int(starts[1])
    span = min(second - first - 1, first)
    if span <= 0:
        return starts, stop
    before_first = codes[first - span:first][::-1]
    before_second = codes[second - span:second][::-1]
    differ = np.flatnonzero(before_first != before_second)
    back = int(differ[0]) if differ.size else span
    if back == 0:
        return starts, stop
    moved = starts - back
    if float(np.mean(codes[moved] == codes[moved[0]])) < EXACT:
        return starts, stop
    starts, stop = moved, stop - back
    for _ in range(MIN_ITERATIONS):
        length = stop - int(starts[-1])
        if length <= 0 or stop + length > codes.size or not np.array_equal(
                codes[stop:stop + length], codes[int(starts[-1]):stop]):
            break
        starts, stop = np.r_[starts, stop], stop + length
    return starts, stop


def driver(ops: DeviceOps, order: np.ndarray | None = None) -> tuple[int, np.ndarray]:
    """The thread that drives the device: the one whose ops kept it busy longest (not
    the one that launched most: an autotuner launches thousands of tiny kernels); and
    the launching thread of each op of *order* (default: the launch order)."""
    order = ops.launch_order() if order is None else order
    rows = ops.take(order)
    gtid = ops.threads_of(rows.source, rows.row)
    if not gtid.size:
        return -1, gtid
    (threads,), busy = group_sums([gtid], rows.end - rows.start)
    return int(threads[int(np.argmax(busy))]), gtid


@dataclass
class _MainOps:
    """The main launching thread's ops in launch order: their positions among the
    device's ops, codes, launch times, host pauses before each, which are graph
    launches, and what each stands for of the program (coverage_weights)."""

    seq: np.ndarray
    codes: np.ndarray
    launch: np.ndarray
    is_graph: np.ndarray
    weight: np.ndarray
    ops: DeviceOps | None = None        # the device's, for when some of them ran (started)
    # Every op of the device (all threads) in launch order: launch times and the running
    # sum of their weights, for what a loop's time span covers of the device's work.
    device_launch: np.ndarray | None = None
    device_covered: np.ndarray | None = None

    def started(self, at: np.ndarray) -> np.ndarray:
        """When the ops at *at* (indexes into seq) ran on the GPU, as float64 (their
        launches where the device's ops are not at hand): read when asked, not held
        for every op."""
        if self.ops is None:
            return self.launch[at]
        return self.ops.take(self.seq[at]).start.astype(np.float64)

    @property
    def pause(self) -> np.ndarray:
        """The host's pause before each op (its launch minus the previous one's): made
        when asked, not held (80 MB at ten million ops)."""
        return np.r_[0.0, np.diff(self.launch)]

    def launched(self, lo: float, hi: float) -> int:
        """How many of the ops were launched in [lo, hi)."""
        a, b = np.searchsorted(self.launch, [lo, hi]).tolist()
        return b - a


# Launching threads whose loop is looked for: the one that kept the GPU busy longest,
# the one that launched most, and the one that launched most CUDA graphs (XLA runs a
# jitted step as a graph from the Python thread, while its compile threads run
# autotuning kernels that can keep the GPU busier).
def _launching_threads(gtid: np.ndarray, dur: np.ndarray, source: np.ndarray
                       ) -> list[int]:
    """The candidate threads (module comment), from the launching thread, the GPU
    duration and the kind of each op."""
    (threads,), busy = group_sums([gtid], dur)
    (_,), launched = group_sums([gtid])
    graphs = np.array([int(((gtid == g) & (source == 3)).sum()) for g in threads])
    picks = [int(threads[int(np.argmax(busy))]), int(threads[int(np.argmax(launched))])]
    if graphs.max(initial=0) >= MIN_ITERATIONS:
        picks.append(int(threads[int(np.argmax(graphs))]))
    return list(dict.fromkeys(p for p in picks if p >= 0))


# An autotuner's own kernels (XLA times candidate kernels between a delay kernel and
# red-zone checks of their buffers): a thread where these are more than a few of its
# launches is a compiler's, whatever its loops (XLA's convolution autotuning runs one
# red-zone check per 50 to 120 candidate kernels: cuDNN's transforms, FFTs, GEMMs).
AUTOTUNER_KERNEL = re.compile(r"RedzoneAllocator|^DelayKernel|xla_fp_comparison|redzone",
                              re.IGNORECASE)
AUTOTUNER_SHARE = 0.005


def _main_ops(trace: Trace, ops: DeviceOps, seen: Launches | None = None
              ) -> list[_MainOps]:
    """The candidate launching threads' ops (_launching_threads), the device's busiest
    thread first; each op weighed against the whole device (coverage_weights over all
    its ops: the threads' loops compare). The device's ops are read once, in position
    order; only each candidate thread's are put in launch order, and the whole device's
    only where threads' loops compare (a million ops: each column 8 MB that a fresh
    process pays for in page faults)."""
    if len(ops) < 2 * MIN_ITERATIONS:
        return []
    if seen is None or seen.every is None or seen.launched is None:
        seen = Launches(ops)
    every, launched = seen.every, seen.launched
    if every is None or launched is None:
        return []
    known = ~np.isnan(launched)
    n_known = int(known.sum())
    if n_known < 2 * MIN_ITERATIONS:
        return []
    # (In place: at ten million ops each temporary is 80 MB more at the peak.)
    gtid = ops.threads_of(every.source, every.row)
    gtid[~known] = -2
    dur = every.end - every.start
    np.maximum(dur, 0, out=dur)
    threads = _launching_threads(gtid[known] if n_known < gtid.size else gtid,
                                 dur[known] if n_known < dur.size else dur,
                                 every.source[known] if n_known < dur.size else every.source)
    total_ops, total_ns = float(n_known), max(float(dur[known].sum()), 1.0)
    device_launch = covered = None
    if len(threads) > 1:
        # The running weight of every op in launch order (_covers_device).
        order = ops.launch_sorted(launched)
        device_launch = launched[order]
        covered = np.r_[0.0, np.cumsum(1.0 / total_ops + dur[order] / total_ns)]
        del order
    # Each candidate thread's positions, then no thread column (80 MB at ten million).
    positions = [np.flatnonzero(gtid == main) for main in threads]
    del gtid
    out = []
    while positions:
        mine = positions.pop(0)
        if mine.size < 2 * MIN_ITERATIONS:
            continue
        at = mine[np.argsort(launched[mine], kind="stable")]      # in launch order
        del mine
        src, row = every.source[at], every.row[at]
        # (A thread that replays CUDA graphs runs the program's steps: never a tuner's.)
        if len(threads) > 1 and not (src == 3).any() and _autotuner(trace, src, row):
            continue
        launch = launched[at]
        weight = np.divide(dur[at], total_ns)
        weight += 1.0 / total_ops
        out.append(_MainOps(at, codes_of(trace, src, row), launch, src == 3, weight, ops,
                            device_launch, covered))
    return out


def _autotuner(trace: Trace, source: np.ndarray, row: np.ndarray) -> bool:
    """Are AUTOTUNER_SHARE of the ops given by (*source*, *row*) an autotuner's own
    kernels?"""
    kernels = trace.table("kernels")
    if not len(kernels):
        return False
    names = kernels.labels("name")
    tuned = names.matching(AUTOTUNER_KERNEL)
    mine = row[source == 0]
    return bool(tuned[mine].sum() >= AUTOTUNER_SHARE * source.size)


def _ops_repetition(main: _MainOps) -> Repetition | None:
    """Repetitions of the main launching thread's ops."""
    codes, pause, is_graph, weight = main.codes, main.pause, main.is_graph, main.weight
    found = repetition(codes, pause, is_graph, weight)
    graphs, launches = np.unique(codes[is_graph], return_counts=True)
    repeated = graphs[launches >= MIN_ITERATIONS]
    if repeated.size > 1:
        # A new executable per input shape (XLA, torch.compile) is another graph with the
        # same role: the graphs that repeat, taken as one operation, may repeat further.
        merged = codes.copy()
        merged[is_graph & np.isin(codes, repeated)] = repeated[0]
        other = repetition(merged, pause, is_graph, weight)
        if other is not None and (found is None or _covers(other, weight) > _covers(
                found, weight) / (NEAR_COVERAGE if other.alike >= found.alike else 1.0)):
            found = other
    return found


def _spanned(main: _MainOps, rep: Repetition) -> float:
    """The GPU time the repetitions of *rep* span (from each one's first operation to
    the next one's: the host may queue them all at once), each counted up to 3x the
    median one: a loop resumed after other work (an evaluation between epochs) does not
    span that work."""
    at = np.r_[rep.starts, min(rep.stop, main.seq.size - 1)]
    each = np.diff(main.started(at))
    if not each.size:
        return 0.0
    return float(np.minimum(each, 3 * np.median(each)).sum())


def _covers(rep: Repetition, weight: np.ndarray) -> float:
    return float(weight[int(rep.starts[0]):rep.stop].sum())


def _covers_device(main: _MainOps, rep: Repetition) -> float:
    """What the loop's time span covers of the device's work, every thread's launches
    included (XLA launches a step's graphs from one thread and its convolutions from
    another: the loop of either covers both)."""
    if main.device_launch is None or main.device_covered is None:
        return _covers(rep, main.weight)
    first = main.launch[int(rep.starts[0])]
    last = main.launch[min(rep.stop, main.launch.size) - 1]
    a, b = np.searchsorted(main.device_launch, [first, last], side="left").tolist()
    b = int(np.searchsorted(main.device_launch, last, side="right"))
    return float(main.device_covered[b] - main.device_covered[a])


# Loops run in turn (_in_turn): a loop of at least IN_TURN_SHARE of the winner's
# operations that spans as much of its time joins it, when at most IN_TURN_GAP of
# either's periods of other ops lie between them (an evaluation of a few steps after
# training, a set-up's few uploads: far fewer operations, they stay out).
IN_TURN_SHARE = 0.5
IN_TURN_GAP = 2
MAX_IN_TURN = 16


def _in_turn(main: _MainOps, rep: Repetition) -> Repetition:
    """*rep* joined by the loops of about its size (IN_TURN_SHARE of its operations and
    of the time it spans) that run right before or after it on the same thread, one
    after another: a program that runs its loops in turn (a benchmark of one kernel,
    then of another), whose steady state holds them all. Their repetitions become one
    list of iterations."""
    size, span = rep.stop - int(rep.starts[0]), _spanned(main, rep)

    def weighs(r: Repetition) -> bool:
        return (r.stop - int(r.starts[0]) >= IN_TURN_SHARE * size
                and _spanned(main, r) >= IN_TURN_SHARE * span)

    parts, pause = [rep], main.pause
    for _ in range(MAX_IN_TURN):
        first, last = parts[0], parts[-1]
        joined = False
        a = int(first.starts[0])
        if a >= 2 * MIN_ITERATIONS:
            before = repetition(main.codes[:a], pause[:a], main.is_graph[:a],
                                main.weight[:a])
            if (before is not None and a - before.stop <= IN_TURN_GAP * max(
                    before.period, first.period) and weighs(before)):
                parts.insert(0, before)
                joined = True
        b = last.stop
        if main.codes.size - b >= 2 * MIN_ITERATIONS:
            after = repetition(main.codes[b:], pause[b:], main.is_graph[b:],
                               main.weight[b:])
            if after is not None:
                after = Repetition(after.starts + b, after.period, after.stop + b,
                                   after.alike, after.exact, after.anchor, after.graph)
                if (int(after.starts[0]) - b <= IN_TURN_GAP * max(after.period, last.period)
                        and weighs(after)):
                    parts.append(after)
                    joined = True
        if not joined:
            break
    if len(parts) == 1:
        return rep
    starts = np.concatenate([p.starts for p in parts])
    counts = np.array([p.starts.size for p in parts], dtype=np.float64)
    return Repetition(starts, int(median_of(np.diff(np.r_[starts, parts[-1].stop]))),
                      parts[-1].stop,
                      float((np.array([p.alike for p in parts]) * counts).sum() / counts.sum()),
                      False, rep.anchor, rep.graph,
                      tuple((p.starts.size, p.period, int(p.starts[0])) for p in parts))


def map_to_gpu(ops: DeviceOps, cpu_start: np.ndarray, cpu_end_last: int,
               window: tuple[int, int], reach: np.ndarray | None = None) -> np.ndarray:
    """GPU-side boundaries of iterations that began on the host at cpu_start; *reach*:
    the latest end of the ops launched before each start and before the last end, when
    known (else found here)."""
    lo, hi = window
    if reach is None:
        # The starts and the last end asked in one walk over the ops (each walks them all).
        reach = ops.ends_launched_before(np.r_[cpu_start, cpu_end_last])
    b = np.maximum(cpu_start, reach[:-1])
    last = max(cpu_end_last, int(reach[-1]))
    bounds = np.clip(np.r_[b, last], lo, hi).astype(np.int64)
    return np.maximum.accumulate(bounds)


def _within(trace: Trace, ops: DeviceOps, gtid: int, first: int, last: int) -> str | None:
    """The innermost NVTX range of the program on thread *gtid* that holds [first, last]."""
    nv = _user_ranges(trace, ops.pids)
    if nv.empty:
        return None
    mine = nv.rows((nv["gtid"] == gtid) & (nv["start"] <= first) & (nv["end"] >= last))
    if mine.empty:
        return None
    deepest = int(np.argsort(mine["depth"], kind="quicksort")[-1])    # as sort_values
    return str(mine.labels("name")[deepest])


def find(trace: Trace, ops: DeviceOps, window: tuple[int, int], *,
         iteration: str | None = None) -> Iterations | None:
    """The iterations of one device (module doc); *iteration*: the NVTX range that marks
    them, 'none' for none, None to find them.

    Every candidate structure is weighed by what it covers of the main launching
    thread's operations: the program's own NVTX level, the repetition of its GPU work
    (graph replays and eager work weighed by their GPU time too: repetition). The NVTX
    level wins unless the repetition covers clearly more (NVTX_MARGIN); the other is
    named as the runner-up when it came close and is not the same loop seen otherwise.
    A loop inside each iteration (tokens inside requests) is named too (``inner``)."""
    if iteration == "none":
        return None
    # The device's launches, read once for every candidate below.
    seen = Launches(ops) if len(ops) else None
    cands = _nvtx_candidates(trace, ops, iteration, seen)
    marked = _from_level(cands[0], cands, ops, window) if cands else None
    if iteration is not None:
        return marked
    mains = _main_ops(trace, ops, seen)
    if seen is not None:
        seen.release()          # what remains asked of it: launched_by
    # Each candidate thread's loop, scored by what it covers of the device's operations
    # and GPU time, and of the time the candidates' loops span (a compile thread's
    # autotuning burst, an evaluation's eager work, covers much work in little time; the
    # training loop spans the run). A loop of CUDA graph replays covers its graphs'
    # whole steps: its share counts twice (XLA runs a jitted step as one graph).
    loops = [(c, found) for c in mains
             if (found := _ops_repetition(c)) is not None]
    if not loops:
        return marked
    spans = [_spanned(c, found) for c, found in loops]
    widest = max(max(spans), 1.0)
    covers = [_covers(found, c.weight) * (2.0 if found.graph else 1.0)
              for c, found in loops]
    scores = [v + s / widest for v, s in zip(covers, spans, strict=True)]
    # Loops whose spans cover about as much of the device's work are the same program
    # seen from different threads: the one whose iterations repeat most alike marks it
    # (150 identical steps of graphs, not 5 'epochs' of another thread's kernels).
    spread = [_covers_device(c, found) for c, found in loops] if len(loops) > 1 else [1.0]
    near = [i for i, v in enumerate(spread) if v >= NEAR_COVERAGE * max(spread)]
    best = max(range(len(loops)), key=lambda i: scores[i])
    alike = max(near, key=lambda i: (round(loops[i][1].alike / ALIKE_STEP), scores[i]))
    if alike != best and loops[alike][1].starts.size > loops[best][1].starts.size:
        best = alike
    main, rep = loops[best]
    rep = _in_turn(main, rep)
    repeated = _from_repetition(trace, ops, window, main, rep, seen)
    if marked is None:
        chosen, other = repeated, None
    else:
        # Against the user's marks, operations alone: GPU time would let a slow copy of
        # results after the marked loop outweigh the loop.
        by_ranges = main.launched(float(marked.cpu_start[0]), float(marked.cpu_end[-1]))
        by_ops = rep.stop - int(rep.starts[0])
        if by_ops * NVTX_MARGIN > by_ranges:
            chosen, other, near = repeated, marked, by_ranges >= RUNNER_UP * by_ops
        else:
            chosen, other, near = marked, repeated, by_ops >= RUNNER_UP * by_ranges
        other = other if near else None
    chosen.inner = _inner(trace, ops, main, chosen)
    if other is not None and not _same_loop(chosen, other):
        chosen.runner_up = _phrase(other)
    return chosen


def _same_loop(chosen: Iterations, other: Iterations) -> bool:
    """Is *other* the chosen loop seen another way (about as many iterations) or a loop
    inside it (more, shorter iterations: its layers, its tokens), not a rival?"""
    return 3 * len(other) >= 2 * len(chosen)


# The program's NVTX level wins unless the repetition of its GPU work covers twice as many
# operations (1 / NVTX_MARGIN times): a user's own marks say what an iteration is, and
# a measured loop marked after an unmarked warm-up of the same loop stays the one.
NVTX_MARGIN = 0.5
# The losing structure is named beside the winner when it covered this share of it.
RUNNER_UP = 0.8
# A loop inside each iteration is named when it repeats this often and covers this
# share of the iteration's operations and GPU work.
INNER_MIN = 8
INNER_COVERAGE = 0.75


def _from_level(c: _Level, cands: list[_Level], ops: DeviceOps, window: tuple[int, int]
                ) -> Iterations:
    shown = shown_name(c.base, c.numbered)
    bounds = map_to_gpu(ops, c.start, int(c.end[-1]), window, c.reach)
    # The same range repeated by other processes on this device (two jobs sharing it).
    processes = len({x.pid for x in cands if (x.domain, x.base, x.depth)
                     == (c.domain, c.base, c.depth)} | {c.pid})
    how = (f"NVTX range '{shown}'" + (f" (domain {c.domain})" if c.domain else "")
           + f", {c.count} instances"
           + (f" (and as many in each of {processes - 1} other process"
              f"{'es' if processes > 2 else ''})" if processes > 1 else ""))
    return Iterations("nvtx", shown, c.start, c.end, bounds, c.labels, how,
                      processes=processes)


def _from_repetition(trace: Trace, ops: DeviceOps, window: tuple[int, int],
                     main: _MainOps, rep: Repetition, seen: Launches | None = None
                     ) -> Iterations:
    seq, launch = main.seq, main.launch
    starts = seq[rep.starts]
    cpu_start = launch[rep.starts].astype(np.int64)
    last_op = seq[rep.stop - 1]
    end_last = int(np.nan_to_num(ops.gather("api_end", [last_op])[0]))
    reach = seen.launched_by(np.r_[cpu_start, end_last])[1] if seen is not None else None
    bounds = map_to_gpu(ops, cpu_start, end_last, window, reach)
    name = ops.names(trace, np.array([starts[0]]))[0]
    is_graph = rep.graph
    source = "graph" if is_graph else ("kernels" if rep.exact else "approximate")
    gtid = int(ops.threads_of(*ops.take(starts[:1])[2:4])[0])
    within = _within(trace, ops, gtid, int(cpu_start[0]), int(cpu_start[-1]))
    what = (f"{len(cpu_start)} launches of {_short(name)}" if is_graph and rep.period == 1
            else f"{len(cpu_start)} repetitions of {rep.period} operations"
            + ("" if rep.exact else " (approximately)") + f" starting at '{_short(name)}'")
    if rep.loops:
        firsts = ops.names(trace, seq[[at for _, _, at in rep.loops]])
        what = (f"{len(rep.loops)} loops in turn, "
                + ", then ".join(f"{n} repetitions of {period} operations starting at "
                                 f"'{_short(first)}'" for (n, period, _), first
                                 in zip(rep.loops, firsts, strict=True)))
    how = (("CUDA graph replays: " if is_graph else "repeating GPU work: ") + what
           + (f", inside NVTX range '{within}'" if within else "")
           + " (no NVTX range marks the iterations; name one with --iteration)")
    cpu_end = np.r_[cpu_start[1:], end_last]
    return Iterations(source, name, cpu_start, cpu_end, bounds, [], how, rep.period, within,
                      loops=[n for n, _, _ in rep.loops])


def _phrase(it: Iterations) -> str:
    """'NVTX range 'step N' (40)', 'repeating GPU work (120 x 35 operations)'."""
    if it.source == "nvtx":
        return f"NVTX range '{it.name}' ({len(it)})"
    if it.source == "graph":
        return f"CUDA graph replays ({len(it)})"
    return f"repeating GPU work ({len(it)} x {it.period} operations)"


def _inner(trace: Trace, ops: DeviceOps, main: _MainOps, it: Iterations) -> dict | None:
    """The loop inside the middle iteration of *it*, when one repeats there (module
    doc): {'count', 'period', 'name'}; None when none does."""
    if len(it) < 1 or it.source == "graph":
        return None
    k = len(it) // 2
    a, b = np.searchsorted(main.launch, [it.cpu_start[k], it.cpu_end[k]]).tolist()
    if b - a < 2 * INNER_MIN:
        return None
    rep = repetition(main.codes[a:b], main.pause[a:b], main.is_graph[a:b],
                     main.weight[a:b])
    if rep is None or rep.starts.size < INNER_MIN or rep.period * 2 > b - a:
        return None
    share = _covers(rep, main.weight[a:b]) / max(float(main.weight[a:b].sum()), 1e-12)
    if share < INNER_COVERAGE:
        return None
    name = ops.names(trace, main.seq[a + rep.starts[:1]])[0]
    return {"count": int(rep.starts.size), "period": int(rep.period), "name": _short(name)}


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."
