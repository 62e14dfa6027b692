"""Gates: thresholds on a report's metrics that a CI build must hold.

A *gate* is ``METRIC >= LIMIT`` (``min``) or ``METRIC <= LIMIT`` (``max``) over a scope:
the whole report or one NVTX range. This module names the metrics a gate can hold (and
their directions, for baselines and diff), parses gates and defines their results;
:func:`gpugap.ci.measure.measure` turns a trace into every gateable metric of the scopes
asked for (one run of the rules, whatever the number of scopes), and
:func:`gpugap.ci.check.evaluate` holds gates (and, optionally, a baseline) against them::

    from gpugap.ci.check import evaluate
    from gpugap.ci.gates import Gate
    from gpugap.report import load

    result = evaluate(load("run.sqlite"), [Gate("kernel_overlap_pct", "min", 50)],
                      range_name="measured")
    result.passed            # False when any gate failed

Metric names
    Every metric of ``gpugap analyze`` (:data:`gpugap.accounting.metrics.METRIC_NAMES`),
    plus the findings of the scope, counted and costed:

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

    The job (several reports, the ranks of one job: gpugap.analysis.job), gated once per check:

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gpugap import __version__
from gpugap.accounting.buckets import IDS
from gpugap.accounting.metrics import METRIC_NAMES
from gpugap.errors import UsageError
from gpugap.rules import registry

MIN, MAX, BASELINE = "min", "max", "baseline"
# The job's gateable metrics (gpugap.ci.measure.job_measurements; directions in
# DIRECTIONS).
JOB_METRICS = ("job.ranks", "job.failed_reports", "job.iteration_ms", "job.skew_pct",
               "job.wait_ms_per_iteration", "job.wait_pct",
               "job.worst_comm_compute_overlap_pct", "job.worst_exposed_comm_ms",
               "job.worst_gpu_busy_pct")
DATA = "data"           # the report itself: complete enough to be judged (lost GPU data)
LOST_GPU_DATA = "gpu_data_lost"
PASS, FAIL, SKIP = "pass", "fail", "skip"
HIGHER, LOWER, NONE = "higher", "lower", "none"
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


# The steady state's metrics: iteration time and count, busy share, communication, and
# the share of each accounting bucket (gpugap.accounting.buckets).
STEADY_NAMES: tuple[str, ...] = (
    "steady.iteration_ms", "steady.iterations", "steady.gpu_busy_pct", "steady.idle_pct",
    "steady.comm_compute_overlap_pct", "steady.exposed_comm_ms",
    *(f"steady.{b}_pct" for b in IDS))


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

        return {"gpugap_check": 1, "gpugap_version": __version__, "passed": self.passed,
                "config": self.config, "baseline": self.baseline,
                "summary": self.counts(), "reports": [r.to_dict() for r in self.reports]}
