"""The instances of a ``--range``: which are warm-up, and the time between them.

Under ``--range NAME`` the accounting's phases stay inside the range
(gpugap.rules.base.Context): the range's time in a device's start-up, warm-up (first
uses included) or tail is one-time, left out of what the verdict judges (the range's
steady part) and listed apart; of several instances, one most of whose window lies
there is a *warm-up instance*, named as such.

The time *between* instances is outside the range, but it is part of the answer: a
range that leaves the problem between its instances (data loading between the steps)
must not hide it. For each thread that ran instances, a gap runs from the end of one
instance's window (the GPU work launched inside it included:
gpugap.accounting.ranges) to the start of the next; what the GPU did then comes from
the accounting (busy, or idle by its buckets), what the threads did from their calls
(CUDA API calls by name, OS runtime calls outside CUDA by name, and the rest: outside
CUDA, the program's own code).

    between instances: 39 gaps, 2.42 s in all (72.2% of the span from the first instance
    to the last); GPU 0 idle 99.8% of it (input 97.1%); host in pthread_cond_wait
    70.9%, cudaMemcpyAsync 2.0%, outside CUDA 27.1%

When that time is large and the GPU idle in it, the verdict says so beside what it
judged in the range (Between.verdict_text): the data loading between the steps of
train-workers0 is its input-bound problem, whatever the steps hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting import Accounting, AccountingIndex
from gpugap.accounting import ranges as nvtx_ranges
from gpugap.accounting.buckets import BUSY_IDS, BY_ID
from gpugap.jsonout import Record
from gpugap.report.table import Table, as_labels
from gpugap.report.trace import Trace
from gpugap.rules.base import Context
from gpugap.units import fmt_ns

# Warm-up instances named in the line (the rest counted).
NAMED = 3
# What the line names of the host's time and the GPU's idle buckets: at most this many,
# each at least MIN_SHOWN_PCT of the time between instances.
HOST_PARTS = 3
IDLE_PARTS = 2
MIN_SHOWN_PCT = 1.0
# A warm-up instance has more than this share of its window in one-time phases.
WARM_UP_SHARE = 0.5
# The time between instances is part of the verdict (Between.verdict_text) when it is
# at least this share of the span from the first instance to the last and the GPU sat
# idle for at least this share of it (as a finding is a warning from 5% of its scope).
BETWEEN_VERDICT_PCT = 5.0


@dataclass
class Between(Record):
    """The time between a range's instances (module doc)."""

    gaps: int                       # gaps between consecutive instances of a thread
    ns: int                         # their union
    span_ns: int                    # from the first instance's start to the last's end
    share_pct: float                # ns of span_ns
    # Per device: its time in the gaps, busy and idle, and the idle buckets, largest
    # first ({bucket: ns}).
    devices: list[dict[str, Any]] = field(default_factory=list)
    # What the instances' threads did in the gaps, largest first: {"name", "source"
    # ('cuda', 'osrt': outside CUDA; 'outside': neither, the program's own code), "ns",
    # "pct" of the threads' time in the gaps}.
    host: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"gaps": self.gaps, "ns": self.ns, "span_ns": self.span_ns,
                "share_pct": self.share_pct,
                "devices": [{**d, "idle": dict(d["idle"])} for d in self.devices],
                "host": [dict(h) for h in self.host]}

    def top_idle(self) -> tuple[dict[str, Any], str, int] | None:
        """(device, bucket, ns) of the idle bucket that took the most of the gaps on any
        device; None when the GPUs were busy throughout."""
        best = None
        for d in self.devices:
            for b, ns in d["idle"].items():
                if best is None or ns > best[2]:
                    best = (d, b, int(ns))
        return best

    def verdict_text(self) -> str | None:
        """What the verdict says of the time between instances when it is large and the
        GPU idle in it (BETWEEN_VERDICT_PCT): 'outside the range, between its
        instances: 2.57 s (73.4% of the span from the first to the last); GPU 0 idle
        100.0% of it, input 100.0%: data loading before the next batch's upload' (the
        idle bucket's meaning: its cause's one description). None otherwise."""
        top = self.top_idle()
        if top is None or self.share_pct < BETWEEN_VERDICT_PCT:
            return None
        d, bucket, ns = top
        pct = 100.0 * ns / d["ns"] if d["ns"] > 0 else 0.0
        if pct < BETWEEN_VERDICT_PCT:
            return None
        known = BY_ID.get(bucket)
        return (f"outside the range, between its instances: {fmt_ns(self.ns)} "
                f"({self.share_pct:.1f}% of the span from the first to the last); "
                f"GPU {d['device']} idle {d['idle_pct']:.1f}% of it, "
                f"{known.title if known else bucket} {pct:.1f}%"
                + (f": {known.meaning}" if known else ""))

    def fix(self, framework: str | None = None) -> str | None:
        """The fix of the idle bucket verdict_text names (None when it names none)."""
        top = self.top_idle()
        if top is None or self.verdict_text() is None:
            return None
        known = BY_ID.get(top[1])
        return known.fix_for(framework) if known and known.fix else None

    def text(self) -> str:
        """'between instances: 39 gaps, 2.42 s in all (72.2% of the span from the first
        instance to the last); GPU 0 idle 99.8% of it (input 97.1%); host in
        pthread_cond_wait 70.9%, outside CUDA 27.1%'."""
        out = (f"between instances: {self.gaps} gap{'s' if self.gaps != 1 else ''}, "
               f"{fmt_ns(self.ns)} in all ({self.share_pct:.1f}% of the span from the "
               "first instance to the last)")
        for d in self.devices:
            if d["ns"] <= 0:
                continue
            idle = [f"{BY_ID[b].title if b in BY_ID else b} {100 * ns / d['ns']:.1f}%"
                    for b, ns in d["idle"].items()
                    if 100 * ns / d["ns"] >= MIN_SHOWN_PCT][:IDLE_PARTS]
            out += (f"; GPU {d['device']} idle {d['idle_pct']:.1f}% of it"
                    + (f" ({', '.join(idle)})" if idle else ""))
        parts = [f"{'outside CUDA' if h['source'] == 'outside' else h['name']} "
                 f"{h['pct']:.1f}%" for h in self.host if h["pct"] >= MIN_SHOWN_PCT]
        if parts:
            lead = "host " if parts[0].startswith("outside CUDA") else "host in "
            out += "; " + lead + ", ".join(parts)
        return out


@dataclass
class RangeInstances(Record):
    """A --range's instances: how many, which are warm-up (out of what the verdict
    judges), the range's time in one-time phases (summed over its devices), and the
    time between them (None: no gap between any two)."""

    name: str
    count: int
    warm_up: int
    warm_up_names: list[str]        # the first NAMED of them
    steady: int
    one_time_ns: int = 0
    between: Between | None = None

    def text(self) -> str:
        """'40 instances of step: 1 warm-up (step 0), 39 steady; 349 ms of the range
        in one-time phases, its findings listed apart'; '1 instance of
        measured, judged whole'."""
        out = f"{self.count} instance{'s' if self.count != 1 else ''} of {self.name}"
        if self.warm_up:
            named = ", ".join(self.warm_up_names) + (
                ", ..." if self.warm_up > len(self.warm_up_names) else "")
            out += f": {self.warm_up} warm-up ({named}), {self.steady} steady"
        elif not self.one_time_ns:
            # One instance is judged whole (gpugap.accounting.scope.Scope.whole_range).
            return out + (", all steady" if self.count > 1 else ", judged whole")
        if self.one_time_ns:
            # The time, not the findings' cost (listed apart, their sum in its heading).
            out += (f"; {fmt_ns(self.one_time_ns)} of the range in one-time phases "
                    "(their findings listed apart)")
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("name", "count", "warm_up", "warm_up_names",
                                              "steady", "one_time_ns")}
        out["between"] = None if self.between is None else self.between.to_dict()
        return out


def range_instances(trace: Trace, name: str, instances: Table, context: Context
                    ) -> RangeInstances:
    """The instances of the --range *name* (*instances*: its rows of the NVTX table)
    under *context* (whose scope is their windows)."""
    starts, ends = nvtx_ranges.instance_windows(trace, instances)
    scope = context.scope
    warm = np.zeros(starts.size, dtype=bool)
    one_time_ns = 0
    for device, windows in scope.ranged.items():
        steady = scope.on(device)
        one_time = tl.subtract(windows, steady)
        if not one_time[0].size:
            continue
        one_time_ns += tl.total(one_time)
        if starts.size < 2:             # one instance: its warm-up part is said in time
            continue
        inside = tl.overlap_each(starts, ends, windows)
        early = tl.overlap_each(starts, ends, one_time)
        warm |= (inside > 0) & (early > WARM_UP_SHARE * inside)
    names = instances.labels("name").strings().astype(str) if len(instances) else \
        np.zeros(0, dtype=str)
    order = np.argsort(starts, kind="stable")
    warm_names = [str(n) for n in names[order][warm[order]][:NAMED].tolist()]
    return RangeInstances(name=name, count=int(starts.size), warm_up=int(warm.sum()),
                          warm_up_names=warm_names, steady=int((~warm).sum()),
                          one_time_ns=int(one_time_ns),
                          between=_between(trace, context.accounting, instances, starts,
                                           ends))


def _between(trace: Trace, accounting: Accounting, instances: Table, starts: np.ndarray,
             ends: np.ndarray) -> Between | None:
    """The gaps between consecutive instances of each thread (module doc); None when
    there are none."""
    gtids = np.asarray(instances["gtid"], dtype=np.int64)
    gaps: dict[int, tl.Intervals] = {}
    for g in np.unique(gtids).tolist():
        mine = gtids == g
        s, e = tl.union(starts[mine], ends[mine])
        if s.size > 1:
            gaps[int(g)] = (e[:-1], s[1:])
    if not gaps:
        return None
    union = tl.union(np.concatenate([g[0] for g in gaps.values()]),
                     np.concatenate([g[1] for g in gaps.values()]))
    ns = tl.total(union)
    span = int(ends.max()) - int(starts.min())
    devices = []
    for device, dev in accounting.devices.items():
        mine = tl.clip(union, *dev.window)
        total = tl.total(mine)
        if total <= 0:
            continue
        totals = dev.totals_in(mine)
        busy = sum(totals[b] for b in BUSY_IDS)
        idle = {b: v for b, v in sorted(totals.items(), key=lambda kv: -kv[1])
                if b not in BUSY_IDS and v > 0}
        devices.append({"device": int(device), "ns": total, "busy_ns": int(busy),
                        "idle_ns": int(total - busy),
                        "idle_pct": round(100.0 * (total - busy) / total, 2),
                        "idle": idle})
    return Between(gaps=sum(int(g[0].size) for g in gaps.values()), ns=ns, span_ns=span,
                   share_pct=round(100.0 * ns / span, 2) if span > 0 else 0.0,
                   devices=devices, host=_host(trace, gaps))


def _host(trace: Trace, gaps: dict[int, tl.Intervals]) -> list[dict[str, Any]]:
    """What each thread did in its gaps (module doc), summed over the threads: CUDA calls
    by name, OS runtime calls outside CUDA by name, the rest outside CUDA; the largest
    first, shares of the threads' time in their gaps."""
    per: dict[tuple[str, str], int] = {}
    whole = 0
    api = trace.table("api")
    calls = AccountingIndex.of(trace).calls if len(api) else None
    api_names = as_labels(api["name"]) if len(api) else None
    osrt = trace.osrt_calls_overlapping(gaps)
    for g, windows in gaps.items():
        whole += tl.total(windows)
        in_cuda = tl.EMPTY
        if calls is not None and api_names is not None:
            at = np.flatnonzero(calls.gtid == g)
            s, e = calls.start[at], calls.end[at]
            inside = tl.overlap_each(s, e, windows)
            hit = inside > 0
            codes = api_names.codes[calls.rows(at[hit])]
            _add(per, "cuda", codes, api_names.categories, inside[hit])
            in_cuda = tl.intersect(tl.union(s[hit], e[hit]), windows)
        rest = tl.subtract(windows, in_cuda)
        in_os = tl.EMPTY
        if len(osrt):
            mine = np.flatnonzero(np.asarray(osrt["gtid"], dtype=np.int64) == g)
            if mine.size:
                s = np.asarray(osrt["start"], dtype=np.int64)[mine]
                e = np.asarray(osrt["end"], dtype=np.int64)[mine]
                inside = tl.overlap_each(s, e, rest)
                hit = inside > 0
                names = as_labels(osrt["name"])
                _add(per, "osrt", names.codes[mine[hit]], names.categories, inside[hit])
                in_os = tl.intersect(tl.union(s[hit], e[hit]), rest)
        per[("outside", "outside CUDA")] = per.get(("outside", "outside CUDA"), 0) + \
            tl.total(rest) - tl.total(in_os)
    if whole <= 0:
        return []
    outside = ("outside", "outside CUDA")
    named = sorted(((k, v) for k, v in per.items() if k != outside),
                   key=lambda kv: (-kv[1], kv[0]))[:HOST_PARTS]
    items = sorted([*named, (outside, per.get(outside, 0))], key=lambda kv: -kv[1])
    return [{"name": name, "source": source, "ns": int(ns),
             "pct": round(100.0 * ns / whole, 2)}
            for (source, name), ns in items if ns > 0]


def _add(per: dict[tuple[str, str], int], source: str, codes: np.ndarray, texts,
         ns: np.ndarray) -> None:
    """Add each call's time (*ns*) to its name's (*codes* into *texts*)."""
    known = codes >= 0
    if not known.any():
        return
    sums = np.bincount(codes[known], weights=ns[known])
    for c in np.flatnonzero(sums).tolist():
        key = (source, str(texts[c]))
        per[key] = per.get(key, 0) + int(round(sums[c]))
