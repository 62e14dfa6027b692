"""A device's timeline as phases: start-up, warm-up iterations, steady state, tail.

The iterations come from the program model (gpugap.program.iterations: NVTX ranges, CUDA
graph replays, repeating GPU work); their GPU-side boundaries tile the timeline:
start-up is [device start, b_0), iteration i is [b_i, b_i+1), the tail follows the last
one. Warm-up: the first iteration, and those right after it that took more than
``warmup_factor`` x the median iteration. Without iterations, start-up lasts until the
end of the last module-load call before regular work (and at least until the first GPU
operation); the rest is one steady window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import CODE
from gpugap.accounting.host import MODULE_LOAD, SYNCHRONIZE
from gpugap.accounting.work import DeviceWork
from gpugap.memory import isin
from gpugap.program import DeviceProgram
from gpugap.program.compilation import CompileSpans
from gpugap.program.iterations import Iterations, codes_of
from gpugap.quantiles import median as median_of
from gpugap.report.table import first_rows, sorted_codes
from gpugap.report.trace import Trace

PHASES = ("start-up", "warm-up", "steady", "tail")
WARMUP_FACTOR = 2.0
# A steady iteration among the first PEER_START_UP_ITERATIONS whose collective lasted
# this many times the usual longest one waited for a peer's start-up (_peer_start_up).
PEER_START_UP_ITERATIONS = 3
PEER_START_UP_FACTOR = 10.0
PEER_START_UP_SLOW = 0.25          # ... and that iteration took a quarter longer or more
# First uses (first_uses): steady iterations needed to compare; slow is this many times
# the median iteration; new work is this many launches of a kernel (with its grid) or
# graph first run there; more launches is this factor over the median, more host
# synchronizations this many over the median; at most this share of the steady
# iterations (more is recurring work).
FIRST_USE_MIN_ITERATIONS = 6
FIRST_USE_SLOW = 1.5
FIRST_USE_NEW = 3
FIRST_USE_MORE = 1.5
FIRST_USE_SYNCS = 3
FIRST_USE_MAX_SHARE = 0.34


@dataclass
class Phases:
    device: int
    window: tuple[int, int]
    iterations: Iterations | None
    warmup: int                    # leading iterations that are warm-up
    spans: dict[str, tuple[int, int]]     # phase -> [lo, hi) (empty phases: lo == hi)
    how: str                       # how the iterations / phases were found, for humans
    # What kept this device from being steady sooner (align): {'device': a device of this
    # report, or None, 'who': another report's rank ('rank 1'), or None, 'until_ns': when
    # it was warm, GPU time}; None when its own warm-up decided.
    held_by: dict | None = None
    # Steady iterations that ran work first seen there (first_uses): the warm-up of that
    # work (a new shape's autotuning or compilation), out of the steady state; and what
    # showed it (first_uses' evidence), for the rule that reports them (first-use).
    first_use: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    first_use_evidence: dict | None = None

    @property
    def steady_iterations(self) -> np.ndarray:
        """The steady iterations' indexes: after the warm-up, but the first uses."""
        n = 0 if self.iterations is None else len(self.iterations)
        its = np.arange(self.warmup, n, dtype=np.int64)
        return its if not self.first_use.size else its[~np.isin(its, self.first_use)]

    def first_use_windows(self) -> tl.Intervals:
        """The GPU windows of the first-use iterations (a union)."""
        if not self.first_use.size:
            return tl.EMPTY
        return tl.union(*self.iteration_windows(self.first_use))

    def steady_windows(self) -> tl.Intervals:
        """The steady state as a union: its span but the first-use iterations."""
        lo, hi = self.spans["steady"]
        span = (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))
        if hi <= lo:
            return tl.EMPTY
        return tl.subtract(span, self.first_use_windows()) if self.first_use.size else span

    def iteration_windows(self, which: range | np.ndarray | None = None
                          ) -> tuple[np.ndarray, np.ndarray]:
        if self.iterations is None:
            z = np.zeros(0, dtype=np.int64)
            return z, z
        b = self.iterations.bounds
        if which is None:
            which = range(len(self.iterations))
        # (np.asarray of a range reads its numbers one by one.)
        idx = (np.arange(which.start, which.stop, which.step) if isinstance(which, range)
               else np.asarray(which))
        return b[idx], b[idx + 1]

    def phase_codes(self, times) -> np.ndarray:
        """Index into PHASES of the phase each time falls in (-1 outside the window); a
        first-use iteration's time is warm-up."""
        t = np.asarray(times, dtype=np.int64)
        out = np.full(t.shape, -1, dtype=np.int8)
        for code, phase in enumerate(PHASES):
            lo, hi = self.spans[phase]
            out[(t >= lo) & (t < hi)] = code
        lo, hi = self.window
        out[t == hi] = PHASES.index("tail") if self.spans["tail"][1] > self.spans["tail"][0] \
            else PHASES.index("steady")
        if self.first_use.size:
            out[tl.within(t, self.first_use_windows())] = PHASES.index("warm-up")
        return out

    def to_dict(self) -> dict:
        it = self.iterations
        steady = self.steady_iterations
        durations = it.durations if it is not None else np.zeros(0)
        return {
            "device": self.device, "how": self.how,
            "window_ns": list(self.window), "held_by": self.held_by,
            "first_use": None if not self.first_use.size or it is None else {
                "iterations": [it.labels[i] if it.labels else f"#{i}"
                               for i in self.first_use.tolist()],
                "ns": tl.total(self.first_use_windows())},
            "phases": {p: {"start_ns": int(lo), "end_ns": int(hi), "ns": int(hi - lo)}
                       for p, (lo, hi) in self.spans.items()},
            "iterations": None if it is None else {
                "source": it.source, "name": it.name, "count": len(it),
                "warmup": self.warmup, "steady": len(steady),
                "first_use": int(self.first_use.size),
                "median_ns": int(np.median(durations[steady])) if len(steady) else None,
                "durations_ns": durations.astype(np.int64, copy=False).tolist()},
        }


def _warmup(durations: np.ndarray, factor: float) -> int:
    if durations.size == 0:
        return 0
    median = float(np.median(durations))
    w = 1
    while w < durations.size - 1 and durations[w] > factor * median:
        w += 1
    return w


def _peer_start_up(work: DeviceWork, it: Iterations, w: int
                   ) -> tuple[int, dict | None]:
    """The warm-up extended past the first steady iterations (PEER_START_UP_ITERATIONS
    at most) that are slow because a collective in them waited: one communication
    kernel PEER_START_UP_FACTOR x longer than the longest of a typical steady iteration.
    With one rank's report alone, that is the wait for a peer still starting up (its
    first step compiling, loading, warming up), not a steady cost; the job's phases see
    the peer itself (align). (*w*, None) when there is none."""
    n = len(it)
    if n - w < PEER_START_UP_ITERATIONS + 3:
        return w, None
    positions = work.positions(CODE["communication"])
    if positions.size < n:
        return w, None
    ops = work.take(positions)
    b = it.bounds
    k = np.searchsorted(b, ops.start, side="right") - 1
    inside = (k >= 0) & (k < n)
    longest = np.zeros(n, dtype=np.int64)
    np.maximum.at(longest, k[inside], (ops.end - ops.start)[inside])
    typical = float(np.median(longest[w:]))
    durations = it.durations
    median = float(np.median(durations[w:]))
    last = w
    for i in range(w, w + PEER_START_UP_ITERATIONS):
        if durations[i] - median >= PEER_START_UP_SLOW * median and \
                longest[i] >= PEER_START_UP_FACTOR * max(typical, 1.0) and \
                longest[i] - typical >= 0.5 * (durations[i] - median):
            last = i + 1
    if last == w:
        return w, None
    # No later iteration may look the same: a wait that recurs is a late rank's.
    if (longest[last:] >= PEER_START_UP_FACTOR * max(typical, 1.0)).any():
        return w, None
    return last, {"device": None, "who": "a peer rank", "until_ns": int(b[last])}


def detect(trace: Trace, work: DeviceWork, device: DeviceProgram, *,
           warmup_factor: float = WARMUP_FACTOR) -> Phases:
    """The phases of *device* (the program model's view of it: window, iterations)."""
    window = device.window
    lo, hi = window
    iterations = device.iterations
    if iterations is not None and len(iterations) >= 1:
        w = _warmup(iterations.durations, warmup_factor)
        w, held = _peer_start_up(work, iterations, w)
        b = iterations.bounds
        spans = {"start-up": (lo, int(b[0])), "warm-up": (int(b[0]), int(b[w])),
                 "steady": (int(b[w]), int(b[-1])), "tail": (int(b[-1]), hi)}
        return Phases(work.device, window, iterations, w, spans, iterations.how,
                      held_by=held)
    # No iterations: start-up ends with the last module load before regular work.
    first_op = work.bounds()[0] if len(work) else lo
    end = first_op
    api = trace.table("api")
    if len(api):
        loads = np.flatnonzero(api.labels("name").matching(MODULE_LOAD)
                               & isin(api["pid"], work.pids))
        if loads.size:
            t = int(api["end"][loads].max())
            end = max(end, t, int(work.ends_launched_before([t])[0]))
    end = min(max(end, lo), hi)
    last_op = int(work.bounds()[1]) if len(work) else hi
    if end > first_op:
        # A lazy load in the middle of the work (a kernel's first launch, after the
        # first copies) is part of running it: the work, not a start-up before it.
        end = max(first_op, lo)
    # The steady window ends with the last GPU work: what the host did after it (a check
    # of the results on the CPU, freeing, the process's exit) is the tail.
    last = min(max(last_op, end), hi)
    spans = {"start-up": (lo, end), "warm-up": (end, end), "steady": (end, last),
             "tail": (last, hi)}
    return Phases(work.device, window, None, 0, spans,
                  "no repeated NVTX range or GPU work: start-up until the last module load, "
                  "then one steady window to the last GPU work")


def align(phases: dict[int, Phases], peers: dict[int, set[int]],
          not_before: tuple[int, str] | None = None) -> None:
    """Job-wide phases (module doc), in place: each device's steady state starts no
    earlier than the end of the warm-up of every device in ``peers[device]``, nor (for
    a report that is one rank of a job of several reports: gpugap.analysis.job) before
    *not_before* = (time on this report's clock, who was warm last then: 'rank 1')."""
    warm = {d: ph.spans["steady"][0] for d, ph in phases.items()}
    for device, ph in phases.items():
        others = [(warm[p], p, None) for p in peers.get(device, ()) if p in warm]
        if not_before is not None:
            others.append((not_before[0], None, not_before[1]))
        if not others:
            continue
        ready, last, who = max(others, key=lambda o: o[0])
        if ready <= ph.spans["steady"][0]:
            if ph.held_by is not None and ph.held_by["device"] is None:
                # This device's own evidence already put a peer's start-up in its warm-up
                # (_peer_start_up); the job knows which peer it was.
                ph.held_by = {"device": None if last is None else int(last), "who": who,
                              "until_ns": ph.held_by["until_ns"]}
            continue
        lo, hi = ph.window
        it = ph.iterations
        if it is not None and len(it):
            b = it.bounds
            # The first iteration that starts once the last peer is warm (at most the last
            # one: a device keeps one steady iteration if it has any).
            w = min(max(int(np.searchsorted(b[:-1], ready, side="left")), ph.warmup),
                    len(it) - 1)
            if w <= ph.warmup:
                continue
            ph.warmup = w
            ph.spans["warm-up"] = (ph.spans["warm-up"][0], int(b[w]))
            ph.spans["steady"] = (int(b[w]), ph.spans["steady"][1])
        else:
            end = min(max(ready, lo), hi)
            ph.spans["start-up"] = (ph.spans["start-up"][0], end)
            ph.spans["warm-up"] = (end, end)
            ph.spans["steady"] = (end, ph.spans["steady"][1])
        ph.held_by = {"device": None if last is None else int(last), "who": who,
                      "until_ns": int(ready)}


def _count_in(times: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many of *times* fall in each of the sorted, disjoint windows [lo, hi)."""
    k = np.searchsorted(lo, times, side="right") - 1
    inside = (k >= 0) & (times < hi[np.maximum(k, 0)])
    return np.bincount(k[inside], minlength=lo.size)


def _op_kinds(trace: Trace, codes: np.ndarray, source: np.ndarray, row: np.ndarray
              ) -> np.ndarray:
    """Per op, a code of what it runs: its op code (gpugap.program.iterations.codes_of)
    and, for a kernel, its grid (a new shape is new work); dense, from 0."""
    _, kind = sorted_codes(codes)
    k = trace.table("kernels")
    if len(k) and all(c in k for c in ("grid_x", "grid_y", "grid_z")):
        sel = source == 0
        r = row[sel]
        for c in ("grid_x", "grid_y", "grid_z"):
            part = np.zeros(source.size, dtype=np.int64)
            part[sel] = k[c][r]
            _, dim = sorted_codes(part)
            _, kind = sorted_codes(kind * (int(dim.max(initial=0)) + 1) + dim)
    return kind


def first_uses(trace: Trace, work: DeviceWork, ph: Phases,
               compile_spans: CompileSpans | None) -> None:
    """Mark the steady iterations of *ph* that are the first use of new work (module
    doc), in place, with the evidence for each (``first_use_evidence``).

    A steady iteration is a first use when it is slow (FIRST_USE_SLOW x the median) and
    runs new work: FIRST_USE_NEW launches of a kernel (by its full name and grid: a new
    shape) or a CUDA graph first run there, with more launches than usual
    (FIRST_USE_MORE x the median), module loads or more host synchronizations
    (FIRST_USE_SYNCS above the median: an autotuner timing candidates); or compilers ran
    in it (the program model's compile spans) where they do not in most iterations. An
    iteration that only runs more of what ran before (far more launches, or more
    launches and syncs: an autotuner re-timing kernels it has run) is a first use when
    it is the only one; several (an evaluation every N steps) recur. Copies are left out:
    a checkpoint's copies and synchronizations are data, not new work. At most
    FIRST_USE_MAX_SHARE of the steady iterations: more is the loop's own work recurring."""
    it = ph.iterations
    its = ph.steady_iterations
    if it is None or its.size < FIRST_USE_MIN_ITERATIONS:
        return
    lo, hi = ph.iteration_windows(its)
    dur = hi - lo
    median_dur = float(median_of(dur))
    slow = dur >= FIRST_USE_SLOW * median_dur
    if not slow.any():              # no slow iteration: nothing below can mark one
        return
    taken = work.slice(0, len(work))
    launched = (taken.source == 0) | (taken.source == 3)       # kernels, graph launches
    start = taken.start[launched]
    source, row = taken.source[launched], taken.row[launched]
    del taken, launched         # (every op's columns: 220 MB at ten million ops)
    ops = _count_in(start, lo, hi)
    cpu_lo, cpu_hi = it.cpu_start[its], it.cpu_end[its]
    api = trace.table("api")
    syncs = loads = np.zeros(its.size, dtype=np.int64)
    if len(api):
        mine = isin(api["pid"], work.pids)
        names = api.labels("name")
        syncs = _count_in(api["start"][mine & names.matching(SYNCHRONIZE)], cpu_lo, cpu_hi)
        loads = _count_in(api["start"][mine & names.matching(MODULE_LOAD)], cpu_lo, cpu_hi)
    compiled = np.zeros(its.size, dtype=np.int64)
    if compile_spans is not None and len(compile_spans):
        compiled = tl.overlap_each(cpu_lo, cpu_hi,
                                   tl.union(compile_spans.start, compile_spans.end))
    median_ops = max(float(median_of(ops)), 1.0)
    median_syncs = float(median_of(syncs))
    extra = np.maximum(dur - median_dur, 0)
    more = ops >= FIRST_USE_MORE * median_ops
    many_syncs = syncs >= median_syncs + FIRST_USE_SYNCS
    compiling = (compiled >= np.maximum(extra / 3, 1e6)) & (median_of(compiled) == 0)
    # Every mark below needs a slow iteration with more launches, module loads, more
    # syncs or a compiler in it: without one, the new work is not looked for (a sort of
    # every launch).
    if not (slow & (more | (loads > 0) | many_syncs | compiling)).any():
        return
    kind = _op_kinds(trace, codes_of(trace, source, row), source, row)
    first = first_rows(kind, int(kind.max(initial=-1)) + 1)
    new = _count_in(start[first], lo, hi)
    novel = (new >= FIRST_USE_NEW) & (more | (loads > 0) | many_syncs)
    # Without new work, an autotuner's signature (far more launches, more syncs) is a
    # first use only once: seen again (an evaluation every N steps, however many more
    # operations it launches) it is a recurring cost of that work.
    alike = ~novel & ((more & many_syncs) | (ops >= 3 * FIRST_USE_MORE * median_ops)) & slow
    if int(alike.sum()) == 1:
        novel = novel | alike
    hit = np.flatnonzero(slow & (novel | compiling))
    if not hit.size or hit.size > FIRST_USE_MAX_SHARE * its.size:
        return
    ph.first_use = its[hit]
    # Does the loop keep the new work afterwards (a shape that changed for good: every
    # later step runs the recompiled kernels), or go back to what it ran before (an
    # evaluation's first call)? The share of the later iterations that run any of it.
    at = np.searchsorted(lo, start, side="right") - 1
    inside = (at >= 0) & (start < hi[np.maximum(at, 0)])
    first_at = np.full(first.size, -1, dtype=np.int64)
    first_at[inside[first]] = at[first][inside[first]]
    kept = []
    for j in hit.tolist():
        later = inside & (at > j) & np.isin(kind, np.flatnonzero(first_at == j))
        after = its.size - j - 1
        kept.append(round(np.unique(at[later]).size / after, 3) if after else 0.0)
    ph.first_use_evidence = {
        "kept_after": kept,
        "new_launches": new[hit].astype(int).tolist(),
        "launches": ops[hit].astype(int).tolist(), "median_launches": median_ops,
        "synchronizations": syncs[hit].astype(int).tolist(),
        "median_synchronizations": median_syncs,
        "module_loads": loads[hit].astype(int).tolist(),
        "compile_ns": compiled[hit].astype(int).tolist(),
        "extra_ns": extra[hit].astype(int).tolist(),
        "median_iteration_ns": int(median_dur)}
