"""Two reports side by side: metric deltas per scope, findings new / fixed / changed.

A finding is the same finding in both reports when it has the same rule, cause and
enclosing NVTX ranges (its *where*); findings sharing those are summed.

Metric changes are judged with :data:`gpugap.ci.gates.DIRECTIONS`: 'better' or 'worse'
when the change is larger than the metric's *noise floor*, else 'unchanged' (two runs
of one program never measure exactly alike, and a diff has no repeated runs to measure
their spread). The floors (:func:`noise_floor`):

=====================  ==================================================================
``*_pct`` metrics      :data:`NOISE_POINTS` (1) percentage point
every other metric     :data:`NOISE_RELATIVE_PCT` (5) percent of the *before* value (a
                       metric that was 0 has no floor: any change is one)
=====================  ==================================================================

A change of a metric without a direction (the workload: kernels, copy_time_ns, ...)
beyond its floor is 'changed'; 'n/a' when a side is null.

Better or worse is the time the program lost, not which metric moved
(:class:`Judgement`): the steady iteration's median time when both reports have
iterations (else the scope's span), beside each verdict's cost. A steady bucket's share
(``steady.<bucket>_pct``) is judged by its time (the share of the steady time per
iteration, :attr:`gpugap.ci.measure.Measurement.unit_ms`), the exposed copies of every
kind together (pageable copies that became pinned ones are no worse), the work buckets
(compute, CUDA graph) not at all: they are the program's work, not time lost. A finding
changed is worse or better by its cost, else by its count. NVTX ranges are grouped as
``analyze`` groups them (``step N``), and a diff of two different programs says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpugap import __version__
from gpugap.accounting.buckets import COPY_IDS, IDS, WORK_IDS
from gpugap.accounting.metrics import METRIC_NAMES
from gpugap.ci.gates import (
    HIGHER,
    NONE,
    STEADY_NAMES,
    direction_of,
    finding_metric_names,
    is_pct,
    matches,
)
from gpugap.ci.measure import Measurement, Measurements, measure, reported_range_names
from gpugap.rules.model import Severity
from gpugap.units import fmt_ns

NEW, FIXED, CHANGED, UNCHANGED = "new", "fixed", "changed", "unchanged"
BETTER, WORSE = "better", "worse"
# Run-to-run noise of one program, when no repeated runs measured it. Six good runs of
# one program (tests/data/captures/runs/good-*) spread by < 0.1 point in their steady-state
# shares and by < 0.1% in iteration time: a gain or loss below these floors is no
# evidence of a change. Their whole-report shares follow the start-up and spread by up to
# 7.6 points (a cold first run): no floor hides that; a baseline's measured spread does.
NOISE_POINTS = 1.0          # percentage points, for *_pct metrics
NOISE_RELATIVE_PCT = 5.0    # percent of the value before, for every other metric


def noise_floor(metric: str, before: float | int | None,
                points: float = NOISE_POINTS, relative_pct: float = NOISE_RELATIVE_PCT
                ) -> float:
    """The largest change of *metric* from *before* that is still noise: *points* for a
    percentage, *relative_pct* percent of *before* otherwise (0 when before is 0 or null)."""
    if is_pct(metric):
        return points
    return 0.0 if before is None else abs(float(before)) * relative_pct / 100.0


def diff_metric_names() -> list[str]:
    """Metrics a diff shows: analyze's, plus finding totals and per-rule counts/costs
    (per-cause detail is in the findings list)."""
    return [*METRIC_NAMES, *STEADY_NAMES,
            *(n for n in finding_metric_names() if n.count(".") <= 2)]


@dataclass
class MetricChange:
    metric: str
    before: float | int | None
    after: float | int | None
    direction: str
    noise: float | None = None      # the largest |delta| that is noise; None: noise_floor
    # Better or worse as the time it stands for moved (a steady bucket's share: its
    # time; Judgement), when that differs from the share's own move; None: the share's.
    judged: str | None = None

    def __post_init__(self) -> None:
        if self.noise is None:
            self.noise = round(noise_floor(self.metric, self.before), 6)

    @property
    def delta(self) -> float | int | None:
        if self.before is None or self.after is None:
            return None
        delta = self.after - self.before
        return delta if isinstance(delta, int) else round(delta, 6)

    @property
    def change(self) -> str:
        """better | worse | unchanged (within the noise floor) | changed (beyond it, no
        direction) | n/a (a side is null)."""
        delta = self.delta
        if delta is None:
            return "n/a"
        if delta == 0 or abs(delta) <= (self.noise or 0.0) + 1e-9:
            return UNCHANGED
        if self.judged is not None:
            return self.judged
        if self.direction == NONE:
            return CHANGED
        return BETTER if (delta > 0) == (self.direction == HIGHER) else WORSE

    @property
    def moved(self) -> bool:
        """Beyond the noise floor (better, worse, changed), or present on one side only."""
        if self.change == "n/a":
            return (self.before is None) != (self.after is None)
        return self.change != UNCHANGED

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "before": self.before, "after": self.after,
                "delta": self.delta, "direction": self.direction, "noise": self.noise,
                "change": self.change}


@dataclass
class ScopeDiff:
    scope: str | None                       # None: the whole report
    in_before: bool
    in_after: bool
    metrics: list[MetricChange]

    def get(self, metric: str) -> MetricChange:
        return next(m for m in self.metrics if m.metric == metric)

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "in_before": self.in_before, "in_after": self.in_after,
                "metrics": [m.to_dict() for m in self.metrics]}


@dataclass
class FindingChange:
    rule: str
    cause: str
    where: tuple[str, ...]                  # enclosing NVTX ranges, outer first
    status: str                             # new | fixed | changed | unchanged
    severity_before: str | None
    severity_after: str | None
    count_before: int
    count_after: int
    cost_ms_before: float
    cost_ms_after: float

    @property
    def cost_ms_delta(self) -> float:
        return round(self.cost_ms_after - self.cost_ms_before, 3)

    @property
    def change(self) -> str:
        """For a finding changed, by the time it costs: worse or better when its cost
        moved beyond the noise (NOISE_RELATIVE_PCT of before); else 'changed' (its
        count alone moved: a finding seen twice that costs nothing either way is
        neither). Its status otherwise."""
        if self.status != CHANGED:
            return self.status
        floor = NOISE_RELATIVE_PCT / 100.0
        delta = self.cost_ms_after - self.cost_ms_before
        if abs(delta) > floor * self.cost_ms_before and abs(delta) >= 0.001:
            return WORSE if delta > 0 else BETTER
        return CHANGED

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "cause": self.cause, "ranges": list(self.where),
                "status": self.status, "change": self.change,
                "severity_before": self.severity_before,
                "severity_after": self.severity_after, "count_before": self.count_before,
                "count_after": self.count_after, "cost_ms_before": self.cost_ms_before,
                "cost_ms_after": self.cost_ms_after, "cost_ms_delta": self.cost_ms_delta}


def _verdict_side(m: Measurement) -> dict[str, Any] | None:
    """What one side's verdict says of the time lost: its kind, its title (the headline
    up to its numbers), the time its cause takes (ms per steady iteration on average,
    else in the whole scope), the GPU's busy share."""
    v = m.verdict
    if v is None:
        return None
    it = v.iteration or {}
    lost_ms, per = None, None
    if v.kind == "bottleneck":
        if "cost_mean_ns" in it:
            lost_ms, per = it["cost_mean_ns"] / 1e6, "iteration"
        elif v.share_pct is not None and v.wall_ns:
            lost_ms, per = v.share_pct / 100.0 * v.wall_ns / 1e6, "scope"
    return {"kind": v.kind, "title": v.headline.split(": ")[0], "lost_ms": lost_ms,
            "per": per, "busy_pct": v.busy_pct}


@dataclass
class Judgement:
    """Better or worse by the time the program lost: the steady iteration's median
    time when both reports have iterations (``measure`` 'steady.iteration_ms'), else
    the scope's span ('span_ns'), both in ms; beyond :data:`NOISE_RELATIVE_PCT` of
    before, else unchanged. Beside it, each side's verdict (the cause that costs the
    most, and what it costs: :func:`_verdict_side`)."""

    change: str                             # better | worse | unchanged | n/a
    measure: str
    before_ms: float | None
    after_ms: float | None
    verdict_before: dict[str, Any] | None
    verdict_after: dict[str, Any] | None

    @property
    def delta_pct(self) -> float | None:
        if not self.before_ms or self.after_ms is None:
            return None
        return round(100.0 * (self.after_ms - self.before_ms) / self.before_ms, 1)

    def text(self, scope: str | None) -> str:
        """One sentence: 'better: the steady iteration's median went from 72.4 ms to
        11.9 ms (-83.6%); before, Input-bound (data loading) took 61.8 ms of each
        iteration on average; after, healthy (GPU busy 97.5%)'."""
        what = ("the steady iteration's median" if self.measure == "steady.iteration_ms"
                else "the whole report's span" if scope is None
                else f"the span of range '{scope}'")
        if self.before_ms is None or self.after_ms is None:
            return f"{self.change}: {what} is not known on both sides"
        head = (f"{self.change}: {what} went from {fmt_ns(self.before_ms * 1e6)} to "
                f"{fmt_ns(self.after_ms * 1e6)}")
        pct = self.delta_pct
        if pct is not None:
            head += (f" ({pct:+.1f}%" + (f", within the {NOISE_RELATIVE_PCT:g}% noise)"
                                         if self.change == UNCHANGED else ")"))
        sides = [_side_text(side) for side in (self.verdict_before, self.verdict_after)]
        if sides[0] or sides[1]:
            head += f"; before, {sides[0] or 'no verdict'}; after, {sides[1] or 'no verdict'}"
        return head

    def to_dict(self) -> dict[str, Any]:
        return {"change": self.change, "measure": self.measure,
                "before_ms": self.before_ms, "after_ms": self.after_ms,
                "delta_pct": self.delta_pct, "verdict_before": self.verdict_before,
                "verdict_after": self.verdict_after}


def _side_text(side: dict[str, Any] | None) -> str | None:
    if side is None:
        return None
    if side["kind"] == "bottleneck":
        if side["lost_ms"] is None:
            return side["title"]
        where = ("of each iteration on average" if side["per"] == "iteration"
                 else "in all")
        return f"{side['title']} took {fmt_ns(side['lost_ms'] * 1e6)} {where}"
    if side["kind"] == "healthy":
        return f"healthy (GPU busy {side['busy_pct']:.1f}%)"
    if side["kind"] == "spread":
        return f"no single cause (GPU busy {side['busy_pct']:.1f}%)"
    return side["title"]


def judge(before: Measurement, after: Measurement) -> Judgement:
    """The :class:`Judgement` of one scope measured on both sides."""
    b_it, a_it = before.value("steady.iteration_ms"), after.value("steady.iteration_ms")
    if b_it is not None and a_it is not None:
        measure, b_ms, a_ms = "steady.iteration_ms", float(b_it), float(a_it)
    else:
        measure = "span_ns"
        b_span, a_span = before.value("span_ns"), after.value("span_ns")
        b_ms = None if b_span is None else float(b_span) / 1e6
        a_ms = None if a_span is None else float(a_span) / 1e6
    if b_ms is None or a_ms is None:
        change = "n/a"
    elif abs(a_ms - b_ms) <= NOISE_RELATIVE_PCT / 100.0 * b_ms:
        change = UNCHANGED
    else:
        change = BETTER if a_ms < b_ms else WORSE
    return Judgement(change, measure, None if b_ms is None else round(b_ms, 6),
                     None if a_ms is None else round(a_ms, 6), _verdict_side(before),
                     _verdict_side(after))


def _bucket_times(m: Measurement) -> dict[str, float] | None:
    """Each steady bucket's time, in ms of Measurement.unit_ms."""
    if m.unit_ms is None:
        return None
    return {b: (m.value(f"steady.{b}_pct") or 0.0) / 100.0 * m.unit_ms for b in IDS}


def judge_buckets(before: Measurement, after: Measurement,
                  changes: Sequence[MetricChange]) -> None:
    """Judge each steady bucket's share (``steady.<bucket>_pct`` in *changes*) by the
    time it stands for: its share of each side's unit (Measurement.unit_ms), lower
    better; every kind of exposed copy together (what a change of memory kind moved
    from one bucket to another); the work buckets (compute, CUDA graph) not at all."""
    times = _bucket_times(before), _bucket_times(after)
    if times[0] is None or times[1] is None:
        return
    tb, ta = times
    for change in changes:
        bucket = change.metric.removeprefix("steady.").removesuffix("_pct")
        if not change.metric.startswith("steady.") or bucket not in tb:
            continue
        if bucket in WORK_IDS:
            change.judged = CHANGED
            continue
        group = COPY_IDS if bucket in COPY_IDS else (bucket,)
        was, now = sum(tb[g] for g in group), sum(ta[g] for g in group)
        if abs(now - was) <= NOISE_RELATIVE_PCT / 100.0 * was:
            change.judged = UNCHANGED
        else:
            change.judged = BETTER if now < was else WORSE


def _script(program: str | None) -> str | None:
    """'python3 /a/b/train.py' -> 'python3 train.py': one program wherever its clone is."""
    if not program:
        return None
    command, _, script = program.rpartition(" ")
    return f"{command} {script.rsplit('/', 1)[-1]}" if command else script


@dataclass
class Diff:
    before: str
    after: str
    range: str | None                       # --range: everything restricted to it
    scopes: list[ScopeDiff]
    findings: list[FindingChange]
    warnings: list[str] = field(default_factory=list)
    judgement: Judgement | None = None      # better or worse, by the time lost
    # The programs the reports ran ('python3 train.py'), when they record it: a diff of
    # two different ones says so (a warning).
    programs: tuple[str | None, str | None] = (None, None)

    @property
    def same_program(self) -> bool | None:
        """Whether both reports ran one program (None: one of them does not say)."""
        b, a = (_script(p) for p in self.programs)
        return None if b is None or a is None else b == a

    def scope(self, scope: str | None) -> ScopeDiff:
        return next(s for s in self.scopes if s.scope == scope)

    def findings_with(self, status: str) -> list[FindingChange]:
        return [f for f in self.findings if f.status == status]

    def summary(self) -> dict[str, int]:
        return {s: len(self.findings_with(s)) for s in (NEW, FIXED, CHANGED, UNCHANGED)}

    def to_dict(self) -> dict[str, Any]:

        return {"gpugap_diff": 1, "gpugap_version": __version__, "before": self.before,
                "after": self.after, "range": self.range,
                "judgement": None if self.judgement is None else self.judgement.to_dict(),
                "programs": list(self.programs), "same_program": self.same_program,
                "summary": self.summary(), "scopes": [s.to_dict() for s in self.scopes],
                "findings": [f.to_dict() for f in self.findings], "warnings": self.warnings}


def _findings_frame(findings: Sequence) -> pd.DataFrame:
    """Findings summed per (rule, cause, where); severity the worst of them."""
    frame = pd.DataFrame({
        "rule": [f.rule for f in findings], "cause": [f.cause for f in findings],
        "where": [" > ".join(f.ranges) for f in findings],
        "severity": [Severity(f.severity).rank for f in findings],
        "count": [int(f.count) for f in findings], "cost_ns": [int(f.cost_ns) for f in findings]},
        columns=["rule", "cause", "where", "severity", "count", "cost_ns"])
    return frame.groupby(["rule", "cause", "where"], sort=False).agg(
        severity=("severity", "max"), count=("count", "sum"), cost_ns=("cost_ns", "sum"))


def compare_findings(before: Sequence, after: Sequence) -> list[FindingChange]:
    """Findings matched by (rule, cause, where): new, fixed, changed, unchanged (count and
    cost within NOISE_RELATIVE_PCT of before). Fixed and new first, then by the size of
    the cost change."""
    joined = _findings_frame(before).merge(_findings_frame(after), how="outer",
                                           left_index=True, right_index=True,
                                           suffixes=("_b", "_a"))
    has_b, has_a = joined["count_b"].notna(), joined["count_a"].notna()
    joined = joined.fillna({"count_b": 0, "count_a": 0, "cost_ns_b": 0, "cost_ns_a": 0})
    # Within the noise floor of other metrics (NOISE_RELATIVE_PCT of before): unchanged.
    floor = NOISE_RELATIVE_PCT / 100.0
    same = (((joined["count_a"] - joined["count_b"]).abs() <= floor * joined["count_b"])
            & ((joined["cost_ns_a"] - joined["cost_ns_b"]).abs()
               <= floor * joined["cost_ns_b"]))
    joined["status"] = UNCHANGED
    joined.loc[has_b & has_a & ~same, "status"] = CHANGED
    joined.loc[~has_a, "status"] = FIXED
    joined.loc[~has_b, "status"] = NEW
    joined["order"] = joined["status"].map({FIXED: 0, NEW: 0, CHANGED: 1, UNCHANGED: 2})
    joined["moved"] = (joined["cost_ns_a"] - joined["cost_ns_b"]).abs()
    joined = joined.sort_values(["order", "moved"], ascending=[True, False], kind="stable")
    out = []
    for (rule, cause, where), row in joined.iterrows():
        out.append(FindingChange(
            rule=rule, cause=cause, where=tuple(where.split(" > ")) if where else (),
            status=row["status"],
            severity_before=(None if pd.isna(row["severity_b"])
                             else Severity.of_rank(int(row["severity_b"])).value),
            severity_after=(None if pd.isna(row["severity_a"])
                            else Severity.of_rank(int(row["severity_a"])).value),
            count_before=int(row["count_b"]), count_after=int(row["count_a"]),
            cost_ms_before=round(row["cost_ns_b"] / 1e6, 3),
            cost_ms_after=round(row["cost_ns_a"] / 1e6, 3)))
    return out


def compare(before: Measurements, after: Measurements, *, range_name: str | None = None,
            directions: Mapping[str, str] | None = None) -> Diff:
    """A Diff of two measured reports. Scopes: *range_name* alone when given, else the
    whole report and every range measured in either."""
    scopes = [range_name] if range_name else \
        list(dict.fromkeys([None, *before.scopes, *after.scopes]))
    names = diff_metric_names()
    empty = Measurement("", None, {}, [])
    scope_diffs = []
    for scope in scopes:
        b, a = before.scopes.get(scope, empty), after.scopes.get(scope, empty)
        changes = [MetricChange(n, b.values.get(n), a.values.get(n),
                                direction_of(n, directions)) for n in names]
        # (a direction the configuration gives a metric is its own: not judged here)
        judge_buckets(b, a, [c for c in changes
                             if not any(matches(d, c.metric) for d in directions or {})])
        scope_diffs.append(ScopeDiff(scope, scope in before.scopes, scope in after.scopes,
                                     changes))
    main = range_name
    warnings = [*before.warnings, *after.warnings]
    programs = (before.program, after.program)
    b_script, a_script = (_script(p) for p in programs)
    if b_script is not None and a_script is not None and b_script != a_script:
        warnings.insert(0, f"the two reports are different programs ('{b_script}' and "
                           f"'{a_script}'): a diff tells what a change did to one "
                           "program; across two, better and worse compare unlike work")
    if before.thresholds != after.thresholds:
        warnings.append("the reports were analysed with different rule thresholds")
    return Diff(before.report, after.report, range_name, scope_diffs,
                compare_findings(before.scopes[main].findings, after.scopes[main].findings),
                warnings, judge(before.scopes[main], after.scopes[main]), programs)


def diff(before_trace, after_trace, *, range_name: str | None = None,
         thresholds: Mapping[str, Mapping[str, float]] | None = None,
         min_severity: str = "info", directions: Mapping[str, str] | None = None) -> Diff:
    """Measure two traces the same way and compare them (see :func:`compare`)."""
    def measured(trace) -> Measurements:
        ranges = [range_name] if range_name else reported_range_names(trace, folded=True)
        return measure(trace, ranges=ranges, whole=range_name is None,
                       thresholds=thresholds, min_severity=min_severity)

    return compare(measured(before_trace), measured(after_trace), range_name=range_name,
                   directions=directions)


__all__ = ["BETTER", "CHANGED", "FIXED", "NEW", "NOISE_POINTS", "NOISE_RELATIVE_PCT",
           "UNCHANGED", "WORSE", "Diff", "FindingChange", "Judgement", "MetricChange",
           "ScopeDiff", "compare", "compare_findings", "diff", "judge", "judge_buckets",
           "noise_floor"]
