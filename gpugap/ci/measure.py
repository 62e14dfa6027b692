"""What a check measures: every gateable metric of a report, per scope (the whole report,
NVTX ranges; gpugap.ci.gates names them), from one analysis; a job's metrics; and the
result of a gate on a metric that is null here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting import metrics
from gpugap.accounting import ranges as nvtx_ranges
from gpugap.accounting.buckets import BUSY_IDS, IDS
from gpugap.analysis import Analyzer
from gpugap.ci.gates import FAIL, SKIP, STEADY_NAMES, GateResult, finding_metric_names, scope_label
from gpugap.errors import UsageError
from gpugap.rules.model import Severity
from gpugap.text import shown_path


@dataclass
class Measurement:
    """Every gateable metric of one scope (whole report or an NVTX range) of one report."""

    report: str
    scope: str | None
    values: dict[str, float | int | None]
    findings: list  # the scope's findings (gpugap.rules.base.Finding), at/above min_severity
    # The scope's verdict (gpugap.analysis.verdict.Verdict), what diff judges by: None
    # where nothing was analyzed.
    verdict: Any = None
    # The time the steady.*_pct shares are of, in ms: the steady state's GPU time per
    # iteration (summed over the devices) when it has iterations, else all of it (the
    # scope's, for an NVTX range). diff weighs each bucket's share with it.
    unit_ms: float | None = None

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
    # The program nsys launched (gpugap.report.trace.ReportInfo.program), when recorded.
    program: str | None = None

    def __getitem__(self, scope: str | None) -> Measurement:
        try:
            return self.scopes[scope]
        except KeyError:
            raise UsageError(f"{shown_path(self.report)} was not measured over {scope_label(scope)}"
                             ) from None


def finding_values(findings: Sequence) -> dict[str, float | int]:
    """findings.* metrics of a list of findings: totals, per rule, per rule and cause.
    Every registered rule and cause is present (0 when it found nothing)."""
    values: dict[str, float | int] = {name: 0 if name.endswith(".count") else 0.0
                                      for name in finding_metric_names()}
    if not findings:
        return values
    def put(prefix: str, count: int, cost_ns: int) -> None:
        values[f"{prefix}.count"] = int(count)
        values[f"{prefix}.cost_ms"] = round(cost_ns / 1e6, 3)

    # Totals, per rule and per (rule, cause): every key already has its place in values.
    sums: dict[tuple[str, ...], list[int]] = {}
    for f in findings:
        for key in ((), (f.rule,), (f.rule, f.cause)):
            total = sums.setdefault(key, [0, 0])
            total[0] += int(f.count)
            total[1] += int(f.cost_ns)
    # (in pandas' groupby order, for a cause no registry lists: it is added at the end)
    for key, (count, cost_ns) in sorted(sums.items(), key=lambda kv: (len(kv[0]), kv[0])):
        put(".".join(("findings", *key)), count, cost_ns)
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
    if min_severity not in Severity.names():
        raise UsageError(f"bad minimum severity '{min_severity}'; "
                         f"use one of {', '.join(Severity.names())}")
    names = list(dict.fromkeys(ranges))
    for name in names:                  # a bad range name fails before the work
        nvtx_ranges.select(trace, name)
    analyzer = Analyzer(trace, thresholds=thresholds, iteration=iteration)
    floor = Severity(min_severity)
    result: Measurements | None = None
    for name in ([None] if whole else []) + names:
        analysis = analyzer.analyze(name)
        if result is None:
            result = Measurements(report=analysis.report, nsys_version=analysis.nsys_version,
                                  gpu=analysis.gpu.get("name"),
                                  thresholds=analysis.thresholds, min_severity=min_severity,
                                  scopes={}, warnings=list(analysis.warnings))
        findings = [f for f in analysis.findings if Severity(f.severity) >= floor]
        steady, unit_ms = steady_measures(analysis, trace)
        values = {**analysis.metrics.to_dict(), **steady, **finding_values(findings)}
        result.scopes[name] = Measurement(analysis.report, name, values, findings,
                                          verdict=analysis.verdict, unit_ms=unit_ms)
    if result is None:          # nothing asked: still say which report it was
        analysis = analyzer.analyze(None)
        result = Measurements(report=analysis.report, nsys_version=analysis.nsys_version,
                              gpu=analysis.gpu.get("name"), thresholds=analysis.thresholds,
                              min_severity=min_severity, scopes={},
                              warnings=list(analysis.warnings))
    result.gpu_data_lost = lost_gpu_data(trace.info)
    result.program = trace.info.program
    return result


def lost_gpu_data(info) -> str | None:
    """Why the report (its ReportInfo) lost GPU data, or None when it did not."""
    if not getattr(info, "gpu_data_lost", False):
        return None
    if info.nsys_older_than_cuda:
        return (f"it was written by nsys {info.nsys_version or '?'}, older than the CUDA "
                f"{info.cuda_version or '?'} it traced, and its kernels are missing")
    return "most of its kernel launch calls have no kernel in the report"


def steady_measures(analysis, trace) -> tuple[dict[str, float | int | None], float | None]:
    """steady.* metrics: the steady state of the report's devices (all of them: busy and
    bucket shares of their summed steady time; iteration times of the slowest device).
    In a --range scope they describe the range instead (its accounting, no iterations).
    Then the time their shares are of (Measurement.unit_ms)."""
    values: dict[str, float | int | None] = {name: None for name in STEADY_NAMES}
    if analysis.accounting is None:
        return values, None

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
        if not analysis.scope.is_range and len(its):
            lo, hi = dev.phases.iteration_windows(its)
            medians.append(float(np.median(hi - lo)))
            counts.append(len(its))
            exposed.append(totals.get("communication", 0) / len(its))
        else:
            exposed.append(totals.get("communication", 0))
    if walls <= 0:
        return values, None
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
    return values, walls / (min(counts) if counts else 1) / 1e6


def job_measurements(job, *, thresholds: Mapping[str, Mapping[str, float]] | None = None,
                     min_severity: str = "info") -> Measurements:
    """The job.* metrics of a gpugap.analysis.job.Job, as one measured report (the whole job):
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


def reported_range_names(trace, *, folded: bool = False) -> list[str]:
    """The user's NVTX ranges of depth <= 1, by name (all instances of a name together),
    in order of first appearance; *folded*: numbered instances as one (``step N``), as
    ``analyze``'s range table shows them."""
    return nvtx_ranges.shallow_names(trace, max_depth=1, folded=folded)


def null_result(m: Measurement, metric: str, kind: str, limit: float | None, source: str,
                allow_missing: bool, baseline: dict[str, Any] | None = None) -> GateResult:
    """A gate on a metric that is null here: fails (says why) unless allowed to be missing."""
    why = f"{metric} is null in {shown_path(m.report)} ({m.null_reason(metric)})"
    if allow_missing:
        return GateResult(m.report, m.scope, metric, kind, limit, None, SKIP,
                          f"{why}; skipped (allow_missing)", source, baseline)
    return GateResult(m.report, m.scope, metric, kind, limit, None, FAIL,
                      f"{why}; gate another range or metric, or pass --allow-missing "
                      "(allow_missing = true in the config) to let it pass", source, baseline)
