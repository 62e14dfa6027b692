"""Baselines: the metrics of known-good runs, and a check that a new run did not regress.

``gpugap baseline save RUN1.sqlite RUN2.sqlite ... -o baseline.json`` measures every run
(whole report and each NVTX range) and stores, per scope and metric, the median, min,
max and sample standard deviation across runs (one run: spread 0). The file is JSON:

.. code-block:: json

    {"gpugap_baseline": 2, "gpugap_version": "0.1.0", "created_utc": "...",
     "reports": ["run1.sqlite", "run2.sqlite"], "gpu": "NVIDIA H200",
     "min_severity": "warning", "thresholds": {"launch-gap": {"min_gap_us": 100, ...}},
     "whole": {"kernel_overlap_pct": {"median": 98.7, "min": 98.1, "max": 99.0,
                                      "stdev": 0.45, "n": 2, "runs": [98.1, 99.0]}, ...},
     "ranges": {"measured": {...}, "iter": {...}}}

What is gated. A baseline holds a run to the program's *quality*, not to the jitter of
its start-up or of findings that only inform:

* the metrics of :data:`DEFAULT_METRICS` (override with ``Policy.metrics``): overlap,
  concurrency and the steady state (``steady.*``: iteration time, busy and bucket
  shares). The whole report's ``gpu_busy_pct`` / ``gpu_idle_pct`` are left out by
  default: start-up (module loads, allocations, a cold first run) dominates them and
  moves them by several points between good runs; ``steady.gpu_busy_pct`` is the same
  share over the iterations (and, in a ``--range``, equals the range's ``gpu_busy_pct``);
* findings of severity ``warning`` and ``error`` only (:data:`GATED_SEVERITY`, or
  ``error`` when measured with ``min_severity="error"``): the ``findings.*`` metrics of
  the file and of the checked run count those alone. Info findings (start-up gaps, one
  100-us launch gap more or less) never fail a check. Per rule and cause
  (``findings.RULE.CAUSE.cost_ms``) their cost is gated, and a rule/cause that is
  present now but was absent from every baseline run fails as *new*.

The regression rule, per metric with a direction (:data:`gpugap.ci.gates.DIRECTIONS`)::

    delta   = value - baseline median
    allowed = max(tolerance, noise_k x stdev)      tolerance: percentage points for
                                                   *_pct metrics, percent of the median
                                                   for every other metric; for a
                                                   findings cost, also at least
                                                   cost_tolerance_ms (default 1 ms)
    fail   when |delta| > allowed and delta goes the wrong way (a drop of a
           higher-is-better metric, a rise of a lower-is-better one)

A change with ``|delta| > allowed`` is *beyond the noise*: a real change, not run-to-run
jitter; one in the good direction passes and says so (time to save a new baseline).
Findings metrics that are zero now and in every baseline run give no result at all
(nothing found, nothing to compare).

Format 1 files (before gpugap gated findings by severity: they counted info findings)
are refused with a one-line error that says to save the baseline again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from gpugap import __version__
from gpugap.ci.config import (
    DEFAULT_COST_TOLERANCE_MS,
    DEFAULT_METRICS,
    DEFAULT_NOISE_K,
    DEFAULT_TOLERANCE,
    Policy,
)
from gpugap.ci.gates import (
    BASELINE,
    FAIL,
    HIGHER,
    NONE,
    PASS,
    GateResult,
    direction_of,
    fmt_value,
    is_pct,
    matches,
    scope_label,
)
from gpugap.ci.measure import Measurement, Measurements, finding_values, null_result
from gpugap.errors import ReportError, UsageError
from gpugap.files import BASELINE_MAX_BYTES, read_text, write_atomic
from gpugap.jsonout import dumps
from gpugap.rules.model import Severity
from gpugap.text import shown_path

FORMAT = 2                  # 2: findings.* count warning/error findings only
# Findings below this severity are never gated by a baseline: info findings describe
# start-up and one-time costs whose number and length jitter from run to run.
GATED_SEVERITY = Severity.WARNING


@dataclass(frozen=True)
class Stats:
    """One metric across the runs of a baseline (None where no run had a value)."""

    median: float | None
    min: float | None
    max: float | None
    stdev: float
    n: int                       # runs with a value
    runs: tuple[float | int | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max,
                "stdev": self.stdev, "n": self.n, "runs": list(self.runs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Stats:
        return cls(data["median"], data["min"], data["max"], float(data["stdev"]),
                   int(data["n"]), tuple(data["runs"]))


@dataclass
class Baseline:
    scopes: dict[str | None, dict[str, Stats]]      # None: the whole report
    reports: list[str]
    thresholds: dict[str, dict[str, float]]
    min_severity: str           # findings.* count findings of this severity and up
    gpu: str | None
    gpugap_version: str
    created_utc: str
    path: str | None = None
    program: str | None = None      # the program of its runs, when they recorded it

    @property
    def of_job(self) -> bool:
        """Saved from a job (gpugap baseline save --job): it holds job.* metrics."""
        return any(name.startswith("job.") for name in self.scopes.get(None, {}))

    def scope(self, scope: str | None) -> dict[str, Stats]:
        if scope in self.scopes:
            return self.scopes[scope]
        have = ", ".join(sorted(s for s in self.scopes if s is not None)) or "none"
        raise UsageError(f"baseline {self.path or ''} has no {scope_label(scope)} "
                         f"(its ranges: {have}); save it again with gpugap baseline save "
                         f"... --range {scope}")

    def to_dict(self) -> dict[str, Any]:
        def stats(metrics: dict[str, Stats]) -> dict[str, Any]:
            return {name: s.to_dict() for name, s in metrics.items()}

        return {"gpugap_baseline": FORMAT, "gpugap_version": self.gpugap_version,
                "created_utc": self.created_utc, "reports": self.reports, "gpu": self.gpu,
                "program": self.program,
                "min_severity": self.min_severity, "thresholds": self.thresholds,
                "whole": stats(self.scopes[None]) if None in self.scopes else None,
                "ranges": {k: stats(v) for k, v in self.scopes.items() if k is not None}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | None = None) -> Baseline:
        def stats(metrics: Mapping[str, Any]) -> dict[str, Stats]:
            return {name: Stats.from_dict(s) for name, s in metrics.items()}

        scopes: dict[str | None, dict[str, Stats]] = {}
        if data.get("whole") is not None:
            scopes[None] = stats(data["whole"])
        scopes.update({name: stats(m) for name, m in data.get("ranges", {}).items()})
        return cls(scopes=scopes, reports=list(data.get("reports", [])),
                   thresholds=dict(data.get("thresholds", {})),
                   min_severity=data.get("min_severity", GATED_SEVERITY),
                   gpu=data.get("gpu"), program=data.get("program"),
                   gpugap_version=data.get("gpugap_version", "?"),
                   created_utc=data.get("created_utc", "?"), path=path)


def _clean(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 6)


def gated_severity(min_severity: str) -> str:
    """The severity a baseline gates findings from: *min_severity*, but never below
    :data:`GATED_SEVERITY` (info findings are never gated)."""
    return max(Severity(min_severity), GATED_SEVERITY).value


def gated_values(m: Measurement, min_severity: str) -> dict[str, float | int | None]:
    """The metrics of *m* with every findings.* metric counted from its findings of
    *min_severity* and up (a job's measurement, which has no findings.*, as it is)."""
    if not any(name.startswith("findings.") for name in m.values):
        return dict(m.values)
    floor = Severity(min_severity)
    kept = [f for f in m.findings if Severity(f.severity) >= floor]
    return {**m.values, **finding_values(kept)}


def build(runs: Sequence[Measurements]) -> Baseline:
    """Median and spread of every metric of every scope across repeated runs; findings.*
    count warning and error findings only (:func:`gated_severity`)."""
    if not runs:
        raise UsageError("a baseline needs at least one report")
    first = runs[0]
    for run in runs[1:]:
        if run.thresholds != first.thresholds or run.min_severity != first.min_severity:
            raise UsageError(f"{run.report} was analysed with other thresholds than "
                             f"{first.report}; measure every run the same way")
    severity = gated_severity(first.min_severity)
    values = [{scope: gated_values(m, severity) for scope, m in run.scopes.items()}
              for run in runs]
    scopes: dict[str | None, dict[str, Stats]] = {}
    for scope in dict.fromkeys(s for run in runs for s in run.scopes):
        names = list(dict.fromkeys(n for run in values if scope in run
                                   for n in run[scope]))
        # One row per metric, one column per run (NaN: null or range absent in that run).
        raw = [[run[scope].get(n) if scope in run else None for run in values]
               for n in names]
        import pandas as pd  # statistics of a few runs; an analysis never imports it

        table = pd.DataFrame(raw, index=names, dtype="float64")
        median, lo, hi = table.median(axis=1), table.min(axis=1), table.max(axis=1)
        stdev = table.std(axis=1, ddof=1).fillna(0.0)
        n = table.notna().sum(axis=1)
        scopes[scope] = {
            name: Stats(_clean(median[name]), _clean(lo[name]), _clean(hi[name]),
                        round(float(stdev[name]), 6), int(n[name]), tuple(row))
            for name, row in zip(names, raw, strict=True)}
    return Baseline(scopes=scopes, reports=[r.report for r in runs],
                    thresholds=first.thresholds, min_severity=severity,
                    gpu=first.gpu, program=first.program, gpugap_version=__version__,
                    created_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def save(baseline: Baseline, path: str | Path, *, force: bool = True) -> Path:
    """Write *baseline* to *path* (atomically; an existing file only with *force*)."""
    path = Path(path)
    write_atomic(path, dumps(baseline.to_dict()) + "\n", force=force)
    baseline.path = str(path)
    return path


TOP_KEYS = ("gpugap_baseline", "gpugap_version", "created_utc", "reports", "gpu",
            "program", "min_severity", "thresholds", "whole", "ranges")
STATS_KEYS = ("median", "min", "max", "stdev", "n", "runs")


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def schema_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with a parsed baseline document ('ranges.step.kernels.median: must be
    a finite number or null'), None when it has the shape :func:`save` writes."""
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        return f"unknown key '{unknown[0]}'; known: {', '.join(TOP_KEYS)}"
    for key in ("gpugap_version", "created_utc"):
        if key in data and not isinstance(data[key], str):
            return f"{key}: must be a string"
    for key in ("gpu", "program"):
        if key in data and not (data[key] is None or isinstance(data[key], str)):
            return f"{key}: must be a string or null"
    if "reports" in data and not (isinstance(data["reports"], list)
                                  and all(isinstance(r, str) for r in data["reports"])):
        return "reports: must be a list of file names"
    gated = [s.value for s in Severity if s >= GATED_SEVERITY]
    if "min_severity" in data and not (isinstance(data["min_severity"], str)
                                       and data["min_severity"] in gated):
        return f"min_severity: must be one of {', '.join(gated)}"
    thresholds = data.get("thresholds", {})
    if not isinstance(thresholds, dict):
        return "thresholds: must be an object"
    for rule, values in thresholds.items():
        if not isinstance(values, dict) or not all(_is_number(v) for v in values.values()):
            return f"thresholds.{rule}: must map threshold names to finite numbers"

    def scope_problem(metrics: Any, where: str) -> str | None:
        if not isinstance(metrics, dict):
            return f"{where}: must be an object of metrics"
        for name, stats in metrics.items():
            at = f"{where}.{name}"
            if not isinstance(stats, dict):
                return f"{at}: must be an object"
            keys = sorted(set(STATS_KEYS) ^ set(stats))
            if keys:
                return (f"{at}: unknown key '{keys[0]}'" if keys[0] in stats else
                        f"{at}: missing '{keys[0]}'") + f"; it needs {', '.join(STATS_KEYS)}"
            for key in ("median", "min", "max"):
                if not (stats[key] is None or _is_number(stats[key])):
                    return f"{at}.{key}: must be a finite number or null, not {stats[key]!r}"
            if not (_is_number(stats["stdev"]) and stats["stdev"] >= 0):
                return f"{at}.stdev: must be a finite number >= 0, not {stats['stdev']!r}"
            if not (isinstance(stats["n"], int) and not isinstance(stats["n"], bool)
                    and stats["n"] >= 0):
                return f"{at}.n: must be a whole number >= 0, not {stats['n']!r}"
            runs = stats["runs"]
            if not (isinstance(runs, list) and all(r is None or _is_number(r) for r in runs)):
                return f"{at}.runs: must be a list of finite numbers or nulls"
        return None

    if data.get("whole") is not None and (problem := scope_problem(data["whole"], "whole")):
        return problem
    ranges = data.get("ranges", {})
    if not isinstance(ranges, dict):
        return "ranges: must be an object of NVTX range names"
    for name, metrics in ranges.items():
        if problem := scope_problem(metrics, f"ranges.{name}"):
            return problem
    return None


def load(path: str | Path) -> Baseline:
    """A baseline file, or ReportError (one line) saying what is wrong with it.

    Only a regular file of at most 64 MiB (gpugap.files.BASELINE_MAX_BYTES) is read,
    and its content must have the shape :func:`save` writes (finite numbers, known keys).
    """
    path = Path(path)
    remedy = "make one with gpugap baseline save REPORT... -o FILE"
    text = read_text(path, "baseline file", BASELINE_MAX_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path} is not a gpugap baseline (invalid JSON: {exc.msg} at "
                          f"line {exc.lineno}); {remedy}") from None
    except RecursionError:
        raise ReportError(f"{path} is not a gpugap baseline (nested too deeply); "
                          f"{remedy}") from None
    if not isinstance(data, dict) or "gpugap_baseline" not in data:
        raise ReportError(f"{path} is not a gpugap baseline (no 'gpugap_baseline' key); "
                          f"{remedy}")
    if data["gpugap_baseline"] == 1 and not isinstance(data["gpugap_baseline"], bool):
        raise ReportError(f"{path} is a gpugap baseline of format 1, which gated info "
                          f"findings; this gpugap reads format {FORMAT}: save it again "
                          "with gpugap baseline save REPORT... -o FILE --force")
    if data["gpugap_baseline"] != FORMAT or isinstance(data["gpugap_baseline"], bool):
        raise ReportError(f"{path} is a gpugap baseline of format "
                          f"{str(data['gpugap_baseline'])[:20]}, this gpugap reads format "
                          f"{FORMAT}; save it again with this gpugap or upgrade gpugap")
    problem = schema_problem(data)
    if problem is not None:
        raise ReportError(f"{path} is a malformed gpugap baseline ({problem}); {remedy}")
    try:
        return Baseline.from_dict(data, str(path))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{path} is a malformed gpugap baseline ({type(exc).__name__}: "
                          f"{exc}); {remedy}") from None


def is_findings_cost(metric: str) -> bool:
    """findings.cost_ms, findings.RULE.cost_ms, findings.RULE.CAUSE.cost_ms."""
    return metric.startswith("findings.") and metric.endswith(".cost_ms")


def count_of(metric: str) -> str:
    """The occurrence count beside a findings.* metric (itself for a count)."""
    return metric.rsplit(".", 1)[0] + ".count"


def judge(m, metric: str, stats: Stats | None, policy: Policy,
          allow_missing: bool = False) -> GateResult:
    """One metric of one measured scope against its baseline statistics."""
    value = m.value(metric)
    where = scope_label(m.scope)
    if stats is None or stats.median is None:
        # Nothing to regress from (the metric is new, or was null in every baseline run).
        return GateResult(m.report, m.scope, metric, BASELINE, None, value, PASS,
                          f"{metric} = {fmt_value(metric, value)} in {where}; the baseline "
                          "has no value for it, nothing to compare", BASELINE)
    direction = direction_of(metric, policy.directions)
    median = stats.median
    pct = is_pct(metric)
    tolerance = policy.tolerance if pct else policy.tolerance / 100.0 * abs(median)
    cost = is_findings_cost(metric)
    if cost:    # a few percent of a small cost is less than one short gap more
        tolerance = max(tolerance, policy.cost_tolerance_ms)
    noise = policy.noise_k * stats.stdev
    allowed = max(tolerance, noise)
    info = {"median": median, "min": stats.min, "max": stats.max, "stdev": stats.stdev,
            "runs": stats.n, "direction": direction, "tolerance": round(tolerance, 6),
            "noise": round(noise, 6), "allowed": round(allowed, 6)}
    limit = round(median - allowed if direction == HIGHER else median + allowed, 6)
    if pct:     # a percentage cannot leave [0, 100]: show the bound that can bind
        limit = min(max(limit, 0.0), 100.0)
    if value is None:
        return null_result(m, metric, BASELINE, limit, BASELINE, allow_missing,
                           info | {"delta": None, "beyond_noise": None})
    delta = round(float(value) - median, 6)
    beyond = abs(delta) > allowed + 1e-9
    worse = delta < 0 if direction == HIGHER else delta > 0
    info |= {"delta": delta, "beyond_noise": beyond}
    unit = " points" if pct else " ms" if cost else ""
    floor = f", {policy.cost_tolerance_ms:g} ms" if cost else ""
    rule = (f"allowed {allowed:.3g}{unit} = max(tolerance "
            f"{policy.tolerance:g}{' points' if pct else '% of the median'}{floor}, "
            f"{policy.noise_k:g} x stdev {stats.stdev:.3g})")
    runs = f"{stats.n} run{'s' if stats.n != 1 else ''}"
    shift = (f"from {fmt_value(metric, median)} (baseline median of {runs}) to "
             f"{fmt_value(metric, value)} in {where} ({delta:+.3g}{unit})")
    if beyond and worse:
        verb = "dropped" if direction == HIGHER else "rose"
        return GateResult(m.report, m.scope, metric, BASELINE, limit, value, FAIL,
                          f"{metric} {verb} {shift} in {shown_path(m.report)}, beyond the "
                          f"noise: {rule}",
                          BASELINE, info)
    if beyond:
        note = f"{metric} improved {shift}, beyond the noise; save a new baseline to keep it"
    else:
        note = f"{metric} moved {shift}, within the noise ({rule})"
    return GateResult(m.report, m.scope, metric, BASELINE, limit, value, PASS, note,
                      BASELINE, info)


def judge_new(m: Measurement, metric: str, stats: Stats | None, runs: int,
              min_severity: str) -> GateResult:
    """A findings.* metric of warning/error findings that no baseline run had: fails,
    whatever its size (the baseline allows none of it)."""
    parts = metric.split(".")
    rule, cause = (parts[1:-1] + [None, None])[:2]
    what = (f"finding {rule} [{cause}]" if cause else f"findings of rule {rule}" if rule
            else "findings")
    floor = Severity(min_severity)
    mine = [f for f in m.findings if Severity(f.severity) >= floor
            and rule in (None, f.rule) and cause in (None, f.cause)]
    severity = max((Severity(f.severity) for f in mine), default=floor)
    value, count = m.value(metric), int(m.value(count_of(metric)) or 0)
    median = stats.median if stats is not None and stats.median is not None else 0
    cost = f", costing {fmt_value(metric, value)} ms" if is_findings_cost(metric) else ""
    info = {"median": median, "min": None if stats is None else stats.min,
            "max": None if stats is None else stats.max,
            "stdev": 0.0 if stats is None else stats.stdev, "runs": runs,
            "direction": "lower", "new": True, "count": count,
            "delta": round(float(value or 0) - median, 6), "beyond_noise": True}
    return GateResult(
        m.report, m.scope, metric, BASELINE, 0, value, FAIL,
        f"new {severity} {what} in {scope_label(m.scope)} of {shown_path(m.report)}: {count} "
        f"occurrence{'s' if count != 1 else ''}{cost}; absent from all {runs} baseline "
        f"run{'s' if runs != 1 else ''}", BASELINE, info)


def _seen(metric: str, m: Measurement, stats: Mapping[str, Stats]) -> bool:
    """A findings.* metric that is not zero now, or was not in some baseline run."""
    return bool(m.value(metric)) or bool(metric in stats and stats[metric].max)


def compare(measured: Measurements, baseline: Baseline, *, scopes: Sequence[str | None],
            policy: Policy | None = None, allow_missing: bool = False
            ) -> tuple[list[GateResult], list[str]]:
    """Every compared metric of each scope in *scopes* against *baseline*: results, plus
    warnings when the run was analysed differently from the baseline's runs.

    findings.* metrics count the run's findings of the baseline's severity and up
    (warning or error). One that is zero now and in every baseline run gives no result;
    one whose findings no baseline run had fails as new (:func:`judge_new`)."""
    policy = policy or Policy()
    severity = baseline.min_severity
    notes = []
    if measured.thresholds != baseline.thresholds:
        notes.append(f"{shown_path(measured.report)} was analysed with other rule "
                     "thresholds than the baseline: its findings may not compare; save "
                     "the baseline again with the same configuration")
    if Severity(measured.min_severity) > Severity(severity):
        notes.append(f"{shown_path(measured.report)} keeps findings from severity "
                     f"'{measured.min_severity}', the baseline gates them from "
                     f"'{severity}': its findings do not compare; check with "
                     f"--min-severity {severity}")
    if baseline.gpu and measured.gpu and baseline.gpu != measured.gpu:
        notes.append(f"{shown_path(measured.report)} ran on {measured.gpu}, the baseline on "
                     f"{baseline.gpu}: timings may not compare")
    if baseline.program and measured.program and baseline.program != measured.program:
        notes.append(f"{shown_path(measured.report)} is a run of '{measured.program}', "
                     f"the baseline of '{baseline.program}': another program's baseline; "
                     "save one from this program's runs (gpugap baseline save)")
    runs = len(baseline.reports)
    results = []
    for scope in scopes:
        stats = baseline.scope(scope)
        m = measured[scope]
        gated = Measurement(m.report, m.scope, gated_values(m, severity), m.findings)

        # In the order of the policy's patterns, so the output reads like the config.
        names = sorted((n for n in dict.fromkeys([*gated.values, *stats])
                        if any(matches(p, n) for p in policy.metrics)
                        and direction_of(n, policy.directions) != NONE),
                       key=lambda n: next(i for i, p in enumerate(policy.metrics)
                                          if matches(p, n)))
        for name in names:
            if not name.startswith("findings."):
                results.append(judge(gated, name, stats.get(name), policy, allow_missing))
                continue
            counted = count_of(name)
            if not (_seen(name, gated, stats) or _seen(counted, gated, stats)):
                continue                    # nothing found, now or ever: nothing to say
            before = stats.get(counted)
            if gated.value(counted) and not (before is not None and before.max):
                results.append(judge_new(gated, name, stats.get(name), runs, severity))
            else:
                results.append(judge(gated, name, stats.get(name), policy, allow_missing))
    return results, notes


__all__ = ["Baseline", "Policy", "Stats", "build", "compare", "count_of", "gated_severity",
           "gated_values", "is_findings_cost", "judge", "judge_new", "load", "save",
           "schema_problem",
           "DEFAULT_COST_TOLERANCE_MS", "DEFAULT_METRICS", "DEFAULT_NOISE_K",
           "DEFAULT_TOLERANCE", "FORMAT", "GATED_SEVERITY"]
