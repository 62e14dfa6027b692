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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpugap import __version__
from gpugap.accounting.metrics import METRIC_NAMES
from gpugap.ci.gates import HIGHER, NONE, STEADY_NAMES, direction_of, finding_metric_names, is_pct
from gpugap.ci.measure import Measurement, Measurements, measure, reported_range_names
from gpugap.rules.model import Severity

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
        if delta == 0 or abs(delta) <= self.noise + 1e-9:
            return UNCHANGED
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

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "cause": self.cause, "ranges": list(self.where),
                "status": self.status, "severity_before": self.severity_before,
                "severity_after": self.severity_after, "count_before": self.count_before,
                "count_after": self.count_after, "cost_ms_before": self.cost_ms_before,
                "cost_ms_after": self.cost_ms_after, "cost_ms_delta": self.cost_ms_delta}


@dataclass
class Diff:
    before: str
    after: str
    range: str | None                       # --range: everything restricted to it
    scopes: list[ScopeDiff]
    findings: list[FindingChange]
    warnings: list[str] = field(default_factory=list)

    def scope(self, scope: str | None) -> ScopeDiff:
        return next(s for s in self.scopes if s.scope == scope)

    def findings_with(self, status: str) -> list[FindingChange]:
        return [f for f in self.findings if f.status == status]

    def summary(self) -> dict[str, int]:
        return {s: len(self.findings_with(s)) for s in (NEW, FIXED, CHANGED, UNCHANGED)}

    def to_dict(self) -> dict[str, Any]:

        return {"gpugap_diff": 1, "gpugap_version": __version__, "before": self.before,
                "after": self.after, "range": self.range, "summary": self.summary(),
                "scopes": [s.to_dict() for s in self.scopes],
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
        scope_diffs.append(ScopeDiff(scope, scope in before.scopes, scope in after.scopes, [
            MetricChange(n, b.values.get(n), a.values.get(n), direction_of(n, directions))
            for n in names]))
    main = range_name
    warnings = [*before.warnings, *after.warnings]
    if before.thresholds != after.thresholds:
        warnings.append("the reports were analysed with different rule thresholds")
    return Diff(before.report, after.report, range_name, scope_diffs,
                compare_findings(before.scopes[main].findings, after.scopes[main].findings),
                warnings)


def diff(before_trace, after_trace, *, range_name: str | None = None,
         thresholds: Mapping[str, Mapping[str, float]] | None = None,
         min_severity: str = "info", directions: Mapping[str, str] | None = None) -> Diff:
    """Measure two traces the same way and compare them (see :func:`compare`)."""
    def measured(trace) -> Measurements:
        ranges = [range_name] if range_name else reported_range_names(trace)
        return measure(trace, ranges=ranges, whole=range_name is None,
                       thresholds=thresholds, min_severity=min_severity)

    return compare(measured(before_trace), measured(after_trace), range_name=range_name,
                   directions=directions)


__all__ = ["BETTER", "CHANGED", "FIXED", "NEW", "NOISE_POINTS", "NOISE_RELATIVE_PCT",
           "UNCHANGED", "WORSE", "Diff", "FindingChange", "MetricChange", "ScopeDiff",
           "compare", "compare_findings", "diff", "noise_floor"]
