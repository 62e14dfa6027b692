"""A check: the gates of a report held against its measurements, and the report compared
with a baseline of known-good runs (gpugap check)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpugap.ci.baseline import Baseline, Policy, compare
from gpugap.ci.gates import (
    DATA,
    FAIL,
    LOST_GPU_DATA,
    MIN,
    PASS,
    SKIP,
    Gate,
    GateResult,
    ReportCheck,
    fmt_value,
    scope_label,
)
from gpugap.ci.measure import Measurement, Measurements, measure, null_result
from gpugap.report.trace import Trace
from gpugap.text import shown_path


def evaluate(source: Trace | Measurements, gates: Iterable[Gate] = (), *,
             range_name: str | None = None,
             thresholds: Mapping[str, Mapping[str, float]] | None = None,
             min_severity: str = "info", allow_missing: bool = False,
             baseline: Baseline | None = None, policy: Policy | None = None,
             allow_lost_gpu_data: bool = False) -> ReportCheck:
    """Hold *gates* against a report.

    *source* is a Trace (measured here) or the :class:`Measurements` of one. Gates
    without a range apply to *range_name* (None: the whole report). With *baseline* (a
    :class:`gpugap.ci.baseline.Baseline`), every scope the check covers is also compared
    with it under *policy* (a :class:`gpugap.ci.baseline.Policy`; default tolerances).
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
        compared, notes = compare(measured, baseline, scopes=scopes, policy=policy,
                                  allow_missing=allow_missing)
        results += compared
        warnings += notes
    return ReportCheck(measured.report, range_name, results, warnings)


def scopes_of(gates: Iterable[Gate], range_name: str | None) -> list[str | None]:
    """The scopes a check covers: the default one, and every range a gate names."""
    return list(dict.fromkeys([range_name, *(g.range or range_name for g in gates)]))


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
                      f"{gate.metric} = {shown} in {where} of {shown_path(m.report)}, "
                      f"{side} {limit}",
                      gate.where)


def data_result(measured: Measurements, allow_lost_gpu_data: bool) -> GateResult | None:
    """The implicit gate every check holds: the report did not lose GPU data (else its
    metrics pass or fail on work it does not hold). Fails unless *allow_lost_gpu_data*
    (then it is skipped); None for a complete report (no result, no extra gate)."""
    why = measured.gpu_data_lost
    if why is None:
        return None
    message = (f"{shown_path(measured.report)} lost GPU data: {why}; its metrics are "
               "incomplete")
    if allow_lost_gpu_data:
        return GateResult(measured.report, None, LOST_GPU_DATA, DATA, None, True, SKIP,
                          f"{message}; skipped (allow_lost_gpu_data)", DATA)
    return GateResult(measured.report, None, LOST_GPU_DATA, DATA, None, True, FAIL,
                      f"{message}: capture again with a current Nsight Systems, or pass "
                      "--allow-lost-gpu-data (allow_lost_gpu_data = true in the config) "
                      "to check it anyway", DATA)
