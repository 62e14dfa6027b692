"""An analysis as tidy pandas DataFrames (``Analysis.frames()``): snake_case columns, one
row per thing, times in int64 nanoseconds, so that results join, group and plot like any
other data.

- ``findings``: one row per finding (what the terminal and JSON list).
- ``ranges``: the range table, one row per path of nested NVTX ranges, with its metrics.
- ``phases``: one row per device and phase (start-up, warm-up, steady, tail).
- ``accounting``: one row per device, phase and bucket: where every nanosecond of each
  phase went. The rows of a (device, phase) add up to that phase's length.
- ``iterations``: one row per device and iteration, with its time per bucket: the rows'
  bucket columns add up to the iteration's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpugap.accounting import BUCKETS, IDS, PHASES, Accounting
from gpugap.accounting.metrics import METRIC_NAMES, Metrics
from gpugap.jsonout import Record
from gpugap.report.trace import NO_CALL
from gpugap.rules.base import Finding

# pandas is imported by the functions that build DataFrames: an analysis itself never
# imports it (issue 25).
if TYPE_CHECKING:
    import pandas as pd

FINDING_COLUMNS = ("id", "rule", "cause", "severity", "device", "pid", "phase", "start_ns",
                   "end_ns", "cost_ns", "share_pct", "count", "median_ns_per_iteration",
                   "streams", "ranges", "message", "fix", "consequence_of", "evidence")
PHASE_COLUMNS = ("device", "phase", "start_ns", "end_ns", "ns", "iterations", "how")
ACCOUNTING_COLUMNS = ("device", "phase", "bucket", "busy", "ns", "pct")
ITERATION_COLUMNS = ("device", "iteration", "label", "phase", "start_ns", "end_ns", "ns")
RANGE_COLUMNS = ("path", "name", "domain", "depth", "count", "cpu_ns", *METRIC_NAMES)
# The metrics that may be unknown (a share of nothing): float64, NaN where unknown;
# the others are counts and nanoseconds, int64.
FLOAT_METRICS = tuple(name for name, f in Metrics.__dataclass_fields__.items()
                      if "float" in str(f.type))


@dataclass(repr=False)
class Frames(Record):
    """The DataFrames of one analysis (see the module's docstring for their rows), read
    as attributes (``frames.accounting``) or as a mapping (``frames['accounting']``,
    ``frames.items()``)."""

    findings: pd.DataFrame
    ranges: pd.DataFrame
    phases: pd.DataFrame
    accounting: pd.DataFrame
    iterations: pd.DataFrame

    def __repr__(self) -> str:
        return "Frames(" + ", ".join(f"{name}: {len(frame)} rows"
                                     for name, frame in self.items()) + ")"

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        """Each frame as a list of rows (``DataFrame.to_dict('records')``), missing
        values as None."""
        return {name: records(frame) for name, frame in self.items()}


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of *frame* as plain dicts, NaN and <NA> as None."""
    plain = frame.astype(object)
    return plain.where(plain.notna(), None).to_dict("records")


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    import pandas as pd

    rows = [{"id": f.id, "rule": f.rule, "cause": f.cause, "severity": f.severity,
             "device": f.device, "pid": f.pid, "phase": f.phase, "start_ns": f.start_ns,
             "end_ns": f.end_ns, "cost_ns": f.cost_ns, "share_pct": f.share_pct,
             "count": f.count,
             "median_ns_per_iteration": (f.per_iteration or {}).get("median_ns"),
             "streams": list(f.streams), "ranges": list(f.ranges), "message": f.message,
             "fix": f.fix, "consequence_of": f.consequence_of,
             "evidence": f.to_dict()["evidence"]} for f in findings]
    frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    for column in ("start_ns", "end_ns", "cost_ns", "count"):
        frame[column] = frame[column].astype(np.int64)
    # A process id as the trace's frames hold one: int64, -1 (NO_CALL) where no process
    # is known, never a nullable column.
    frame["pid"] = frame["pid"].fillna(NO_CALL).astype(np.int64)
    for column in ("device", "median_ns_per_iteration"):
        frame[column] = frame[column].astype("Int64")       # None where not known
    frame["share_pct"] = frame["share_pct"].astype(np.float64)
    return frame


def ranges_frame(ranges: Sequence[Any]) -> pd.DataFrame:
    """The range table (``Analysis.ranges``): path as 'outer > inner', then its metrics
    (gpugap.accounting.metrics.Metrics, one column each)."""
    import pandas as pd

    rows = []
    for r in ranges:
        row = {"path": " > ".join(r.path or [r.name]), "name": r.name, "domain": r.domain,
               "depth": r.depth, "count": r.count, "cpu_ns": r.cpu_ns}
        row.update(r.metrics.to_dict())
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(RANGE_COLUMNS))
    # One dtype per column whatever the rows hold (a metric unknown in every row would
    # leave an object column): shares and ratios float64 (NaN: unknown), the rest int64.
    for column in RANGE_COLUMNS[3:]:
        frame[column] = frame[column].astype(np.float64 if column in FLOAT_METRICS
                                             else np.int64)
    return frame


def phases_frame(accounting: Accounting | None) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for device, dev in sorted((accounting.devices if accounting else {}).items()):
        ph = dev.phases
        n = 0 if ph.iterations is None else len(ph.iterations)
        steady = len(ph.steady_iterations)
        counts = {"start-up": 0, "warm-up": n - steady, "steady": steady, "tail": 0}
        for phase in PHASES:
            lo, hi = ph.spans[phase]
            rows.append({"device": device, "phase": phase, "start_ns": int(lo),
                         "end_ns": int(hi), "ns": int(hi - lo), "iterations": counts[phase],
                         "how": ph.how})
    frame = pd.DataFrame(rows, columns=list(PHASE_COLUMNS))
    # The accounting's dtype, so that the two frames line up on (device, phase): pandas
    # before 3 finds a categorical level and an object one unequal.
    frame["phase"] = pd.Categorical(frame["phase"], categories=list(PHASES), ordered=True)
    return frame


def accounting_frame(accounting: Accounting | None) -> pd.DataFrame:
    import pandas as pd

    busy = {b.id: b.busy for b in BUCKETS}
    parts = []
    for device, dev in sorted((accounting.devices if accounting else {}).items()):
        lo = np.array([dev.phases.spans[p][0] for p in PHASES], dtype=np.int64)
        hi = np.array([dev.phases.spans[p][1] for p in PHASES], dtype=np.int64)
        totals = dev.totals(lo, hi)                  # one row per phase, a column per bucket
        long = totals.assign(phase=list(PHASES)).melt(id_vars="phase", var_name="bucket",
                                                      value_name="ns")
        long.insert(0, "device", device)
        parts.append(long[long["ns"] > 0])
    if not parts:
        return pd.DataFrame(columns=list(ACCOUNTING_COLUMNS))
    frame = pd.concat(parts, ignore_index=True)
    frame["ns"] = frame["ns"].astype(np.int64)
    frame["busy"] = frame["bucket"].map(busy).astype(bool)
    length = frame.groupby(["device", "phase"])["ns"].transform("sum")
    frame["pct"] = (100.0 * frame["ns"] / length).round(3)
    # Phases in timeline order, buckets in the accounting's order.
    frame["phase"] = pd.Categorical(frame["phase"], categories=list(PHASES), ordered=True)
    frame["bucket"] = pd.Categorical(frame["bucket"], categories=list(IDS), ordered=True)
    frame = frame.sort_values(["device", "phase", "bucket"], kind="stable")
    return frame[list(ACCOUNTING_COLUMNS)].reset_index(drop=True)


def iterations_frame(accounting: Accounting | None) -> pd.DataFrame:
    import pandas as pd

    parts = []
    for device, dev in sorted((accounting.devices if accounting else {}).items()):
        it = dev.phases.iterations
        if it is None or not len(it):
            continue
        lo, hi = it.bounds[:-1].astype(np.int64), it.bounds[1:].astype(np.int64)
        index = np.arange(lo.size)
        labels = it.labels if len(it.labels) == lo.size else [str(i) for i in index]
        head = pd.DataFrame({"device": device, "iteration": index, "label": labels,
                             "phase": np.where(index < dev.phases.warmup, "warm-up",
                                               "steady"),
                             "start_ns": lo, "end_ns": hi, "ns": hi - lo})
        parts.append(pd.concat([head, dev.totals(lo, hi)], axis=1))
    if not parts:
        return pd.DataFrame(columns=list(ITERATION_COLUMNS) + list(IDS))
    return pd.concat(parts, ignore_index=True)


def frames(analysis: Any) -> Frames:
    """The Frames of an Analysis (gpugap.analysis)."""
    acc = analysis.accounting
    return Frames(findings=findings_frame(analysis.findings),
                  ranges=ranges_frame(analysis.ranges), phases=phases_frame(acc),
                  accounting=accounting_frame(acc), iterations=iterations_frame(acc))
