"""One call from a loaded trace to everything gpugap says about it.

The data path runs one way: the loaded report -> the accounting (phases, every
nanosecond in one bucket, per device) -> the rules (findings whose costs are settled
from the accounting) -> the verdict (the one thing to say first) -> the renderers.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gpugap import __version__
from gpugap import intervals as tl
from gpugap import rules as rule_registry
from gpugap.accounting import Accounting, account, metrics
from gpugap.accounting import ranges as nvtx_ranges
from gpugap.accounting.api_names import GPU_WORK
from gpugap.accounting.metrics import Metrics
from gpugap.accounting.scope import Scope
from gpugap.analysis import host_evidence
from gpugap.analysis.claims import contradictions
from gpugap.analysis.frames import Frames
from gpugap.analysis.frames import frames as frames_of
from gpugap.analysis.instances import RangeInstances, range_instances
from gpugap.analysis.stages import Stages
from gpugap.analysis.verdict import Verdict, decide
from gpugap.errors import NoCudaActivity
from gpugap.jsonout import Record, Shown
from gpugap.program import Program, understand
from gpugap.report.table import Table
from gpugap.report.trace import Trace
from gpugap.rules import thresholds as rule_thresholds
from gpugap.rules.base import Context, Finding
from gpugap.rules.settle import settle


@dataclass
class RangeMetrics(Record):
    """One row of the range table: the instances of one path of nested ranges (``path``:
    names, outermost first, ending with ``name``; ``depth`` is its nesting level)."""
    name: str
    domain: str
    depth: int
    count: int
    cpu_ns: int
    metrics: Metrics
    path: list[str] = field(default_factory=list)
    # First start and last end of the row's windows (for zooming to it), not in the JSON.
    extent: tuple[int, int] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "domain": self.domain, "depth": self.depth,
                "path": list(self.path or [self.name]), "count": self.count,
                "cpu_ns": self.cpu_ns, "metrics": self.metrics.to_dict()}


@dataclass(repr=False)
class Analysis(Shown, Record):
    """Everything gpugap says about one report (docs/api.md): read as attributes or as a
    mapping (``analysis['verdict']``), as JSON with :meth:`to_json` (what ``gpugap
    analyze --json`` prints), as DataFrames with :meth:`frames`; in Jupyter it draws
    itself (:meth:`_repr_html_`)."""

    report: str
    sqlite: str
    nsys_version: str | None
    schema_version: str | None
    gpu: dict[str, Any]
    metrics: Metrics | None
    devices: list[dict[str, Any]]
    ranges: list[RangeMetrics]
    findings: list[Finding]
    ranges_omitted: int = 0          # paths left out of `ranges` (beyond its row limit)
    warnings: list[str] = field(default_factory=list)
    # What the verdict and the findings judge (gpugap.accounting.scope): a --range, else
    # each device's steady state; its range_name is the JSON's "scope".
    scope: Scope = field(default_factory=Scope)
    status: str = "ok"
    error: str | None = None
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    verdict: Verdict | None = None
    # What gpugap understood the program to be (gpugap.program): printed first.
    program: Program | None = field(default=None, repr=False)
    accounting: Accounting | None = field(default=None, repr=False)
    # A --range's instances: how many are warm-up, the time between them (None without
    # a --range).
    instances: RangeInstances | None = None
    # Draws the analysis as HTML for Jupyter: set by gpugap.analyze, which may import the
    # renderers (gpugap.render.notebook) that this layer may not.
    html_view: Callable[[Analysis], str] | None = field(default=None, repr=False,
                                                         compare=False)

    _extra_keys = ("program",)

    def judged(self, device: int) -> tl.Intervals:
        """The windows of *device* the verdict judged (steady state or --range)."""
        return self.scope.on(device)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpugap_version": __version__, "report": self.report, "sqlite": self.sqlite,
            "nsys_version": self.nsys_version, "schema_version": self.schema_version,
            "status": self.status, "error": self.error,
            "scope": self.scope.range_name,
            "range_instances": None if self.instances is None else self.instances.to_dict(),
            "program": None if self.program is None else self.program.to_dict(),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "gpu": self.gpu,
            "metrics": None if self.metrics is None else self.metrics.to_dict(),
            "devices": self.devices,
            "ranges": [r.to_dict() for r in self.ranges],
            "ranges_omitted": self.ranges_omitted,
            "findings": [f.to_dict() for f in self.findings],
            "warnings": self.warnings, "thresholds": self.thresholds,
        }

    def frames(self) -> Frames:
        """Findings, the range table, phases, the time accounting and iterations as tidy
        DataFrames (gpugap.analysis.frames: pandas is imported then)."""
        return frames_of(self)

    def findings_of(self, rule: str, cause: str | None = None) -> list[Finding]:
        return [f for f in self.findings
                if f.rule == rule and (cause is None or f.cause == cause)]

    def summary(self) -> str:
        """A few lines: the report, the program, the verdict, the findings by severity."""
        name = self.scope.range_name
        lines = [f"Analysis of {self.report}" + (f" (range {name})" if name else "")]
        if self.program is not None:
            lines.append(f"  Program: {self.program.line()}")
        if self.status != "ok":
            lines.append(f"  {self.status}: {self.error}")
        if self.verdict is not None:
            lines.append(f"  Verdict: {self.verdict.headline}")
        lines = [textwrap.fill(line, 80, subsequent_indent="    ") for line in lines]
        counts = {s: sum(1 for f in self.findings if f.severity == s)
                  for s in ("error", "warning", "info")}
        lines.append(f"  {len(self.findings)} finding(s): " + ", ".join(
            f"{n} {s}" for s, n in counts.items() if n) if self.findings
            else "  no findings")
        return "\n".join(lines)



def _gpu_summary(trace: Trace) -> dict[str, Any]:
    devices = trace.table("devices")
    if devices.empty:
        return {"name": None, "count": 0}
    active = set(metrics.active_devices(trace))
    rows = list(devices.records())
    row = next((r for r in rows if int(r["device"]) in active), rows[0])
    memory = row["memory_bytes"]
    return {"name": row["name"], "count": int(len(devices)), "device": int(row["device"]),
            "sm_count": int(row["sm_count"]), "compute_capability": row["compute_capability"],
            "memory_bytes": None if memory is None or memory != memory else int(memory),
            "max_threads_per_sm": int(row["max_threads_per_sm"]),
            "max_blocks_per_sm": int(row["max_blocks_per_sm"])}


def no_cuda_reason(trace: Trace) -> str:
    """Why a valid report has no GPU activity, and what to do."""
    api = trace.table("api")
    path, version = trace.info.path, trace.info.nsys_version or "unknown"
    if trace.info.cuda_traced is False or (trace.info.cuda_traced is None and api.empty):
        return (f"{path} has no CUDA activity: it was profiled without CUDA tracing; "
                "profile with nsys profile -t cuda,nvtx,osrt ...")
    launches = int(api.labels("name").matching(GPU_WORK).sum()) if len(api) else 0
    if launches:
        return (f"{path} records {launches} CUDA launch/copy calls but no GPU activity: "
                f"nsys {version} could not trace this CUDA runtime's GPU work (too old for "
                "it?); capture again with a newer Nsight Systems")
    return (f"{path} has no CUDA activity: CUDA was traced but the program made no "
            "kernel launches, copies or memsets; check that it uses the GPU")


# The names of the readings (Analyzer._readings), with a rule id, a device or None.
RULE, METRICS, SUMMARY, RANGES = "rule", "metrics", "summary", "ranges"

# GPU operations from which the accounting's slices and the pieces after it run on
# several cores (gpugap.forkjoin): below, they take less time than a fork and the
# pickling back cost.
FORK_MIN_OPS = 50_000


def processes_for(trace: Trace, processes: int | None = None) -> int | None:
    """How many processes an analysis of *trace* may use: *processes* when given, else
    every core allowed (None) for a report of FORK_MIN_OPS GPU operations or more and
    one below."""
    if processes is not None:
        return processes
    ops = sum(len(trace.table(n)) for n in ("kernels", "memcpys", "memsets", "graphs"))
    return None if ops >= FORK_MIN_OPS else 1


class Analyzer:
    """The accounting of a trace once, then any number of scopes (the whole report, or an
    NVTX range): the rules look at each scope's events, their findings are settled and
    judged in it, so that ``gpugap check`` over several ranges gives each exactly what
    ``analyze --range`` gives it."""

    def __init__(self, trace: Trace, *, rules: list[str] | None = None,
                 thresholds: Mapping[str, Mapping[str, float]] | None = None,
                 iteration: str | None = None, all_domains: bool = False,
                 processes: int | None = None,
                 not_before: tuple[int, str] | None = None) -> None:
        self.trace = trace
        self.selected = rule_registry.select(rules)
        # Each selected rule's thresholds: checked, its defaults merged, once.
        self.effective = rule_thresholds.effective(self.selected, thresholds)
        self.all_domains = all_domains
        self.accounting: Accounting | None = None
        self.program: Program | None = None
        self.processes = processes_for(trace, processes)
        # The whole report's metrics and range table need neither the program model nor
        # the accounting: on a big report they are computed beside them, in a process of
        # their own, while this one builds those on one core.
        self._early: Callable[[], dict[tuple[str, str | int | None], Any]] | None = None
        if trace.has_gpu_activity and self.processes != 1:
            self._early = Stages(self.processes, shared=(trace,)).ahead(
                self._whole_report_readings())
        if trace.has_gpu_activity:
            self.program = understand(trace, iteration=iteration)
            settings = rule_thresholds.accounting_settings(self.selected, self.effective)
            self.accounting = account(trace, settings,
                                      program=self.program, processes=self.processes,
                                      not_before=not_before)

    def _base(self, scope: Scope) -> Analysis:
        trace = self.trace
        return Analysis(
            report=trace.info.path, sqlite=trace.info.sqlite_path,
            nsys_version=trace.info.nsys_version, schema_version=trace.info.schema_version,
            gpu=_gpu_summary(trace), metrics=None, devices=[], ranges=[], findings=[],
            warnings=list(trace.info.warnings), scope=scope, thresholds=self.effective,
            program=self.program)

    def scope_of(self, range_name: str | None, instances: Table | None) -> Scope:
        """The one scope of an analysis (gpugap.accounting.scope): the --range
        *range_name* (its *instances*' windows; the phases stay inside a range of several
        instances, and the verdict judges its steady part; a range of one instance is
        judged whole), else each device's steady state."""
        windows = (nvtx_ranges.windows_of(self.trace, instances) if instances is not None
                   else None)
        devices = {} if self.accounting is None else self.accounting.devices
        return Scope.of(devices, range_name, windows,
                        whole_range=instances is not None and len(instances) < 2)

    def analyze(self, range_name: str | None = None, *, require_gpu: bool = True
                ) -> Analysis:
        trace = self.trace
        instances = nvtx_ranges.select(trace, range_name) if range_name else None
        scope = self.scope_of(range_name, instances)
        result = self._base(scope)
        if self.accounting is None:
            reason = no_cuda_reason(trace)
            if require_gpu:
                raise NoCudaActivity(reason)
            result.status, result.error = "no-cuda-activity", reason
            result.ranges, result.ranges_omitted = self._range_rows(instances)
            return result
        accounting = result.accounting = self.accounting
        context = Context(accounting, scope)
        if instances is not None and range_name:
            result.instances = range_instances(trace, range_name, instances, context)
        stages = Stages(self.processes, shared=(trace, accounting, context, self.program,
                                                *accounting.devices.values()))
        pieces = self._readings(context, instances)
        early: dict[tuple[str, str | int | None], Any] = {}
        if self._early is not None and range_name is None:
            # The whole report's, computed beside the accounting (__init__).
            early = self._early()
            pieces = {k: v for k, v in pieces.items() if k not in early}
        read = stages.fork(pieces) | early
        settled = stages.run(settle, [f for r in self.selected for f in read[RULE, r.id]],
                             self.selected, context, self.processes)
        findings = result.findings = stages.run(self._finish, context, settled)
        result.verdict, per_device_verdict = stages.run(
            decide, trace, accounting, findings, self.selected, scope)
        # What the CPU ran while the GPU idled, for a cause on the host (read from the
        # report's samples only inside the idle intervals the verdict explains, in the
        # windows it judged: the steady state, or the --range's).
        stages.run(host_evidence.attach, trace, accounting.devices, findings,
                   self.program, [result.verdict, *per_device_verdict.values()], scope)
        result.metrics = read[METRICS, None]
        result.ranges, result.ranges_omitted = read[RANGES, None]
        devices = metrics.active_devices(trace)
        for device in (int(d) for d in devices):
            row = trace.device_row(device)
            # One device: its metrics are the report's (same scope, same events).
            per_device = read[METRICS, None if len(devices) == 1 else device]
            dev = accounting.devices[device]
            result.devices.append({"device": device,
                                   "name": None if row is None else row["name"],
                                   "pids": [int(p) for p in dev.work.pids],
                                   "verdict": per_device_verdict[device].to_dict(),
                                   "accounting": read[SUMMARY, device],
                                   "metrics": per_device.to_dict()})
        # Nothing said contradicts anything else (gpugap.analysis.claims); if something
        # does, the analysis says so rather than printing it unremarked.
        result.warnings += [f"contradiction: {c}" for c in contradictions(result)]
        return result

    def _whole_report_readings(self) -> dict[tuple[str, str | int | None],
                                             Callable[[], Any]]:
        """The readings of _readings that the whole report's scope has whatever the
        accounting says: its metrics (and each device's) and its range table."""
        trace = self.trace
        devices = [int(d) for d in metrics.active_devices(trace)]
        pieces: dict[tuple[str, str | int | None], Callable[[], Any]] = {
            (METRICS, None): partial(metrics.compute, trace, None)}
        if len(devices) > 1:
            pieces |= {(METRICS, d): partial(metrics.compute, trace, None, [d])
                       for d in devices}
        pieces[RANGES, None] = partial(self._range_rows, None)
        return pieces

    def _readings(self, context: Context, instances: Table | None
                  ) -> dict[tuple[str, str | int | None], Callable[[], Any]]:
        """The stage that only reads the trace and the accounting, by name: each rule's
        detection (RULE, its id), the metrics (METRICS: the report's, None; each
        device's when there are several), each device's accounting summary (SUMMARY,
        device), the range table (RANGES, None)."""
        trace, accounting = self.trace, context.accounting
        windows = context.scope.range_windows
        devices = [int(d) for d in metrics.active_devices(trace)]
        pieces: dict[tuple[str, str | int | None], Callable[[], Any]] = dict(zip(
            [(RULE, r.id) for r in self.selected],
            rule_registry.detections(trace, context, self.selected, self.effective),
            strict=True))
        pieces[METRICS, None] = partial(metrics.compute, trace, windows)
        if len(devices) > 1:
            pieces |= {(METRICS, d): partial(metrics.compute, trace, windows, [d])
                       for d in devices}
        pieces |= {(SUMMARY, d): accounting.devices[d].summary for d in devices}
        pieces[RANGES, None] = partial(self._range_rows, instances)
        return pieces

    def _finish(self, context: Context, settled: list[Finding]) -> list[Finding]:
        """The stage after settling (gpugap.rules.settle): each rule finishes the
        findings it made, and each names its device's process where one drove it."""
        findings = rule_registry.finish(self.trace, self.selected, settled, context)
        for f in findings:
            dev = context.accounting.devices.get(f.device) if f.device is not None else None
            if f.pid is None and dev is not None and dev.work.pids.size == 1:
                f.pid = int(dev.work.pids[0])
        return findings

    def _range_rows(self, instances: Table | None) -> tuple[list[RangeMetrics], int]:
        """The range table (gpugap.accounting.ranges.reported_ranges): metrics per path of
        nested ranges; within --range, the instances that begin inside it. Returns (its
        rows, how many ranges it omitted)."""
        trace = self.trace
        table = nvtx_ranges.reported_ranges(trace, all_domains=self.all_domains,
                                            within=instances)
        rows = []
        for row in table.rows:
            inst = row.instances
            windows = nvtx_ranges.windows_of(trace, inst)
            rows.append(RangeMetrics(
                name=row.key.name, domain=row.key.domain, depth=row.depth,
                count=len(inst), cpu_ns=int((inst["end"] - inst["start"]).sum()),
                metrics=metrics.compute(trace, windows), path=list(row.path),
                extent=((int(windows[0][0]), int(windows[1][-1])) if windows[0].size
                        else None)))
        return rows, table.omitted


def analyze(trace: Trace, *, rules: list[str] | None = None,
            thresholds: Mapping[str, Mapping[str, float]] | None = None,
            range_name: str | None = None, require_gpu: bool = True,
            iteration: str | None = None, all_domains: bool = False,
            processes: int | None = None,
            not_before: tuple[int, str] | None = None) -> Analysis:
    """The verdict, the accounting of each device, metrics (whole report, per device, per
    NVTX range) and the findings of every rule.

    With *range_name*, metrics, findings and the verdict are restricted to that NVTX
    range. *iteration* names the NVTX range that marks one iteration ("none": no
    iterations); by default they are found (gpugap.accounting.phases). *all_domains*
    lists library NVTX ranges (CUB, NCCL...) beside the program's. Without GPU activity,
    raises NoCudaActivity when *require_gpu*, else returns an Analysis whose status is
    'no-cuda-activity' (its ranges still list the NVTX ranges found). *processes*: at
    most this many processes work on it (gpugap.forkjoin; 1: this one alone; default:
    every core for a big report, processes_for). *not_before*: (a time on the report's
    clock, who), for one rank of a job of several reports: its steady state starts no
    earlier, the job's other rank *who* being still warm-up until then
    (gpugap.analysis.job).
    """
    if range_name:
        nvtx_ranges.select(trace, range_name)         # a bad name fails before the work
    return Analyzer(trace, rules=rules, thresholds=thresholds, iteration=iteration,
                    all_domains=all_domains, processes=processes, not_before=not_before
                    ).analyze(range_name, require_gpu=require_gpu)
