"""The verdict: the one thing to say first about a report.

Per device, over its steady state (or the user's ``--range``): the costliest problem,
either a finding (its cost settled from the accounting) or a bucket of problem time no
finding explains (copies that ran alone, say). When it holds at least 5% of the scope,
that is the bottleneck: its share of each iteration, a representative iteration (the one
whose cost is closest to the median) with the CUDA calls behind it, the fix, and the
iteration time without it. Otherwise the device is healthy (busy at least 90% of the
time: compute-bound, look inside the kernels next) or its idle time is spread over
causes none of which matters on its own.

Problems are ranked by the time they take out of the steady state (their total there,
equal to their mean per iteration): throughput is decided by the total, so a heavy
tail (a data loader that stalls every fourth batch) outranks a cost the median
iteration shows. With iterations they are of two kinds. Recurring ones cost time in
most iterations (median cost per iteration > 0): their headline gives the mean per
iteration, with the median and p90 as its distribution. Occasional ones hit a few
iterations (a recompilation, a checkpoint, a GC pause): their headline says in how many
iterations, and how often when they recur regularly (every N). The largest problem of
the other kind, when it reaches 5% too, is named beside the verdict (``also``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting import Accounting, AccountingIndex, DeviceAccount, host
from gpugap.accounting.buckets import BUSY_IDS, BY_ID, COPY_IDS, UNKNOWN, WORK_IDS
from gpugap.accounting.scope import Scope
from gpugap.analysis.host_evidence import HostEvidence
from gpugap.jsonout import Record
from gpugap.report.table import descending, unique_in_order
from gpugap.report.trace import Trace
from gpugap.rules.base import ERROR_PCT, RANGE_PHASE, WARN_PCT, Finding, Rule
from gpugap.rules.catalogue import pitfall_title
from gpugap.rules.evidence import host_calls
from gpugap.rules.model import Cause, Severity
from gpugap.units import fmt_ns

HEALTHY_BUSY_PCT = 90.0
# A problem costs time in an iteration when it takes at least this share of the median
# iteration there (a recompile's few microseconds of leftovers elsewhere do not count).
NOTICEABLE = 0.05
# A first use whose new work this share of the later iterations kept running: the
# loop's shape changed for good (_first_use_first).
FIRST_USE_KEPT = 0.5
# A bucket of problem time that no finding explains must hold this much of the scope to
# be the verdict: with no rule to explain it, a small share is more likely the edge of
# the scope (a pipeline filling, the first copy of a range) than a problem.
UNEXPLAINED_PCT = 10.0


@dataclass
class Verdict(Record):
    kind: str                      # bottleneck | healthy | spread | no-gpu-work
    device: int | None
    scope: str                     # "steady state" | "range NAME" | "whole timeline"
    headline: str
    share_pct: float | None = None
    severity: Severity = Severity.INFO
    finding: str | None = None     # id of the finding it comes from
    rule: str | None = None
    cause: str | None = None
    bucket: str | None = None
    fix: str = ""
    busy_pct: float | None = None
    wall_ns: int = 0
    iteration: dict[str, Any] | None = None
    breakdown: dict[str, float] = field(default_factory=dict)   # bucket -> % of the scope
    also: list[dict[str, Any]] = field(default_factory=list)    # occasional, costlier
    # The catalogue's pitfall that its finding matched (gpugap rules --causes), if any.
    pitfall: str | None = None
    # What the CPU ran while the GPU idled, for a cause on the host (None: another
    # cause; gpugap.analysis.host_evidence).
    host: HostEvidence | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def _representative(dev: DeviceAccount, f: Finding | None,
                    keep: np.ndarray | None = None) -> dict[str, Any] | None:
    """The steady iterations' times and, for *f*, the iteration closest to its median;
    *keep*: which steady iterations count (all by default)."""
    steady = dev.phases.steady_iterations
    if not len(steady):
        return None
    lo, hi = dev.phases.iteration_windows(steady)
    costs = None if f is None else getattr(f, "iteration_costs", None)
    if keep is not None and keep.any():
        steady = np.asarray(steady)[keep]
        lo, hi = lo[keep], hi[keep]
        costs = None if costs is None else np.asarray(costs)[keep]
    dur = hi - lo
    out: dict[str, Any] = {"count": int(lo.size), "median_ns": int(np.median(dur)),
                           "p90_ns": int(np.percentile(dur, 90))}
    if costs is None or not len(costs):
        return out
    median = float(np.median(costs))
    k = int(np.argmin(np.abs(costs - median)))
    index = steady[k]
    it = dev.phases.iterations
    mean_cost, mean_it = int(np.mean(costs)), int(np.mean(dur))
    out |= {"cost_mean_ns": mean_cost, "mean_ns": mean_it,
            "cost_median_ns": int(median), "cost_p90_ns": int(np.percentile(costs, 90)),
            "without_ns": max(mean_it - mean_cost, 0),
            "representative": {"index": int(index),
                               "label": it.labels[index] if it.labels else f"#{index}",
                               "start_ns": int(lo[k]), "end_ns": int(hi[k]),
                               "cost_ns": int(costs[k])}}
    return out


def _calls(trace: Trace, dev: DeviceAccount, call_category: str | None,
           window: tuple[int, int]) -> list[dict[str, Any]]:
    """The CUDA calls of *call_category* (gpugap.accounting.host.CATEGORIES: the calls
    that show the cause) or, without one, the longest calls of the launching threads
    during one iteration."""
    lo, hi = window
    work = dev.work
    # The threads that launched the work that ran in the window (its ops, by GPU time).
    ops = np.arange(*work.searchsorted([lo, hi]).tolist())
    gtid = work.gather("gtid", ops)
    threads = unique_in_order(gtid[~np.isnan(gtid)]).astype(np.int64).tolist() \
        or [dev.gaps.main_gtid]
    api = trace.table("api")
    category = None if call_category is None else host.CATEGORIES.index(call_category)
    if category is not None and len(api):
        # The threads' calls that overlap the window (searched, not a mask of every call).
        index = AccountingIndex.of(trace)
        calls = index.calls
        found = np.sort(np.concatenate(
            [calls.rows(calls.overlapping(g, lo, hi)) for g in threads]
            or [np.zeros(0, np.int64)]))
        rows = api.rows(found[index.api_categories[found] == category])
        if len(rows):
            inside = (np.minimum(rows["end"], hi) - np.maximum(rows["start"], lo))
            # Per name (names in order), the largest total time first: the five longest.
            names, per_call = np.unique(rows.labels("name").strings().astype(str),
                                        return_inverse=True)
            count = np.bincount(per_call, minlength=names.size)
            ns = np.zeros(names.size, dtype=np.int64)
            np.add.at(ns, per_call, inside.astype(np.int64))
            return [{"name": str(names[i]), "count": int(count[i]), "ns": int(ns[i])}
                    for i in descending(ns)[:5].tolist()]
    calls = host_calls(trace, [(int(g), lo, hi) for g in threads])
    merged: dict[tuple[str, str], dict] = {}
    for rows in calls:
        for r in rows:
            key = (r["source"], r["name"])
            item = merged.setdefault(key, {"name": r["name"], "source": r["source"],
                                           "count": 0, "ns": 0})
            item["count"] += r["calls"]
            item["ns"] += r["ns"]
    return sorted(merged.values(), key=lambda r: -r["ns"])[:5]


def decide_device(trace: Trace, dev: DeviceAccount, findings: list[Finding],
                  causes: Mapping[tuple[str, str], Cause],
                  scope: Scope) -> Verdict:
    """The verdict of one device; *causes*: the Cause of each (rule id, cause id) of
    *findings* (what the verdict calls it, the calls that show it)."""
    windows = scope.on(dev.device)
    wall = tl.total(windows)
    label = scope.label(dev.device)
    if wall <= 0:
        return Verdict("no-gpu-work", dev.device, label,
                       f"GPU {dev.device}: nothing to judge in the {label}")
    totals = dev.totals_in(windows)
    busy = sum(totals[b] for b in BUSY_IDS)
    breakdown = {b: _pct(v, wall) for b, v in sorted(totals.items(), key=lambda kv: -kv[1])
                 if v > 0}
    # The findings of what is judged: the steady state's, or a --range's steady part
    # (its one-time parts are listed apart, as a whole report's are).
    judged = (RANGE_PHASE, None) if scope.is_range else ("steady",)
    # Not the findings their rule holds to be context (max_severity info: a library
    # kernel's grid, a small skew between ranks): never the bottleneck.
    mine = [f for f in findings if f.device == dev.device and f.cost_ns > 0
            and f.phase in judged and f.max_severity != Severity.INFO]
    # (Context findings explain their time too: it is no unexplained bottleneck.)
    explained = {b for f in findings if f.device == dev.device and f.claim is not None
                 and f.phase in judged and f.cost_ns > 0
                 for b in f.claim.buckets}
    # (Without a loop, copies have no next batch's compute to overlap: the program's
    # work, not a bottleneck of its own.)
    looped = dev.phases.iterations is not None
    # Copies that ran alone cost what overlapping them could save: at most the compute
    # they could have run under (a copy benchmark, all copies, loses nothing by it).
    computing = sum(totals[b] for b in WORK_IDS)
    lost = {b: min(v, computing) if b in COPY_IDS else v for b, v in totals.items()
            if b not in WORK_IDS and (looped or b not in COPY_IDS) and b not in explained}
    unexplained = [(v, b) for b, v in lost.items() if _pct(v, wall) >= UNEXPLAINED_PCT]
    steady = _representative(dev, None) if not scope.is_range else None
    # Every problem by the time it takes out of the scope (module doc).
    candidates = [(f.cost_ns, f, None) for f in mine] + [(v, None, b) for v, b in unexplained]
    top_cost, top, bucket = max(candidates, key=lambda c: c[0], default=(0, None, None))
    # A share of the scope is at most 100% (garbled launch times can say otherwise).
    share = min(_pct(top_cost, wall), 100.0)
    steady_share = share
    if share < WARN_PCT and not scope.is_range:
        # Nothing to fix: then why the GPU idles is what to say, when a context finding
        # explains it (a server waiting for requests: idle capacity, at info).
        held = [f for f in findings if f.device == dev.device and f.phase == "steady"
                and f.max_severity == Severity.INFO and f.cost_ns > 0
                and f.evidence.get("note", "").startswith("idle capacity")]
        if held:
            top = max(held, key=lambda f: f.cost_ns)
            top_cost, bucket = top.cost_ns, None
            share = min(_pct(top_cost, wall), 100.0)
    iterated = steady is not None and steady["count"] >= 3 and steady["median_ns"] > 0
    # A cost under this share of the median iteration does not show in an iteration.
    floor = NOTICEABLE * steady["median_ns"] if iterated and steady is not None else 0.0

    def recurring(f: Finding) -> bool:
        return _recurring(f, floor)
    inside = _inside_loop(findings, causes, dev, wall)
    context = [c for c in (_context(findings, causes, dev, wall) if not scope.is_range else [])
               if top is None or c["finding"] != top.id]
    busy_pct = _pct(busy, wall)
    iteration = _representative(dev, top) if not scope.is_range else None
    per = f"the {label}"
    first = _first_use_first(findings, causes, dev, wall, busy_pct, label,
                             steady_share >= WARN_PCT) if not scope.is_range else None
    if first is not None:
        # The loop spent more on the first use of new work (one-time, out of the steady
        # state) than on all its steady iterations: that is what to say first (see
        # _first_use_first for when a steady bottleneck still comes first).
        f, head, loop_share = first
        return Verdict("bottleneck", dev.device, label, head, share_pct=loop_share,
                       severity=f.severity, finding=f.id, rule=f.rule, cause=f.cause,
                       fix=f.fix, busy_pct=busy_pct, wall_ns=wall,
                       iteration=_representative(dev, None), breakdown=breakdown,
                       also=[a for a in ([{"finding": top.id, "headline": _occasional_headline(
                           top, _cause(causes, top), wall, floor) if not recurring(top)
                           else _title(top, _cause(causes, top))
                           + f": {share:.1f}% of the {label} on GPU {dev.device}"}]
                           if top is not None and share >= WARN_PCT else [])] + context)
    if top_cost <= 0 or share < WARN_PCT:
        if busy_pct >= HEALTHY_BUSY_PCT:
            copies = sum(v for b, v in totals.items() if b in COPY_IDS)
            if copies > 0.5 * busy:
                head = (f"GPU {dev.device} busy {busy_pct:.1f}% of {per}: transfer-bound "
                        f"(copies {_pct(copies, wall):.1f}%); move less data, or keep it "
                        "on the GPU between uses")
            else:
                head = (f"GPU {dev.device} busy {busy_pct:.1f}% of {per}: compute-bound; "
                        "look inside the kernels next (e.g. with Nsight Compute)")
            kind = "healthy"
        else:
            idle = [(v, b) for b, v in totals.items() if b not in BUSY_IDS and v > 0]
            ns, bucket = max(idle, default=(0, UNKNOWN))
            head = (f"GPU {dev.device} busy {busy_pct:.1f}% of {per}; no single cause "
                    f"reaches {WARN_PCT:g}%: the largest is {BY_ID[bucket].title} "
                    f"({_pct(ns, wall):.1f}%)")
            kind = "spread"
        return Verdict(kind, dev.device, label, head, busy_pct=busy_pct, wall_ns=wall,
                       iteration=_representative(dev, None) if not scope.is_range else None,
                       breakdown=breakdown, also=inside + context)
    also = []
    if iterated and top is not None and not recurring(top):
        # The iterations an occasional problem spared: how the others fare there.
        spared = np.asarray(top.iteration_costs) <= floor
        others = sorted((f for f in mine if f is not top and recurring(f)),
                        key=lambda f: -float(np.asarray(f.iteration_costs)[spared].sum()))[:1]
        also = [{"finding": f.id, "headline": head}
                for f in others if (head := _recurring_headline(f, _cause(causes, f), dev,
                                                                 spared))]
    elif iterated:
        also = [{"finding": f.id,
                 "headline": _occasional_headline(f, _cause(causes, f), wall, floor)}
                for f in sorted((f for f in mine if f is not top and not recurring(f)
                                 and _pct(f.cost_ns, wall) >= WARN_PCT),
                                key=lambda f: -f.cost_ns)[:1]]
    also = _then(findings, causes, top, wall, label) + also + inside + context
    if top is not None and not recurring(top) and iterated and iteration is not None:
        # An occasional problem as the verdict: where it struck, not a typical iteration.
        iteration = _representative(dev, None)
        head = _occasional_headline(top, _cause(causes, top), wall, floor)
        return Verdict("bottleneck", dev.device, label, head, share_pct=share,
                       severity=top.severity, finding=top.id, rule=top.rule, cause=top.cause,
                       bucket=top.claim.buckets[0] if top.claim and len(top.claim.buckets) == 1
                       else None, fix=top.fix, busy_pct=busy_pct, wall_ns=wall,
                       iteration=iteration, breakdown=breakdown, also=also)
    if top is not None:
        fix = top.fix
        severity = top.severity
        cause = top.cause
        bucket = top.claim.buckets[0] if top.claim and len(top.claim.buckets) == 1 else None
        top_cause = _cause(causes, top)
        title, call_category = _title(top, top_cause), top_cause.call_category
    else:
        fix = BY_ID[bucket].fix
        severity = Severity.of_share(share, WARN_PCT, ERROR_PCT)   # share >= WARN_PCT here
        cause = bucket
        title = f"{BY_ID[bucket].title} (no overlap with compute)"
        call_category = BY_ID[bucket].call_category
    head = f"{title}: {share:.1f}% of {per} on GPU {dev.device}"
    if iteration and "without_ns" in iteration:
        head += ": " + _per_iteration(iteration)
    if iteration and "representative" in iteration:
        rep = iteration["representative"]
        rep["calls"] = _calls(trace, dev, call_category, (rep["start_ns"], rep["end_ns"]))
    return Verdict("bottleneck", dev.device, label, head, share_pct=share, severity=severity,
                   finding=None if top is None else top.id,
                   rule=None if top is None else top.rule, cause=cause, bucket=bucket,
                   fix=fix, busy_pct=busy_pct, wall_ns=wall, iteration=iteration,
                   breakdown=breakdown, also=also)


def _per_iteration(it: dict[str, Any]) -> str:
    """'12.1 ms lost per iteration on average (median 1.2 ms, p90 45 ms) of a 33.2 ms
    iteration, about 21.1 ms without it': the median and p90 are of the time lost, and
    read as such (beside it, not beside the iteration's length)."""
    return (f"{fmt_ns(it['cost_mean_ns'])} lost per iteration on average (median "
            f"{fmt_ns(it['cost_median_ns'])}, p90 {fmt_ns(it['cost_p90_ns'])}) of a "
            f"{fmt_ns(it['mean_ns'])} iteration, about {fmt_ns(it['without_ns'])} "
            "without it")


def _recurring_headline(f: Finding, cause: Cause, dev: DeviceAccount, keep: np.ndarray
                        ) -> str | None:
    """'Launch-bound: 64.3% of the 97 other iterations on GPU 0: 502 us of a 781 us
    iteration on average (...)', over the steady iterations *keep* says; None when it
    holds less than WARN_PCT of them."""
    it = _representative(dev, f, keep)
    if not it or "cost_mean_ns" not in it:
        return None
    share = _pct(it["cost_mean_ns"], it["mean_ns"])
    if share < WARN_PCT:
        return None
    where = ("the steady state" if keep.all()
             else f"the {it['count']} other iterations")
    return (f"{_title(f, cause)}: {share:.1f}% of {where} on GPU {f.device}: "
            f"{_per_iteration(it)}")


def _then(findings: list[Finding], causes: Mapping[tuple[str, str], Cause],
          top: Finding | None, wall: int, label: str) -> list[dict[str, Any]]:
    """A peer the verdict's finding settled before (its evidence deferred to it: small
    grids on streams the legacy stream serialized) that still costs WARN_PCT or more on
    its own: what to do next, once the first is done ('next, once this is fixed: Grids
    too small for the GPU (45.0% more of the steady state): ...')."""
    if top is None or wall <= 0:
        return []
    peers = sorted((f for f in findings if f.consequence_of == top.id
                    and f.rule != top.rule and top.rule in f.settles_after
                    and _pct(f.cost_ns, wall) >= WARN_PCT), key=lambda f: -f.cost_ns)
    return [{"finding": f.id, "headline": "next, once this is fixed: "
             f"{_title(f, _cause(causes, f))} ({_pct(f.cost_ns, wall):.1f}% more of the "
             f"{label})" + (f": {f.evidence['then_fix']}" if f.evidence.get("then_fix")
                            else "")}
            for f in peers[:1]]


def _first_use_first(findings: list[Finding], causes: Mapping[tuple[str, str], Cause],
                     dev: DeviceAccount, wall: int, busy_pct: float, label: str,
                     steady_bottleneck: bool) -> tuple[Finding, str, float] | None:
    """The first use of new work inside the loop (left out of the steady state), when it
    cost more than the steady state's whole wall time: (its finding, the headline, its
    share of the loop: steady state and first uses together). 'Recompilation for new
    shapes (...): 5.92 s in 1 of 59 iterations (step 20) on GPU 0 (83.1% of the loop's
    time; a one-time cost per new shape, left out of the steady state, where GPU 0 is
    busy 96.0%)'. Where the steady state has a bottleneck of its own
    (*steady_bottleneck*), that recurs for as long as the program runs and comes first,
    unless the loop kept the new work (FIRST_USE_KEPT of the later iterations ran it: its
    input shape changed for good, and will again with the next one), rather than going
    back to what it ran before (an evaluation's first call, once)."""
    inside = [f for f in findings if f.device == dev.device and f.phase != "steady"
              and f.evidence.get("inside_loop") and f.cost_ns > 0]
    if not inside or wall <= 0:
        return None
    f = max(inside, key=lambda f: f.cost_ns)
    if f.cost_ns <= wall:
        return None
    if steady_bottleneck and max(f.evidence.get("kept_after") or [0.0]) < FIRST_USE_KEPT:
        return None
    named = f.evidence.get("iterations") or []
    of = f.evidence.get("of_iterations") or len(named)
    loop = wall + f.evidence.get("window_ns", f.cost_ns)
    share = min(_pct(f.cost_ns, loop), 100.0)
    head = (f"{_title(f, _cause(causes, f))}: {fmt_ns(f.cost_ns)} in {len(named)} of {of} "
            "iterations (" + ", ".join(named[:4]) + (", ..." if len(named) > 4 else "")
            + f") on GPU {dev.device} ({share:.1f}% of the loop's time; a one-time cost "
            f"per new shape or path, left out of the {label}, where GPU {dev.device} is "
            f"busy {busy_pct:.1f}%)")
    return f, head, share


def _context(findings: list[Finding], causes: Mapping[tuple[str, str], Cause],
             dev: DeviceAccount, wall: int) -> list[dict[str, Any]]:
    """A steady-state finding its rule holds to be context (max_severity info: idle
    capacity, a library kernel's grid) that reaches WARN_PCT: said beside the verdict,
    never as its bottleneck ('context: Waiting for work from another thread: 53.4% of
    the steady state (idle capacity: ...)')."""
    held = sorted((f for f in findings if f.device == dev.device and f.phase == "steady"
                   and f.max_severity == Severity.INFO and f.cost_ns > 0
                   and _pct(f.cost_ns, wall) >= WARN_PCT), key=lambda f: -f.cost_ns)
    return [{"finding": f.id, "headline": (
        f"context: {_title(f, _cause(causes, f))}: {_pct(f.cost_ns, wall):.1f}% of the "
        "steady state" + (f" ({f.evidence['note']})" if f.evidence.get("note") else "")
        + ", not counted as a bottleneck")} for f in held[:1]]


def _inside_loop(findings: list[Finding], causes: Mapping[tuple[str, str], Cause],
                 dev: DeviceAccount, wall: int) -> list[dict[str, Any]]:
    """One-time costs inside the loop (the first use of new work, left out of the steady
    state: gpugap.accounting.phases.first_uses), named beside the steady state's verdict
    when they reach WARN_PCT of it: 'one-time, inside the loop: Autotuning on the first
    use of new shapes (...): 723 ms in step 8, step 16, step 24'."""
    out = []
    for f in sorted((f for f in findings if f.device == dev.device and f.phase != "steady"
                     and f.evidence.get("inside_loop") and f.cost_ns > 0),
                    key=lambda f: -f.cost_ns):
        if _pct(f.cost_ns, wall) < WARN_PCT:
            continue
        named = f.evidence.get("iterations") or []
        out.append({"finding": f.id, "headline": (
            f"one-time, inside the loop: {_title(f, _cause(causes, f))}: "
            f"{fmt_ns(f.cost_ns)} in " + ", ".join(named[:4])
            + (", ..." if len(named) > 4 else "")
            + f" on GPU {f.device} (left out of the steady state)")})
    return out[:1]


def _recurring(f: Finding, floor: float = 0.0) -> bool:
    """Does *f* cost time in most steady iterations (median cost per iteration above
    *floor*: a share of the median iteration too small to matter there)?"""
    costs = getattr(f, "iteration_costs", None)
    return costs is not None and len(costs) > 0 and float(np.median(costs)) > floor


def _occasional_headline(f: Finding, cause: Cause, wall: int, floor: float = 0.0) -> str:
    """'Recompilation: 2.62 s in 1 of 98 iterations (90.6% of the steady state)'; the
    iterations it hit: where it cost more than *floor*."""
    costs = getattr(f, "iteration_costs", None)
    where = ""
    if costs is not None and len(costs):
        hits = np.flatnonzero(np.asarray(costs) > floor)
        where = f" in {hits.size} of {len(costs)} iterations"
        every = _every(hits) if cause.periodic else None
        named = f.evidence.get("iterations") if not cause.periodic else None
        if every:
            where += f", every {every}"
        elif named:
            where += " (" + ", ".join(named[:4]) + (", ..." if len(named) > 4 else "") + ")"
    title = (cause.occasional_title if cause.occasional_title is not None
             and f.phase == "steady" else _title(f, cause))
    return (f"{title}: {fmt_ns(f.cost_ns)}{where} on GPU {f.device} "
            f"({_pct(f.cost_ns, wall):.1f}% of the steady state)")


def _every(hits: np.ndarray) -> int | None:
    """N when the iterations hit recur every N iterations (one off allowed), else None."""
    if hits.size < 2:
        return None
    gaps = np.diff(hits)
    n = int(np.median(gaps))
    return n if n > 1 and bool((np.abs(gaps - n) <= 1).all()) else None


def _cause(causes: Mapping[tuple[str, str], Cause], f: Finding) -> Cause:
    """The Cause of *f*; one that says nothing more than its id when its rule does not
    declare it."""
    return causes.get((f.rule, f.cause)) or Cause(f.cause, "", "")


def _title(f: Finding, cause: Cause) -> str:
    """What the verdict calls *f*'s cause: its title, else 'rule-id [cause-id]'; a
    device waiting for others names them ('Waiting for another GPU (GPU 1)'); what the
    finding's evidence adds to it (``title_detail``) follows in parentheses."""
    title = pitfall_title(f) or (cause.title if cause.title is not None
                                 else f"{f.rule} [{f.cause}]")
    awaited = f.evidence.get("awaited_devices") if cause.waits_for_device else None
    if awaited:
        title += " (" + ", ".join(f"GPU {d}" for d in awaited) + ")"
    # What the finding's evidence adds to its name in a headline (the rule says it).
    detail = f.evidence.get("title_detail")
    return f"{title} ({detail})" if detail else title


def decide(trace: Trace, accounting: Accounting, findings: list[Finding],
           rules: Iterable[Rule], scope: Scope | None = None
           ) -> tuple[Verdict | None, dict[int, Verdict]]:
    """The verdict of each device, and the one to say first: the worst bottleneck (the
    largest share), else the first device's. *rules*: those that made *findings* (what
    their causes are called, the calls that show them)."""
    causes = {(r.id, c.id): c for r in rules for c in r.causes.values()}
    pitfalls = {f.id: f.evidence["pitfall"] for f in findings if f.evidence.get("pitfall")}
    if scope is None:                                  # each device's steady state
        scope = Scope.of(accounting.devices)
    per_device = {d: decide_device(trace, dev, findings, causes, scope)
                  for d, dev in accounting.devices.items()}
    per_device = {d: replace(v, pitfall=pitfalls.get(v.finding or "")) if v.finding in
                  pitfalls else v for d, v in per_device.items()}
    if not per_device:
        return None, {}
    bottlenecks = [v for v in per_device.values() if v.kind == "bottleneck"]
    first = max(bottlenecks, key=lambda v: v.share_pct or 0) if bottlenecks else \
        next(iter(per_device.values()))
    first = _cause_before_symptom(first, per_device, accounting, causes)
    return _waited_for(first, per_device, findings, accounting, causes), per_device


def _waited_for(first: Verdict, per_device: dict[int, Verdict], findings: list[Finding],
                accounting: Accounting, causes: Mapping[tuple[str, str], Cause]
                ) -> Verdict:
    """The worst bottleneck is a device's own (launch-bound...) while another rank waits
    for it inside collectives in the steady state, at WARN_PCT or more of that rank's
    steady state: the device is the job's late rank, and the headline says so ('Rank 0
    (GPU 0) is late: launch-bound ...; rank 1 (GPU 1) waits for it 20.3% of its steady
    state')."""
    if first.kind != "bottleneck" or first.device is None or len(per_device) < 2 \
            or first.headline.casefold().startswith(("rank", "gpu")):
        return first
    cause = causes.get((first.rule or "", first.cause or ""))
    if cause is not None and cause.waits_for_device:
        return first
    waiting = []
    for f in findings:
        c = causes.get((f.rule, f.cause))
        other = per_device.get(f.device)
        if (c is None or c.waits_for_device != "collective" or f.device == first.device
                or f.phase != "steady" or f.severity < Severity.WARNING or other is None
                or not other.wall_ns):
            continue
        share = _pct(f.cost_ns, other.wall_ns)
        if share >= WARN_PCT:
            waiting.append((share, f))
    if not waiting:
        return first
    # With more ranks, the one waited for is the one that waits least itself.
    if len(per_device) > 2 and any(f.device == first.device and
                                   _pct(f.cost_ns, first.wall_ns or 1) >= WARN_PCT
                                   for _, f in waiting):
        return first
    share, f = max(waiting, key=lambda w: w[0])
    who, whom = _who(first.device, accounting), _who(f.device, accounting)
    head = first.headline
    if head[1:2].islower():                     # 'Launch-bound: ...', not 'GPU 0 ...'
        head = head[:1].lower() + head[1:]
    waits_line = {"finding": f.id, "headline": f"{_capital(whom)} waits for {who} inside "
                  f"collectives: {share:.1f}% of its steady state"}
    return replace(first, headline=_capital(f"{who} is late: {head}"),
                   also=[waits_line, *first.also])


def _cause_before_symptom(first: Verdict, per_device: dict[int, Verdict],
                          accounting: Accounting,
                          causes: Mapping[tuple[str, str], Cause]) -> Verdict:
    """When the worst verdict is a device waiting for another (inside collectives, or
    for a GPU it takes data from), the one to say first is the device waited for: its
    own bottleneck, named as the late one ('rank 1 (GPU 1) is late: launch-bound ...'),
    the waiting beside it; or, when that device is busy (healthy), the symptom named
    with its cause ('rank 1 is the late rank: its GPU computes 98.9% ...'; a pipeline
    stage that sets the pace). Devices that wait for each other keep the symptom: the
    stages run one after the other."""
    def waits(v: Verdict) -> str | None:
        cause = causes.get((v.rule or "", v.cause or ""))
        return cause.waits_for_device if v.kind == "bottleneck" and cause is not None \
            else None

    if not waits(first) or first.device is None:
        return first
    peers = _sources(first, accounting)
    candidates = [d for d in (peers or per_device) if d in per_device and d != first.device]
    if not candidates:
        return first
    # The device waited for: among those it takes data from (or the job's others), the
    # one that waited least itself.
    awaited = min(candidates, key=lambda d: per_device[d].share_pct or 0.0
                  if waits(per_device[d]) else 0.0)
    other = per_device[awaited]
    who = _who(awaited, accounting)
    symptom = {"finding": first.finding, "headline": first.headline}
    if other.kind == "bottleneck" and not waits(other):
        return replace(other, headline=_capital(f"{who} is late: {other.headline}"),
                       also=[symptom, *other.also])
    if other.kind == "healthy" and waits(first) == "data":
        return replace(other, headline=_capital(
            f"{who} sets the pace, busy {other.busy_pct:.1f}% of the {other.scope}; GPU "
            f"{first.device} waits for it {first.share_pct:.1f}% (stages out of balance: "
            "move work to the waiting stage)"), also=[symptom])
    if other.kind == "healthy":
        return replace(first, headline=_capital(
            f"{who} is the late rank: its GPU is busy {other.busy_pct:.1f}% of the "
            f"{other.scope} (more work than the others: an uneven batch or shard); "
            f"{first.headline}"))
    return first


def _sources(first: Verdict, accounting: Accounting) -> list[int]:
    """The devices *first*'s device takes data from (the program model's links)."""
    program = accounting.program
    if program is None:
        return []
    return sorted({link.src for link in program.links if link.dst == first.device})


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _who(device: int, accounting: Accounting) -> str:
    """'rank 1 (GPU 1)' or 'GPU 1' (gpugap.program.Program.who)."""
    program = accounting.program
    return f"GPU {device}" if program is None else program.who(device)
