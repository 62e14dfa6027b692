"""What the CPU ran while the GPU idled, for a verdict whose cause is on the host.

A verdict of host work, input, a thread wait, launch-bound, compilation or results work
(gpugap.accounting.buckets.HOST_SIDE_IDS) says the GPU waited for the host; from the
calls alone it cannot say what the host was doing. The report's own evidence can, when
the capture recorded it (gpugap profile does by default): its CPU samples inside the
GPU's idle intervals of the steady state (those the verdict's finding claims), per
process and thread (DataLoader workers included), their stacks' telling frames by share
of the idle time (gpugap.program.host_work), Python's stacks where the export holds
them (the user's file:function:line), the GIL's holder when the launching thread waited
for it, and what the launching thread waited in (its OS runtime calls' stacks). The fix
then follows from that evidence: numpy on the launching thread is not a thread with
nothing to do.

Without the evidence, the verdict says which capture flags would show it, leaving out
what the report already holds.

The evidence is read here, once per verdict, only inside those intervals
(gpugap.report.host reads on demand): the cost of a report with samples stays that of
its verdict's windows.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting import DeviceAccount
from gpugap.accounting.buckets import HOST_SIDE_IDS
from gpugap.accounting.scope import Scope
from gpugap.jsonout import Record
from gpugap.program import host_work as hw
from gpugap.program.frameworks import PYTHON_PROCESS
from gpugap.program.model import Program
from gpugap.report.columns import ID_MASK, PID_SHIFT
from gpugap.report.host import HostInventory, evenly
from gpugap.report.trace import Trace
from gpugap.rules.base import Finding
from gpugap.units import fmt_ns

# Threads shown per verdict, frames per thread.
TOP_THREADS = 4
TOP_FRAMES = 3
# A thread or frame holding less than this share of the idle time is not shown.
SHOWN_PCT = 2.0
# OS calls of the launching thread read for its waits: past this many, a sample of
# about as many drawn by length (report.host.os_waits; a million-kernel report's
# launching thread makes millions: read whole, they took longer than the rest of its
# analysis). A wait's share is shown to the percent; the sample's error on a share of
# 2% is about a tenth of a percent.
MAX_WAIT_CALLS = 50_000
# The launching thread running one kind of work for this share of the idle time: that
# work is what holds the GPU idle (its fix is the verdict's).
WORK_PCT = 20.0
# The launching thread running less than this share, waiting in the OS for at least
# WAIT_PCT: it had nothing to do (spare capacity), the producer is what to look at.
RUNNING_PCT = 30.0
WAIT_PCT = 30.0
# The next kind of work of the launching thread, named beside the first from this share.
NEXT_PCT = 10.0
# The launching thread waiting for the GIL this share of the idle time: its holder is
# what holds the GPU idle.
GIL_PCT = 15.0
NO_PAYLOADS = ("the export holds no payloads for its Python samples (a default SQLite "
               "export leaves them out): export the .nsys-rep again with nsys export "
               "--include-blobs=true (nsys newer than 2023.4) to name the Python lines")
# nsys's own threads in a profiled process (its injection, the Python sampler).
_PROFILER_THREAD = ("[NSys", "NSys ", "[CUDA")


@dataclass
class HostFrame(Record):
    """A frame (or Python line) that names some of a thread's work: ``frame`` ('module:
    function', or the user's 'file:function:line'), ``work`` (gpugap.program.host_work
    KINDS id), its CPU time inside the idle intervals and share of them."""

    frame: str
    work: str
    ns: int
    share_pct: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HostThread(Record):
    """A thread that ran while the GPU idled: its CPU time there (samples x period) and
    share of the idle time, its ``role`` ('launching thread', 'launching process',
    'worker process', 'other process'), its top native ``frames`` and ``python`` lines."""

    pid: int
    tid: int
    name: str | None
    role: str
    ns: int
    share_pct: float
    frames: list[HostFrame] = field(default_factory=list)
    python: list[HostFrame] = field(default_factory=list)
    work: dict[str, float] = field(default_factory=dict)     # kind -> % of the idle time

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def who(self) -> str:
        return f"{self.name or 'thread'} (tid {self.tid}, {self.role})"


@dataclass
class HostEvidence(Record):
    """What the host ran while the GPU idled (module doc), for one verdict.

    ``idle_ns`` / ``stretches``: the idle intervals explained (the verdict's, in the
    steady state); ``sampled``: the report has CPU samples; ``samples`` inside the
    intervals, each standing for ``period_ns`` of CPU time; ``threads``: the busiest,
    launching thread first; ``gil``: the launching thread's wait for the GIL and its
    holders; ``waits``: what the launching thread waited in (OS calls: name, where,
    ns); ``work`` / ``what``: the work that holds the GPU idle, read from all of it;
    ``fix``: the fix it calls for; ``advice``: the capture flags that would show what the
    host was doing (a report without the evidence); ``notes``: what is missing;
    ``waits_sample_ns``: 0 where the waits were read from every OS call; past
    MAX_WAIT_CALLS calls of the launching thread, from a sample: each call shorter than
    this drawn with a chance of its length over it (report.host.os_waits), so the times
    and counts are estimates."""

    idle_ns: int
    stretches: int
    sampled: bool
    samples: int = 0
    period_ns: int | None = None
    threads: list[HostThread] = field(default_factory=list)
    gil: dict[str, Any] | None = None
    waits: list[dict[str, Any]] = field(default_factory=list)
    work: str | None = None
    what: str | None = None
    summary: str | None = None
    fix: str | None = None
    advice: str | None = None
    notes: list[str] = field(default_factory=list)
    waits_sample_ns: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The evidence for people, a line each: the summary, each thread with its
        frames, the GIL, the waits, the advice and notes."""
        return self.brief() + self.details()

    def brief(self) -> list[str]:
        """What the verdict says of it: the summary, the advice and notes (what the
        report lacks to say more; payloads this nsys lays out otherwise go with the
        details)."""
        return ([self.summary] if self.summary else []) + (
            [self.advice] if self.advice else []) + [
            n for n in self.notes if n != UNREADABLE_PAYLOADS]

    def details(self) -> list[str]:
        """Each thread with its frames, the GIL, the waits: the evidence behind the
        summary."""
        out = []
        for t in self.threads:
            work = [f"{hw.KINDS[k].what} {p:.0f}%" for k, p in t.work.items()
                    if k in hw.KINDS and p >= SHOWN_PCT][:3]
            top = [f"{f.frame} {f.share_pct:.0f}%" for f in (t.python or t.frames)]
            out.append(f"{t.who}: ran {t.share_pct:.0f}% of the idle time"
                       + (": " + ", ".join(work) if work else "")
                       + ("; top: " + ", ".join(top) if top else ""))
        if self.gil and self.gil.get("holders") and self.gil["share_pct"] >= SHOWN_PCT:
            h = self.gil["holders"][0]
            out.append(f"GIL: the launching thread waited for it {self.gil['share_pct']:.0f}%"
                       f" of the idle time, held by {h['thread']} ({h['share_pct']:.0f}%)")
        if self.waits:
            out.append("the launching thread waited in " + ", ".join(
                f"{w['name']}" + (f" ({w['where']})" if w.get("where") else "")
                + f" {w['share_pct']:.0f}%" for w in self.waits[:3])
                + (" (estimated from a sample of its OS calls)"
                   if self.waits_sample_ns else ""))
        return out + [n for n in self.notes if n == UNREADABLE_PAYLOADS]


def is_host_side(buckets: tuple[str, ...] | list[str]) -> bool:
    return any(b in HOST_SIDE_IDS for b in buckets)


def idle_windows(dev: DeviceAccount, finding: Finding | None, bucket: str | None,
                 judged: tl.Intervals | None = None) -> tl.Intervals:
    """The GPU's idle intervals that the verdict explains: the pieces of its host-side
    buckets inside the windows it judged (*judged*: the scope's on this device, by
    default the steady state's), inside its finding's claim where it has one."""
    buckets = [b for b in (finding.claim.buckets if finding is not None and finding.claim
                           else (bucket,) if bucket else ()) if b in HOST_SIDE_IDS]
    steady = dev.phases.steady_windows() if judged is None else judged
    if not buckets or not len(steady[0]):
        return tl.EMPTY
    parts = [dev.pieces(int(lo), int(hi), buckets) for lo, hi in zip(*steady, strict=True)]
    s = np.concatenate([p[0] for p in parts])
    e = np.concatenate([p[1] for p in parts])
    windows = tl.union(s, e)
    if finding is not None and finding.claim is not None:
        windows = tl.intersect(windows, tl.union(*finding.claim.intervals))
    return windows


def capture_advice(inv: HostInventory | None, python: bool) -> str | None:
    """The capture flags that would show what the host ran, leaving out those the report
    shows were on (None: nothing to add)."""
    flags = []
    if inv is None or not inv.cpu_samples:
        flags.append("--sample=process-tree --backtrace=fp")
    elif not inv.backtraces:
        flags.append("--backtrace=fp")
    if python and (inv is None or not inv.gil):
        flags.append("-t <traces>,python-gil")
    if python and (inv is None or not inv.python_sampling):
        flags.append("--python-sampling=true")
    if not flags:
        return None
    return ("no record of what the host ran: profile with gpugap profile, or nsys "
            "profile " + " ".join(flags))


def _is_python(trace: Trace, program: Program | None) -> bool:
    if program is not None and any(PYTHON_PROCESS.search(p.name or "")
                                   for p in program.processes):
        return True
    return program is not None and program.framework in ("PyTorch", "JAX", "CuPy",
                                                         "CUDA Python")


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole > 0 else 0.0


def explain(trace: Trace, dev: DeviceAccount, finding: Finding | None, bucket: str | None,
            program: Program | None, launching: list[int],
            judged: tl.Intervals | None = None) -> HostEvidence | None:
    """The host evidence of a verdict (module doc); None when its cause is not on the
    host, or nothing of what it judged is left to explain. *launching*: the threads
    (gtid) that launched the device's work, the busiest first; *judged*: the windows the
    verdict judged (a --range's; default: the steady state)."""
    windows = idle_windows(dev, finding, bucket, judged)
    if tl.total(windows) <= 0:
        return None
    main = _held_responsible(dev, windows) or (launching[0] if launching
                                               else dev.gaps.main_gtid)
    pids = {int(p) for p in dev.work.pids.tolist()}
    return evidence(trace, windows, main, pids, python=_is_python(trace, program))


def _held_responsible(dev: DeviceAccount, windows: tl.Intervals) -> int | None:
    """The thread the accounting holds responsible for most of the idle *windows* (the
    thread that launched the operation ending each gap): the launching thread that
    matters here, which is not always the one that launched most (PyTorch's autograd
    thread launches the backward, the main thread waits for the next batch)."""
    lo, hi = windows
    if not len(lo):
        return None
    gaps = dev.gaps.containing(lo)
    known = gaps >= 0
    if not known.any():
        return None
    threads = dev.gaps.thread(gaps[known])
    weight = (hi - lo)[known]
    mine = threads >= 0
    if not mine.any():
        return None
    ids, where = np.unique(threads[mine], return_inverse=True)
    return int(ids[np.argmax(np.bincount(where, weights=weight[mine]))])


def evidence(trace: Trace, windows: tl.Intervals, main: int, launching_pids: set[int],
             *, python: bool) -> HostEvidence:
    """What the host ran inside *windows* (sorted, disjoint: the GPU's idle intervals),
    *main* being the launching thread (gtid) and *launching_pids* the processes that
    launched GPU work; *python*: the program runs Python (what capture flags to
    advise)."""
    idle = tl.total(windows)
    source = trace.host_source
    inv = source.inventory() if source is not None else None
    out = HostEvidence(idle_ns=int(idle), stretches=int(len(windows[0])),
                       sampled=bool(inv is not None and inv.cpu_samples))
    out.advice = capture_advice(inv, python)
    if source is None or inv is None:
        return out
    lo, hi = windows
    launching_pids = set(launching_pids) | {(main >> PID_SHIFT) & ID_MASK}
    # The GIL trace is read beside the samples (a scan of its own, in SQLite).
    gil = source.gil_ahead(lo, hi, main) if inv.gil else None
    try:
        if inv.cpu_samples:
            _samples(trace, source, inv, windows, idle, main, launching_pids, out)
        if inv.python_stacks:
            _python(trace, source, inv, windows, idle, out, main)
        elif inv.python_sampling:
            out.notes.append(NO_PAYLOADS)
    finally:
        ranges = gil() if gil is not None else None
    if ranges is not None:
        out.gil = _gil(trace, ranges, windows, idle, main)
    if inv.os_runtime:
        out.waits, out.waits_sample_ns = _waits(source, windows, idle, main)
    _conclude(out, idle, main, trace)
    return out


def _role(gtid: int, main: int, launching_pids: set[int], workers: set[int]) -> str:
    pid = (gtid >> PID_SHIFT) & ID_MASK
    if gtid == main:
        return "launching thread"
    if pid in launching_pids:
        return "launching process"
    return "worker process" if pid in workers else "other process"


def _samples(trace: Trace, source: Any, inv: HostInventory, windows: tl.Intervals,
             idle: int, main: int, launching_pids: set[int], out: HostEvidence) -> None:
    """Per thread, the CPU time sampled inside *windows* and its telling frames."""
    samples = source.samples(*windows)
    names = trace.thread_names
    gtid = samples["gtid"].astype(np.int64)
    own = np.array([str(names.get(int(g), "")).startswith(_PROFILER_THREAD)
                    for g in np.unique(gtid).tolist()], dtype=bool)
    profiler = set(np.unique(gtid)[own].tolist())
    keep = ~np.isin(gtid, list(profiler)) if profiler else np.ones(gtid.size, bool)
    ids, gtid = samples["id"].astype(np.int64)[keep], gtid[keep]
    period = inv.sample_period_ns or 1_000_000
    out.samples, out.period_ns = int(ids.size), int(period)
    if not ids.size:
        out.notes.append("no CPU samples fell inside the idle intervals")
        return
    # Stacks of at most MAX_STACKS samples, evenly spread; each weighs for the samples
    # of its thread it stands for.
    stacked = evenly(np.arange(ids.size))
    kinds = _stack_kinds(source, ids[stacked]) if inv.backtraces else None
    workers = {int(p) for p, n in _loader_workers(trace).items() if n}
    threads = Counter(gtid.tolist())
    threads.setdefault(main, 0)         # the launching thread, shown even when idle
    shown: list[HostThread] = []
    order = sorted(threads, key=lambda g: (g != main, -threads[g]))
    for g in order:
        ns = min(threads[g] * period, idle)
        if g != main and _pct(ns, idle) < SHOWN_PCT:
            continue
        t = HostThread(pid=(g >> PID_SHIFT) & ID_MASK, tid=g & ID_MASK,
                       name=names.get(g), role=_role(g, main, launching_pids, workers),
                       ns=int(ns), share_pct=_pct(ns, idle))
        if kinds is not None:
            mine = stacked[gtid[stacked] == g]
            label, kind, ok = kinds(ids[mine])
            if ok.any():
                scale = ns / int(ok.sum())
                count = Counter(zip(label[ok].tolist(), kind[ok].tolist(), strict=True))
                t.frames = [HostFrame(f, k, int(n * scale), _pct(n * scale, idle))
                            for (f, k), n in count.most_common(TOP_FRAMES)
                            if _pct(n * scale, idle) >= SHOWN_PCT / 2]
                by_kind = Counter(kind[ok].tolist())
                t.work = {str(k): _pct(n * scale, idle) for k, n in by_kind.most_common()}
        shown.append(t)
    out.threads = shown[:TOP_THREADS]


def _stack_kinds(source: Any, ids: np.ndarray) -> Any:
    """A lookup: sample ids -> (label, kind, has a stack), from their stacks' frames."""
    frames = source.sample_frames(ids)
    if not len(frames):
        return lambda q: (np.full(q.size, "?", object), np.full(q.size, "other", object),
                          np.zeros(q.size, bool))
    sym, mod = frames["symbol"], frames["module"]
    # Distinct frames: a pair of string codes.
    pair = sym.codes.astype(np.int64) * (len(mod.categories) + 1) + mod.codes
    distinct, frame = np.unique(pair, return_inverse=True)
    cats_s, cats_m = list(sym.categories), list(mod.categories)
    nf = hw.native_frames([cats_s[int(p) // (len(cats_m) + 1)] for p in distinct.tolist()],
                          [cats_m[int(p) % (len(cats_m) + 1)] for p in distinct.tolist()])
    stacks = hw.classify_stacks(frames["id"].astype(np.int64), frame.reshape(-1), nf)

    def lookup(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = np.searchsorted(stacks.ids, q)
        k = np.minimum(k, max(stacks.ids.size - 1, 0))
        ok = (stacks.ids.size > 0) & (stacks.ids[k] == q) if stacks.ids.size else \
            np.zeros(q.size, bool)
        ok = ok & ~stacks.profiler[k]
        return stacks.label[k], stacks.kind[k], ok
    return lookup


def _loader_workers(trace: Trace) -> dict[int, int]:
    """DataLoader worker processes (pid -> threads named so)."""
    threads = trace.table("threads")
    if not len(threads):
        return {}
    names = threads.labels("name").strings()
    pid = (threads["gtid"].astype(np.int64) >> PID_SHIFT) & ID_MASK
    hit = pid[names == "pt_data_worker"]
    return dict(Counter(hit.tolist()))


def _python(trace: Trace, source: Any, inv: HostInventory, windows: tl.Intervals,
            idle: int, out: HostEvidence, main: int) -> None:
    """Python stacks of the samples inside *windows*: per thread shown, its lines (the
    launching thread's even without CPU samples: where it was, if not what it ran)."""
    found = source.python_samples(*windows)
    if found.note:
        out.notes.append(found.note)
    frames = found.frames
    if frames is None or not len(frames) or not len(found.samples):
        return
    files = frames["file"].strings()
    if not _source_files(files):
        # Payloads that do not read as Python frames (the layout of this nsys's export
        # is not the one documented): say so, and let the native stacks speak.
        out.notes.append(UNREADABLE_PAYLOADS)
        return
    period = inv.python_period_ns or 1_000_000
    periodic = found.samples["kind"].strings() == "periodic"
    sample = frames["sample"].astype(np.int64)
    funcs = frames["function"].strings()
    lines = frames["line"].astype(np.int64)
    stacks: dict[int, tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
    for s, f, fn, ln in zip(sample.tolist(), files.tolist(), funcs.tolist(),
                            lines.tolist(), strict=True):
        st = stacks[s]
        st[0].append(f)
        st[1].append(fn)
        st[2].append(ln)
    gtid = found.samples["gtid"].astype(np.int64)
    per_thread: dict[int, Counter] = defaultdict(Counter)
    for s, (f, fn, ln) in stacks.items():
        if periodic[s]:
            per_thread[int(gtid[s])][hw.python_stack(f, fn, ln)] += 1
    by_tid = {t.tid: t for t in out.threads}
    if not out.sampled:
        # No CPU samples: the Python stacks still say where the threads were (their CPU
        # time unknown, none claimed): the launching thread's, else the Python thread of
        # its process with most samples (a runtime's worker launches what the Python
        # thread dispatches to it: JAX's).
        pid = (main >> PID_SHIFT) & ID_MASK
        mine = [g for g in per_thread if (g >> PID_SHIFT) & ID_MASK == pid]
        for g in ([main] if main in per_thread else
                  sorted(mine, key=lambda g: -sum(per_thread[g].values()))[:1]):
            t = HostThread(pid=pid, tid=g & ID_MASK, name=trace.thread_names.get(g),
                           role=_role(g, main, {pid}, set()), ns=0, share_pct=0.0)
            out.threads.insert(0 if g == main else len(out.threads), t)
            by_tid[t.tid] = t
    for g, count in per_thread.items():
        t = by_tid.get(g & ID_MASK)
        if t is None:
            continue
        t.python = [HostFrame(label, kind, int(n * period), _pct(n * period, idle))
                    for (label, kind), n in count.most_common(TOP_FRAMES)
                    if _pct(n * period, idle) >= SHOWN_PCT / 2]


# A Python frame's file: a path or a module's source ('<frozen ...>', '<string>').
SOURCE_FILE = re.compile(r"(\.pyx?$|/|^<frozen |^<string>$)")
# Decoded frames read as Python frames when most of their files are source files.
SOURCE_SHARE = 0.5
UNREADABLE_PAYLOADS = ("the export's Python sample payloads do not read as Python frames "
                       "(this nsys lays them out otherwise): the native stacks are used")


def _source_files(files: np.ndarray) -> bool:
    """Whether decoded Python frames name source files (SOURCE_SHARE of them)."""
    names = np.unique(files.astype(str))
    if not names.size:
        return False
    ok = np.array([bool(SOURCE_FILE.search(n)) for n in names.tolist()])
    return bool(ok.mean() >= SOURCE_SHARE)


def _gil(trace: Trace, gil: Any, windows: tl.Intervals, idle: int, main: int
         ) -> dict[str, Any] | None:
    """The launching thread's waits for the GIL inside *windows*, and who held it."""
    if not len(gil):
        return None
    g = gil["gtid"].astype(np.int64)
    holding = np.asarray(gil["holding"], dtype=bool)
    start, end = gil["start"].astype(np.int64), gil["end"].astype(np.int64)
    mine = (g == main) & ~holding
    waited = tl.intersect(tl.union(start[mine], end[mine]), windows)
    waited_ns = tl.total(waited)
    if waited_ns <= 0:
        return None
    holders = []
    for h in np.unique(g[holding & (g != main)]).tolist():
        on = holding & (g == h)
        ns = tl.intersect_total(tl.union(start[on], end[on]), waited)
        if ns > 0:
            holders.append({"thread": trace.thread_name(h), "ns": int(ns),
                            "share_pct": _pct(ns, waited_ns)})
    holders.sort(key=lambda h: -h["ns"])
    return {"waited_ns": int(waited_ns), "share_pct": _pct(waited_ns, idle),
            "holders": holders[:3]}


def _waits(source: Any, windows: tl.Intervals, idle: int, main: int
           ) -> tuple[list[dict[str, Any]], int]:
    """What the launching thread waited in inside *windows*: its OS runtime calls by
    name, where (the telling frame of the longest call's stack), time inside. Past
    MAX_WAIT_CALLS calls, from a sample of them drawn by length (report.host): also
    returns its length D (0: every call read)."""
    calls, sample_ns = source.os_waits({main: windows}, at_most=MAX_WAIT_CALLS)
    if not len(calls):
        return [], sample_ns
    inside = tl.overlap_each(calls["start"], calls["end"], windows)
    weight = calls["weight"]
    labels = calls["name"]
    chains = calls["callchain"].astype(np.int64)
    # By the names' codes (thousands of calls, a few names): no string compared per
    # call. The distinct names in order, each of its codes mapped to it.
    distinct, of_code = np.unique(labels.categories.astype(str), return_inverse=True)
    codes = labels.codes.astype(np.int64)
    named = np.flatnonzero(codes >= 0)
    name_of = of_code.reshape(-1)[codes[named]]
    per_name = np.bincount(name_of, weights=(inside * weight)[named],
                           minlength=distinct.size)
    counts = np.bincount(name_of, weights=weight[named], minlength=distinct.size)
    out = []
    for k in np.flatnonzero(counts).tolist():
        ns = int(per_name[k])
        if _pct(ns, idle) < SHOWN_PCT:
            continue
        on = named[name_of == k]
        longest = int(on[np.argmax(inside[on])])
        out.append({"name": str(distinct[k]), "ns": ns, "share_pct": _pct(ns, idle),
                    "calls": int(round(counts[k])), "chain": int(chains[longest])})
    out.sort(key=lambda w: -w["ns"])
    out = out[:3]
    frames = source.osrt_frames(np.asarray([w["chain"] for w in out], dtype=np.int64))
    where = _callers(frames)
    for w in out:
        w["where"] = where.get(w.pop("chain"))
    return out, sample_ns


def _callers(frames: Any) -> dict[int, str]:
    """Per OS call stack, what it waited for (gpugap.program.host_work.wait_caller)."""
    if not len(frames):
        return {}
    ids = frames["id"].astype(np.int64)
    sym, mod = frames["symbol"].strings().tolist(), frames["module"].strings().tolist()
    out: dict[int, str] = {}
    for cid in np.unique(ids).tolist():
        on = np.flatnonzero(ids == cid).tolist()
        found = hw.wait_caller([sym[i] for i in on], [mod[i] for i in on])
        if found:
            out[cid] = found
    return out


def _conclude(out: HostEvidence, idle: int, main: int, trace: Trace) -> None:
    """The work that holds the GPU idle, read from the evidence, and its fix."""
    if not out.threads and not out.gil and not out.waits:
        return
    launcher = next((t for t in out.threads if t.role == "launching thread"), None)
    running = launcher.share_pct if launcher else 0.0
    waiting = sum(w["share_pct"] for w in out.waits)
    gil = out.gil or {}
    where = fmt_ns(idle)
    if gil.get("share_pct", 0.0) >= GIL_PCT and gil.get("holders"):
        holder = gil["holders"][0]["thread"]
        other = next((t for t in out.threads if trace.thread_name(
            (t.pid << PID_SHIFT) | t.tid) == holder), None)
        doing = f" (running {_top_what(other)})" if other and _top_what(other) else ""
        out.work, out.what = "gil", "waiting for the GIL"
        out.summary = (f"while the GPU idled ({where}), the launching thread waited for "
                       f"the GIL {gil['share_pct']:.0f}% of the time, held by {holder}"
                       f"{doing}")
        out.fix = (f"the launching thread waits for Python's GIL, held by {holder}: move "
                   "that thread's work into a process (multiprocessing, DataLoader "
                   "workers) or into code that releases the GIL")
        return
    if launcher is None or running < RUNNING_PCT:
        if waiting >= WAIT_PCT or launcher is None or running < SHOWN_PCT:
            busiest = next((t for t in out.threads if t.role != "launching thread"), None)
            wait = out.waits[0] if out.waits else None
            in_what = (f" in {wait['name']}" + (f" ({wait['where']})" if wait.get("where")
                                               else "")) if wait else ""
            out.work, out.what = "wait", hw.KINDS["wait"].what
            producer = (f"; the busiest other thread: {busiest.who}, "
                        f"{busiest.share_pct:.0f}% running {_top_what(busiest) or 'code'}"
                        if busiest and out.sampled else
                        f"; {busiest.who} was in {busiest.python[0].frame} "
                        f"{busiest.python[0].share_pct:.0f}% of the time"
                        if busiest and busiest.python else "")
            # (Without CPU samples its running time is unknown: none claimed; its
            # Python stacks say where it waited.)
            ran = f"ran {running:.0f}% of the time and " if out.sampled else ""
            under = (f" under {launcher.python[0].frame}"
                     if launcher is not None and launcher.python else "")
            out.summary = (f"while the GPU idled ({where}), the launching thread {ran}"
                           f"waited{in_what} {waiting:.0f}%{under}{producer}")
            if busiest is not None and busiest.role == "worker process" \
                    and busiest.share_pct >= WORK_PCT:
                kind = _top_kind(busiest)
                out.work, out.what = kind, hw.KINDS[kind].what
                out.fix = (f"the launching thread waits for the DataLoader's workers, "
                           f"which ran {hw.KINDS[kind].what}: make __getitem__ cheaper "
                           "(that work on the GPU, or once, before training) or raise "
                           "num_workers")
            elif not under and not (busiest and busiest.python and not out.sampled):
                out.fix = ("the launching thread had nothing to do: this is spare "
                           "capacity, not a GPU bottleneck; look at the producer that "
                           "feeds it" + (f" ({busiest.who})" if busiest else ""))
            # (Waiting under the user's own line is waiting inside a call the loop
            # made, not for work: no spare-capacity fix.)
            return
    assert launcher is not None
    kind = _top_kind(launcher)
    by_python = _python_kind(launcher) is not None
    share = launcher.work.get(kind, 0.0) if not by_python else sum(
        f.share_pct for f in launcher.python if f.work == kind)
    out.work, out.what = kind, hw.KINDS[kind].what
    top = [f for f in (launcher.python if by_python else launcher.frames)
           if f.work == kind][:1]
    # (The interpreter's own frame names nothing more than the kind: left out.) Where
    # the native stacks name the work, the user's line that ran it says where.
    named = f" ({top[0].frame})" if top and not top[0].frame.endswith(": Python code") \
        else ""
    if not by_python and launcher.python:
        named += f" under {launcher.python[0].frame}"
    # (The next kind of work too, when it holds a good part: Python code calling
    # Triton's launcher, a library's context calling the driver.)
    then = [(k, p) for k, p in sorted(launcher.work.items(), key=lambda kv: -kv[1])
            if k not in (kind, "other") and k in hw.KINDS and p >= NEXT_PCT][:1]
    out.summary = (f"while the GPU idled ({where}), the launching thread ran "
                   f"{running:.0f}% of the time, {share:.0f}% in {hw.KINDS[kind].what}"
                   f"{named}" + "".join(f", {p:.0f}% in {hw.KINDS[k].what}"
                                        for k, p in then))
    if share >= WORK_PCT or kind in ("triton-launcher", "framework-step"):
        out.fix = hw.KINDS[kind].fix[:1].upper() + hw.KINDS[kind].fix[1:]
        if kind == "python" and not launcher.python:
            out.fix += ("; capture Python stacks (gpugap profile records them with an "
                        "nsys that exports them) to name the code")


def _python_kind(t: HostThread) -> str | None:
    """The kind a library's Python frames name in a thread's Python stacks (Triton's
    launcher, an optimizer's step, numpy...), the one holding most, where it holds at
    least WORK_PCT of the idle time; None where its
    Python stacks end in the user's own code only (that is where, not what: the native
    samples say what the interpreter ran there)."""
    shares: Counter = Counter()
    for f in t.python:
        if f.work not in ("python", "other"):
            shares[f.work] += f.share_pct
    top = shares.most_common(1)
    # (A library's line or two, a queue.get between requests, names nothing.)
    return str(top[0][0]) if top and top[0][1] >= WORK_PCT else None


def _top_kind(t: HostThread) -> str:
    """The kind of work holding most of a thread's shown time ('other' when none): what a
    library's Python frames name, else what its native stacks ran."""
    named = _python_kind(t)
    if named is not None:
        return named
    for k, _ in Counter(t.work).most_common():
        if k != "other":
            return str(k)
    return "other"


def _top_what(t: HostThread | None) -> str | None:
    if t is None or not (t.python or t.frames):
        return None
    return hw.KINDS[_top_kind(t)].what


def launching_threads(program: Program | None, device: int) -> list[int]:
    """The threads (gtid) that launched *device*'s work, the busiest first."""
    if program is None:
        return []
    threads = [t for p in program.processes if device in p.devices for t in p.threads
               if t.role == "launcher"]
    return [t.gtid for t in sorted(threads, key=lambda t: -t.launches)]


def attach(trace: Trace, devices: dict[int, DeviceAccount], findings: list[Finding],
           program: Program | None, verdicts: list[Any], scope: Scope | None = None
           ) -> None:
    """Give each bottleneck verdict (gpugap.analysis.verdict.Verdict) of a cause on the
    host its evidence (``host``), and the fix the evidence calls for where it reads
    one, from the windows the verdict judged (*scope*: the steady state, or a --range;
    default the steady state). Verdicts of one device and finding share one reading."""
    by_id = {f.id: f for f in findings}
    done: dict[tuple[int, str | None, str | None], HostEvidence | None] = {}
    for v in verdicts:
        if v is None or v.kind != "bottleneck" or v.device not in devices:
            continue
        finding = by_id.get(v.finding) if v.finding else None
        if finding is not None and finding.device != v.device:
            continue
        buckets = (finding.claim.buckets if finding is not None and finding.claim
                   else (v.bucket,) if v.bucket else ())
        if not is_host_side(buckets):
            continue
        key = (v.device, v.finding, v.bucket)
        if key not in done:
            done[key] = explain(trace, devices[v.device], finding, v.bucket, program,
                                launching_threads(program, v.device),
                                None if scope is None else scope.on(v.device))
        v.host = done[key]
        if v.host is not None and v.host.fix and _refines(v.host, finding, v.pitfall):
            v.fix = v.host.fix[:1].upper() + v.host.fix[1:] + "."


# The causes whose fix the host's work replaces: the launch-gap rule's, named from idle
# time alone. A rule of its own (a periodic save, a blocking copy) already read its fix
# from its evidence.
REFINED_RULES = ("launch-gap",)


# Catalogue pitfalls that only name the idle time's kind (gpugap.rules.catalogue): the
# host's work says more. Any other pitfall read its fix from the evidence already.
GENERIC_PITFALLS = (None, "host-work-between-launches", "eager-small-kernels")


def _refines(host: HostEvidence, finding: Finding | None, pitfall: str | None) -> bool:
    """Whether the host's evidence, rather than the finding, says what to fix: only from
    CPU samples (a thread's OS waits alone do not say who it waited for), only for the
    launch-gap rule's causes and no specific pitfall of the catalogue (a library's
    context created in the loop, Triton launched per row: their fix is read from their
    evidence), and never 'spare capacity' for a thread that waits for its input (the
    input's own fix: workers, prefetching)."""
    if not host.sampled or (finding is not None and finding.rule not in REFINED_RULES):
        return False
    if pitfall not in GENERIC_PITFALLS:
        return False
    return not (host.work == "wait" and finding is not None and finding.cause == "input")

