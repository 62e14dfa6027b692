"""Gates: thresholds on a report's metrics that a CI build must hold.

A *gate* is ``METRIC >= LIMIT`` (``min``) or ``METRIC <= LIMIT`` (``max``) over a scope:
the whole report or one NVTX range. :func:`measure` turns a trace into every gateable
metric of the scopes asked for (one run of the rules, whatever the number of scopes);
:func:`evaluate` holds gates (and, optionally, a baseline) against them::

    from gpugap import gates
    from gpugap.report import load

    result = gates.evaluate(load("run.sqlite"), [gates.Gate("kernel_overlap_pct", "min", 50)],
                            range_name="measured")
    result.passed            # False when any gate failed

Metric names
    Every metric of ``gpugap analyze`` (:data:`gpugap.metrics.METRIC_NAMES`), plus the
    findings of the scope, counted and costed:

    ============================  ====================================================
    ``findings.count``            occurrences of every finding (a finding folds
                                  ``count`` occurrences, e.g. 8 blocking copies)
    ``findings.cost_ms``          GPU time they cost, in milliseconds
    ``findings.RULE.count``       the same for one rule, e.g. ``findings.launch-gap.count``
    ``findings.RULE.cost_ms``
    ``findings.RULE.CAUSE.count`` one cause of a rule, e.g.
    ``findings.RULE.CAUSE.cost_ms``  ``findings.blocking-memcpy.pageable-async.count``
    ============================  ====================================================

    Findings below ``min_severity`` (default ``info``: none) are left out of the counts.
    A rule that found nothing counts 0, never null. Costs are the accounting's: the
    costs of a scope's findings never add up to more than its wall time.

    The steady state (gpugap.accounting: iterations after warm-up), all devices together:

    ============================  ====================================================
    ``steady.iteration_ms``       median iteration time (the slowest device's)
    ``steady.iterations``         steady iterations
    ``steady.gpu_busy_pct``       share of the steady state the GPU was busy
    ``steady.idle_pct``           100 - busy
    ``steady.BUCKET_pct``         share of one bucket, e.g. ``steady.synchronization_pct``,
                                  ``steady.launch-bound_pct``, ``steady.input_pct``
    ``steady.comm_compute_overlap_pct``  share of the steady state's communication time
                                  hidden under compute (all devices)
    ``steady.exposed_comm_ms``    exposed communication per iteration (the worst
                                  device's; in a --range: the range's total)
    ============================  ====================================================

    In a ``--range`` scope the steady.* shares describe the range (iteration figures
    are null there).

    The job (several reports, the ranks of one job: gpugap.job), gated once per check:

    ====================================  ============================================
    ``job.ranks``                         reports analyzed
    ``job.failed_reports``                reports that could not be analyzed
    ``job.iteration_ms``                  median iteration time of the slowest rank
    ``job.skew_pct``                      spread of the ranks' median iteration times,
                                          % of the fastest
    ``job.wait_ms_per_iteration``         time the rank that waits most spends inside
                                          collectives before the last rank starts them,
                                          per iteration
    ``job.wait_pct``                      that, as a share of an iteration
    ``job.worst_comm_compute_overlap_pct``  the lowest rank's communication overlap
    ``job.worst_exposed_comm_ms``         the highest rank's exposed communication per
                                          iteration
    ``job.worst_gpu_busy_pct``            the lowest rank's steady busy share
    ====================================  ============================================

Null metrics
    Some metrics have no value in a scope: ``copy_compute_overlap_pct`` without copies,
    ``kernel_overlap_pct`` and ``concurrency`` without kernels. A gate on a null metric
    fails, with a message that says why, unless ``allow_missing`` (then it is skipped).

Directions (used by baselines and ``gpugap diff``): see :data:`DIRECTIONS`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from gpugap.errors import UsageError
from gpugap.job import JOB_METRICS
from gpugap.metrics import METRIC_NAMES

MIN, MAX, BASELINE = "min", "max", "baseline"
DATA = "data"           # the report itself: complete enough to be judged (lost GPU data)
LOST_GPU_DATA = "gpu_data_lost"
PASS, FAIL, SKIP = "pass", "fail", "skip"
HIGHER, LOWER, NONE = "higher", "lower", "none"
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
FINDING_FIELDS = ("count", "cost_ms")

# Which way a metric should move, first match wins. Patterns: ``*`` matches within one
# dot-separated part of a name, ``**`` across parts. Override per metric with
# ``directions={"kernels": "lower"}`` (config: ``[tool.gpugap.directions]``).
DIRECTIONS: tuple[tuple[str, str, str], ...] = (
    ("kernel_overlap_pct", HIGHER, "kernels of different streams run side by side"),
    ("copy_compute_overlap_pct", HIGHER, "copies hide under compute"),
    ("gpu_busy_pct", HIGHER, "the GPU has work more of the time"),
    ("concurrency", HIGHER, "more streams' kernels in flight at once"),
    ("gpu_idle_pct", LOWER, "fewer holes in the timeline"),
    ("span_ns", LOWER, "the same work finishes sooner"),
    ("findings.**", LOWER, "fewer problems, less GPU time lost to them"),
    ("steady.iteration_ms", LOWER, "each iteration of the steady state takes less time"),
    ("steady.gpu_busy_pct", HIGHER, "the GPU works more of each iteration"),
    ("steady.compute_pct", HIGHER, "more of each iteration is compute"),
    ("steady.graph_pct", HIGHER, "more of each iteration is CUDA-graph work"),
    ("steady.iterations", NONE, "describes the run, not its quality"),
    ("steady.comm_compute_overlap_pct", HIGHER, "more communication hidden under compute"),
    ("comm_compute_overlap_pct", HIGHER, "more communication hidden under compute"),
    ("exposed_comm_ns", LOWER, "less communication the GPU waits on"),
    ("steady.*", LOWER, "less of each iteration idle or in exposed copies/communication"),
    ("job.skew_pct", LOWER, "the ranks' iterations take the same time"),
    ("job.wait_ms_per_iteration", LOWER, "ranks wait less for each other in collectives"),
    ("job.wait_pct", LOWER, "ranks wait less for each other in collectives"),
    ("job.iteration_ms", LOWER, "each iteration of the job takes less time"),
    ("job.worst_comm_compute_overlap_pct", HIGHER, "every rank hides its communication"),
    ("job.worst_exposed_comm_ms", LOWER, "no rank waits on exposed communication"),
    ("job.worst_gpu_busy_pct", HIGHER, "every rank's GPU works more of each iteration"),
    ("job.failed_reports", LOWER, "every report of the job can be analyzed"),
    ("job.ranks", NONE, "describes the job, not its quality"),
    # kernels, copies, memsets, *_time_ns, gpu_busy_ns describe the workload, not how
    # well it runs: no direction, so baselines do not gate them unless told to.
    ("**", NONE, "describes the workload, not its quality"),
)


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    parts = (re.escape(p) for p in re.split(r"(\*\*|\*)", pattern))
    regex = "".join({r"\*\*": ".*", r"\*": r"[^.]*"}.get(p, p) for p in parts)
    return re.compile(rf"{regex}\Z")


def matches(pattern: str, metric: str) -> bool:
    """Does a metric pattern (``*`` within a dotted part, ``**`` across) match *metric*?"""
    return _pattern(pattern).match(metric) is not None


def direction_of(metric: str, overrides: Mapping[str, str] | None = None) -> str:
    """'higher', 'lower' or 'none': which way *metric* should move (overrides first)."""
    for pattern, direction in (overrides or {}).items():
        if matches(pattern, metric):
            return direction
    return next(d for pattern, d, _ in DIRECTIONS if matches(pattern, metric))


def is_pct(metric: str) -> bool:
    """Percentages compare in points; every other metric relative to its own size."""
    return metric.endswith("_pct")


def _rules() -> dict:
    from gpugap.rules import registry

    return registry()


def finding_metric_names() -> list[str]:
    """Every findings.* metric the registered rules can produce."""
    names = [f"findings.{f}" for f in FINDING_FIELDS]
    for rule in _rules().values():
        names += [f"findings.{rule.id}.{f}" for f in FINDING_FIELDS]
        names += [f"findings.{rule.id}.{c}.{f}" for c in rule.causes for f in FINDING_FIELDS]
    return names


def metric_names() -> list[str]:
    return [*METRIC_NAMES, *STEADY_NAMES, *JOB_METRICS, *finding_metric_names()]


def validate_metric(name: str, where: str = "gate") -> str:
    """*name* if it is a metric gpugap measures, else UsageError saying what exists."""
    if name in METRIC_NAMES or name in STEADY_NAMES or name in JOB_METRICS:
        return name
    parts = name.split(".")
    if parts[0] != "findings":
        close = difflib.get_close_matches(name, [*METRIC_NAMES, *STEADY_NAMES,
                                                 *JOB_METRICS], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UsageError(f"unknown metric '{name}' in {where}{hint}; metrics: "
                         f"{', '.join(METRIC_NAMES)}, steady.iteration_ms, "
                         "steady.gpu_busy_pct, steady.BUCKET_pct, job.skew_pct, "
                         "job.wait_ms_per_iteration, job.* (docs/ci.md), findings.count, "
                         "findings.cost_ms, findings.RULE[.CAUSE].count|cost_ms")
    if len(parts) not in (2, 3, 4) or parts[-1] not in FINDING_FIELDS:
        raise UsageError(f"bad findings metric '{name}' in {where}; write findings.count, "
                         "findings.RULE.count or findings.RULE.CAUSE.count "
                         "(or .cost_ms), e.g. findings.blocking-memcpy.count")
    if len(parts) >= 3:
        rules = _rules()
        rule = rules.get(parts[1])
        if rule is None:
            raise UsageError(f"unknown rule '{parts[1]}' in metric '{name}' ({where}); "
                             f"rules: {', '.join(rules)}")
        if len(parts) == 4 and parts[2] not in rule.causes:
            raise UsageError(f"rule {rule.id} has no cause '{parts[2]}' (metric '{name}', "
                             f"{where}); causes: {', '.join(rule.causes)}")
    return name


def validate_pattern(pattern: str, where: str) -> str:
    """A metric pattern must match at least one metric (catches typos)."""
    if not any(matches(pattern, m) for m in metric_names()):
        raise UsageError(f"'{pattern}' in {where} matches no metric; metrics: "
                         f"{', '.join(METRIC_NAMES)}, findings.count, findings.RULE.count, ...")
    return pattern


def fmt_value(metric: str, value: float | None) -> str:
    """A metric value for humans: 'null', percentages with '%', up to 3 decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value) if isinstance(value, int) else f"{value:.3f}".rstrip("0").rstrip(".")
    return text + ("%" if is_pct(metric) else "")


def scope_label(scope: str | None) -> str:
    return "the whole report" if scope is None else f"range '{scope}'"


# ---------------------------------------------------------------------------------------
# Measuring


@dataclass
class Measurement:
    """Every gateable metric of one scope (whole report or an NVTX range) of one report."""

    report: str
    scope: str | None
    values: dict[str, float | int | None]
    findings: list  # the scope's findings (gpugap.rules.base.Finding), at/above min_severity

    def value(self, metric: str) -> float | int | None:
        return self.values.get(metric, 0 if metric.startswith("findings.") else None)

    def null_reason(self, metric: str) -> str:
        """Why *metric* has no value here, e.g. "no copies in range 'measured'"."""
        if metric == "copy_compute_overlap_pct":
            what = "no copies"
        elif metric in ("kernel_overlap_pct", "concurrency"):
            what = "no kernels"
        elif metric in ("gpu_busy_pct", "gpu_idle_pct"):
            what = "no GPU time span"
        else:
            what = "no value"
        return f"{what} in {scope_label(self.scope)}"


@dataclass
class Measurements:
    """One report measured: its scopes (None = whole report) and how it was analysed."""

    report: str
    nsys_version: str | None
    gpu: str | None
    thresholds: dict[str, dict[str, float]]
    min_severity: str
    scopes: dict[str | None, Measurement]
    warnings: list[str] = field(default_factory=list)
    # The report lost GPU data (gpugap.report.trace.ReportInfo.gpu_data_lost): why, in a
    # few words, else None. check fails on it unless allow_lost_gpu_data.
    gpu_data_lost: str | None = None

    def __getitem__(self, scope: str | None) -> Measurement:
        try:
            return self.scopes[scope]
        except KeyError:
            raise UsageError(f"{self.report} was not measured over {scope_label(scope)}"
                             ) from None


def finding_values(findings: Sequence) -> dict[str, float | int]:
    """findings.* metrics of a list of findings: totals, per rule, per rule and cause.
    Every registered rule and cause is present (0 when it found nothing)."""
    values: dict[str, float | int] = {name: 0 if name.endswith(".count") else 0.0
                                      for name in finding_metric_names()}
    if not findings:
        return values
    frame = pd.DataFrame({"rule": [f.rule for f in findings],
                          "cause": [f.cause for f in findings],
                          "count": np.array([f.count for f in findings], dtype=np.int64),
                          "cost_ns": np.array([f.cost_ns for f in findings], dtype=np.int64)})

    def put(prefix: str, count: int, cost_ns: int) -> None:
        values[f"{prefix}.count"] = int(count)
        values[f"{prefix}.cost_ms"] = round(cost_ns / 1e6, 3)

    put("findings", frame["count"].sum(), frame["cost_ns"].sum())
    for rule, row in frame.groupby("rule")[["count", "cost_ns"]].sum().iterrows():
        put(f"findings.{rule}", row["count"], row["cost_ns"])
    for (rule, cause), row in frame.groupby(["rule", "cause"])[["count", "cost_ns"]].sum(
            ).iterrows():
        put(f"findings.{rule}.{cause}", row["count"], row["cost_ns"])
    return values


def measure(trace, *, ranges: Iterable[str] = (), whole: bool = True,
            thresholds: Mapping[str, Mapping[str, float]] | None = None,
            min_severity: str = "info", iteration: str | None = None) -> Measurements:
    """Metrics and finding counts of the whole report (when *whole*) and of each NVTX
    range in *ranges* (name or domain:name, as ``analyze --range`` takes them).

    The accounting and the rules run once; each scope's metrics, findings and costs are
    exactly what ``gpugap analyze [--range NAME]`` reports. Raises NoCudaActivity for a
    report without GPU work and UsageError for a range the report does not have.
    """
    from gpugap import ranges as nvtx_ranges
    from gpugap.analysis import Analyzer

    if min_severity not in SEVERITY_RANK:
        raise UsageError(f"bad minimum severity '{min_severity}'; "
                         f"use one of {', '.join(SEVERITY_RANK)}")
    names = list(dict.fromkeys(ranges))
    for name in names:                  # a bad range name fails before the work
        nvtx_ranges.select(trace, name)
    analyzer = Analyzer(trace, thresholds=thresholds, iteration=iteration)
    floor = SEVERITY_RANK[min_severity]
    result: Measurements | None = None
    for name in ([None] if whole else []) + names:
        analysis = analyzer.analyze(name)
        if result is None:
            result = Measurements(report=analysis.report, nsys_version=analysis.nsys_version,
                                  gpu=analysis.gpu.get("name"),
                                  thresholds=analysis.thresholds, min_severity=min_severity,
                                  scopes={}, warnings=list(analysis.warnings))
        findings = [f for f in analysis.findings
                    if SEVERITY_RANK.get(f.severity, 0) >= floor]
        values = {**analysis.metrics.to_dict(), **steady_values(analysis, trace),
                  **finding_values(findings)}
        result.scopes[name] = Measurement(analysis.report, name, values, findings)
    if result is None:          # nothing asked: still say which report it was
        analysis = analyzer.analyze(None)
        result = Measurements(report=analysis.report, nsys_version=analysis.nsys_version,
                              gpu=analysis.gpu.get("name"), thresholds=analysis.thresholds,
                              min_severity=min_severity, scopes={},
                              warnings=list(analysis.warnings))
    result.gpu_data_lost = lost_gpu_data(trace.info)
    return result


def lost_gpu_data(info) -> str | None:
    """Why the report (its ReportInfo) lost GPU data, or None when it did not."""
    if not getattr(info, "gpu_data_lost", False):
        return None
    if info.nsys_older_than_cuda:
        return (f"it was written by nsys {info.nsys_version or '?'}, older than the CUDA "
                f"{info.cuda_version or '?'} it traced, and its kernels are missing")
    return "most of its kernel launch calls have no kernel in the report"


def steady_values(analysis, trace) -> dict[str, float | int | None]:
    """steady.* metrics: the steady state of the report's devices (all of them: busy and
    bucket shares of their summed steady time; iteration times of the slowest device).
    In a --range scope they describe the range instead (its accounting, no iterations)."""
    from gpugap import timeline as tl
    from gpugap.accounting.buckets import BUSY_IDS, IDS

    values: dict[str, float | int | None] = {name: None for name in STEADY_NAMES}
    if analysis.accounting is None:
        return values
    from gpugap import metrics

    walls, buckets, medians, counts = 0, dict.fromkeys(IDS, 0), [], []
    comm, hidden, exposed = 0, 0, []
    for device, dev in analysis.accounting.devices.items():
        windows = analysis.judged(device)
        wall = tl.total(windows)
        if wall <= 0:
            continue
        walls += wall
        totals = dev.totals_in(windows)
        for b, v in totals.items():
            buckets[b] += v
        its = dev.phases.steady_iterations
        m = metrics.compute(trace, windows, devices=[device])
        comm += m.comm_time_ns
        hidden += m.comm_time_ns - m.exposed_comm_ns
        if analysis.scope is None and len(its):
            lo, hi = dev.phases.iteration_windows(its)
            medians.append(float(np.median(hi - lo)))
            counts.append(len(its))
            exposed.append(totals.get("communication", 0) / len(its))
        else:
            exposed.append(totals.get("communication", 0))
    if walls <= 0:
        return values
    busy = sum(buckets[b] for b in BUSY_IDS)
    values["steady.gpu_busy_pct"] = round(100.0 * busy / walls, 3)
    values["steady.idle_pct"] = round(100.0 - 100.0 * busy / walls, 3)
    for b in IDS:
        values[f"steady.{b}_pct"] = round(100.0 * buckets[b] / walls, 3)
    if medians:
        values["steady.iteration_ms"] = round(max(medians) / 1e6, 6)
        values["steady.iterations"] = int(min(counts))
    if comm > 0:
        values["steady.comm_compute_overlap_pct"] = round(100.0 * hidden / comm, 3)
        values["steady.exposed_comm_ms"] = round(max(exposed) / 1e6, 6)
    return values


def _steady_names() -> tuple[str, ...]:
    from gpugap.accounting.buckets import IDS

    return ("steady.iteration_ms", "steady.iterations", "steady.gpu_busy_pct",
            "steady.idle_pct", "steady.comm_compute_overlap_pct", "steady.exposed_comm_ms",
            *(f"steady.{b}_pct" for b in IDS))


STEADY_NAMES = _steady_names()


def job_measurements(job, *, thresholds: Mapping[str, Mapping[str, float]] | None = None,
                     min_severity: str = "info") -> Measurements:
    """The job.* metrics of a gpugap.job.Job, as one measured report (the whole job):
    what gates and baselines on a job hold. Reports that could not be analyzed are
    warnings."""
    label = f"job of {len(job.ranks) + len(job.failed)} reports"
    values = dict(job.metrics)
    gpus = sorted({s.gpu for s in job.ranks if s.gpu})
    return Measurements(report=label, nsys_version=None, gpu=", ".join(gpus) or None,
                        thresholds={k: dict(v) for k, v in (thresholds or {}).items()},
                        min_severity=min_severity,
                        scopes={None: Measurement(label, None, values, [])},
                        warnings=[f"not analyzed: {s.report}: {s.error}" for s in job.failed])


def is_job_metric(metric: str) -> bool:
    return metric.startswith("job.")


def reported_range_names(trace) -> list[str]:
    """The user's NVTX ranges of depth <= 1, by name (all instances of a name together),
    in order of first appearance."""
    from gpugap import ranges as nvtx_ranges

    return nvtx_ranges.shallow_names(trace, max_depth=1)


# ---------------------------------------------------------------------------------------
# Gates


@dataclass(frozen=True)
class Gate:
    """``metric >= limit`` (op 'min') or ``metric <= limit`` (op 'max') over a scope."""

    metric: str
    op: str
    limit: float
    range: str | None = None    # NVTX range; None: the check's default scope
    source: str = ""            # where it was set, for messages: '--min', a config table

    def __post_init__(self) -> None:
        if self.op not in (MIN, MAX):
            raise UsageError(f"gate op must be '{MIN}' or '{MAX}', not '{self.op}'")
        validate_metric(self.metric, self.where)

    @property
    def where(self) -> str:
        return self.source or f"--{self.op}"

    @property
    def label(self) -> str:
        return f"{self.metric} {'>=' if self.op == MIN else '<='} {self.limit:g}"

    def holds(self, value: float) -> bool:
        return value >= self.limit if self.op == MIN else value <= self.limit


def parse_gate(op: str, text: str, *, range_name: str | None = None, source: str = ""
               ) -> Gate:
    """A gate from ``METRIC=VALUE`` (what --min / --max take)."""
    metric, eq, raw = text.partition("=")
    metric = metric.strip()
    if not (eq and metric and raw.strip()):
        raise UsageError(f"bad --{op} '{text}'; write METRIC=VALUE, "
                         "e.g. kernel_overlap_pct=50")
    try:
        limit = float(raw)
    except ValueError:
        raise UsageError(f"bad --{op} '{text}': '{raw.strip()}' is not a number") from None
    if not math.isfinite(limit):
        raise UsageError(f"bad --{op} '{text}': the limit must be a finite number")
    return Gate(metric, op, limit, range_name, source)


@dataclass
class GateResult:
    """One gate (or one baseline comparison) on one scope of one report."""

    report: str
    scope: str | None
    metric: str
    kind: str                  # min | max | baseline
    limit: float | None        # min/max: the limit; baseline: the worst value allowed
    value: float | int | None
    status: str                # pass | fail | skip
    message: str
    source: str
    baseline: dict[str, Any] | None = None   # median, spread, delta, allowed, ...

    @property
    def label(self) -> str:
        """The gate without its scope: 'kernel_overlap_pct >= 50'."""
        if self.kind == BASELINE:
            return f"{self.metric} vs baseline"
        if self.kind == DATA:
            return f"{self.metric} = false"
        return f"{self.metric} {'>=' if self.kind == MIN else '<='} {self.limit:g}"

    @property
    def name(self) -> str:
        """Unique within a report: 'measured: kernel_overlap_pct >= 50'."""
        return f"{'whole' if self.scope is None else self.scope}: {self.label}"

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "report": self.report, "scope": self.scope,
               "metric": self.metric, "kind": self.kind, "limit": self.limit,
               "value": self.value, "status": self.status, "message": self.message,
               "source": self.source}
        if self.baseline is not None:
            out["baseline"] = self.baseline
        return out


@dataclass
class ReportCheck:
    """Every gate on one report."""

    report: str
    scope: str | None                  # the default scope of the gates
    results: list[GateResult]
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(r.failed for r in self.results)

    @property
    def failures(self) -> list[GateResult]:
        return [r for r in self.results if r.failed]

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.report, "scope": self.scope, "passed": self.passed,
                "gates": [r.to_dict() for r in self.results], "warnings": self.warnings}


@dataclass
class Check:
    """The gates on every report of one ``gpugap check``."""

    reports: list[ReportCheck]
    config: str | None = None
    baseline: str | None = None

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reports)

    @property
    def results(self) -> list[GateResult]:
        return [g for r in self.reports for g in r.results]

    def counts(self) -> dict[str, int]:
        statuses = [g.status for g in self.results]
        return {"gates": len(statuses), "passed": statuses.count(PASS),
                "failed": statuses.count(FAIL), "skipped": statuses.count(SKIP)}

    def to_dict(self) -> dict[str, Any]:
        from gpugap import __version__

        return {"gpugap_check": 1, "gpugap_version": __version__, "passed": self.passed,
                "config": self.config, "baseline": self.baseline,
                "summary": self.counts(), "reports": [r.to_dict() for r in self.reports]}


def null_result(m: Measurement, metric: str, kind: str, limit: float | None, source: str,
                allow_missing: bool, baseline: dict[str, Any] | None = None) -> GateResult:
    """A gate on a metric that is null here: fails (says why) unless allowed to be missing."""
    why = f"{metric} is null in {m.report} ({m.null_reason(metric)})"
    if allow_missing:
        return GateResult(m.report, m.scope, metric, kind, limit, None, SKIP,
                          f"{why}; skipped (allow_missing)", source, baseline)
    return GateResult(m.report, m.scope, metric, kind, limit, None, FAIL,
                      f"{why}; gate another range or metric, or pass --allow-missing "
                      "(allow_missing = true in the config) to let it pass", source, baseline)


def hold(gate: Gate, m: Measurement, allow_missing: bool = False) -> GateResult:
    """One gate against one measured scope."""
    value = m.value(gate.metric)
    if value is None:
        return null_result(m, gate.metric, gate.op, gate.limit, gate.where, allow_missing)
    shown = fmt_value(gate.metric, value)
    limit = fmt_value(gate.metric, gate.limit)
    where = scope_label(m.scope)
    if gate.holds(value):
        return GateResult(m.report, m.scope, gate.metric, gate.op, gate.limit, value, PASS,
                          f"{gate.metric} = {shown} in {where} "
                          f"({'>=' if gate.op == MIN else '<='} {limit})", gate.where)
    side = "below the minimum" if gate.op == MIN else "above the maximum"
    return GateResult(m.report, m.scope, gate.metric, gate.op, gate.limit, value, FAIL,
                      f"{gate.metric} = {shown} in {where} of {m.report}, {side} {limit}",
                      gate.where)


def data_result(measured: Measurements, allow_lost_gpu_data: bool) -> GateResult | None:
    """The implicit gate every check holds: the report did not lose GPU data (else its
    metrics pass or fail on work it does not hold). Fails unless *allow_lost_gpu_data*
    (then it is skipped); None for a complete report (no result, no extra gate)."""
    why = measured.gpu_data_lost
    if why is None:
        return None
    message = f"{measured.report} lost GPU data: {why}; its metrics are incomplete"
    if allow_lost_gpu_data:
        return GateResult(measured.report, None, LOST_GPU_DATA, DATA, None, True, SKIP,
                          f"{message}; skipped (allow_lost_gpu_data)", DATA)
    return GateResult(measured.report, None, LOST_GPU_DATA, DATA, None, True, FAIL,
                      f"{message}: capture again with a current Nsight Systems, or pass "
                      "--allow-lost-gpu-data (allow_lost_gpu_data = true in the config) "
                      "to check it anyway", DATA)


def scopes_of(gates: Iterable[Gate], range_name: str | None) -> list[str | None]:
    """The scopes a check covers: the default one, and every range a gate names."""
    return list(dict.fromkeys([range_name, *(g.range or range_name for g in gates)]))


def evaluate(source, gates: Iterable[Gate] = (), *, range_name: str | None = None,
             thresholds: Mapping[str, Mapping[str, float]] | None = None,
             min_severity: str = "info", allow_missing: bool = False,
             baseline=None, policy=None, allow_lost_gpu_data: bool = False) -> ReportCheck:
    """Hold *gates* against a report.

    *source* is a Trace (measured here) or the :class:`Measurements` of one. Gates
    without a range apply to *range_name* (None: the whole report). With *baseline* (a
    :class:`gpugap.baseline.Baseline`), every scope the check covers is also compared
    with it under *policy* (a :class:`gpugap.baseline.Policy`; default tolerances).
    A report that lost GPU data (ReportInfo.gpu_data_lost) gets one more result, first:
    a failure, or a skip with *allow_lost_gpu_data* (:func:`data_result`).
    """
    gates = list(gates)
    scopes = scopes_of(gates, range_name)
    if isinstance(source, Measurements):
        measured = source
    else:
        measured = measure(source, ranges=[s for s in scopes if s is not None],
                           whole=None in scopes, thresholds=thresholds,
                           min_severity=min_severity)
    results = [hold(g, measured[g.range or range_name], allow_missing) for g in gates]
    lost = data_result(measured, allow_lost_gpu_data)
    if lost is not None:
        results.insert(0, lost)
    warnings = list(measured.warnings)
    if baseline is not None:
        from gpugap.baseline import compare

        compared, notes = compare(measured, baseline, scopes=scopes, policy=policy,
                                  allow_missing=allow_missing)
        results += compared
        warnings += notes
    return ReportCheck(measured.report, range_name, results, warnings)
