"""`gpugap check`, `gpugap baseline save` and `gpugap diff`: gpugap as a CI gate.

Thin: options are merged with the project configuration (gpugap.ci.config), the work is
gpugap.ci.gates / gpugap.ci.baseline / gpugap.ci.diff, the output gpugap.render.*.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpugap.cli.outputs import OUTPUT_OPTIONS, Outputs, output_options
from gpugap.cli.root import (
    ConfigOpt,
    NoConfigOpt,
    NsysOpt,
    RangeOpt,
    SchedulerOpt,
    SchedulerTimeoutOpt,
    SetOpt,
    WorkersOpt,
    app,
    job_progress,
    load_trace,
    parse_thresholds,
    reports_named,
    status,
    stderr,
    stdout,
)
from gpugap.errors import UsageError
from gpugap.render.outputs import CHECK, DIFF, View
from gpugap.text import MESSAGE_LIMIT, fit_path, name_paths, safe_rich, safe_text, shown_path

if TYPE_CHECKING:                   # the library is imported inside commands (start-up)
    from rich.text import Text

    from gpugap.ci.config import Config
    from gpugap.ci.diff import Diff, FindingChange
    from gpugap.ci.gates import Check
    from gpugap.render.fit import Cell

FORCE_HELP = "replace existing output files (never an input)"
ForceOpt = Annotated[bool, typer.Option("--force", help=FORCE_HELP)]
SeverityOpt = Annotated[str | None, typer.Option(
    "--min-severity", help="findings.* metrics count findings of this severity and up: "
                           "info (default), warning, error", metavar="SEVERITY")]

BaselineSeverityOpt = Annotated[str | None, typer.Option(
    "--min-severity", help="findings.* metrics count findings of this severity and up: "
                           "warning (default) or error; a baseline never counts info "
                           "findings (info is taken as warning)", metavar="SEVERITY")]

SAVED_RANGES_SHOWN = 8      # baseline save names this many ranges, then counts the rest

baseline_app = typer.Typer(no_args_is_help=True,
                           help="Save the metrics of known-good runs for gpugap check "
                                "--baseline.",
                           short_help="Save the metrics of known-good runs.")
app.add_typer(baseline_app, name="baseline")


def one_job(reports: list[Path], nsys: str | None, needs: str) -> None:
    """UsageError unless *reports* are the ranks of one job by what they record (as
    gpugap.analyze_job requires): what *needs* them (job.* gates, a job baseline) takes
    one job's ranks, and unrelated reports taken together give meaningless waits and
    skews."""
    from gpugap.analysis.job import require_one_job

    require_one_job(reports, nsys=nsys,
                    fix=f"{needs} the ranks of one job: pass those (gpugap analyze "
                        "REPORT... shows the jobs they form)")


def project_config(config: Path | None, no_config: bool, *, range_name: str | None = None,
                   set_: list[str] | None = None, min_severity: str | None = None
                   ) -> Config:
    """The configuration file merged with the command line (which wins)."""
    from gpugap.ci.config import load_config
    from gpugap.rules.model import Severity

    if min_severity is not None and min_severity not in Severity.names():
        raise UsageError(f"bad --min-severity '{min_severity}'; use one of "
                         f"{', '.join(Severity.names())}")
    if config is not None and no_config:
        raise UsageError("--config and --no-config contradict each other; give one")
    cfg = load_config(config, discover=not no_config)
    return cfg.overridden(range=range_name, min_severity=min_severity,
                          thresholds=cfg.merged_thresholds(parse_thresholds(set_)))


@app.command(short_help="The CI gate: exit 1 when a report breaks a gate.")
@output_options(CHECK, force_help=FORCE_HELP)
def check(
    reports: Annotated[list[Path], typer.Argument(
        help="reports (.nsys-rep or .sqlite) to check; every gate applies to each",
        metavar="REPORT")],
    min_: Annotated[list[str] | None, typer.Option(
        "--min", help="gate: fail when the metric is below VALUE "
                      "(repeatable), e.g. --min kernel_overlap_pct=50",
        metavar="METRIC=VALUE")] = None,
    max_: Annotated[list[str] | None, typer.Option(
        "--max", help="gate: fail when the metric is above VALUE "
                      "(repeatable), e.g. --max findings.blocking-memcpy.count=0",
        metavar="METRIC=VALUE")] = None,
    range_: RangeOpt = None,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="also fail on a regression against this baseline "
                           "(gpugap baseline save)", metavar="FILE")] = None,
    tolerance: Annotated[float | None, typer.Option(
        "--tolerance", help="allowed change before a baseline regression fails: points "
                            "for *_pct metrics, percent of the baseline otherwise "
                            "(default 5)", metavar="N")] = None,
    allow_missing: Annotated[bool, typer.Option(
        "--allow-missing", help="let a gate on a null metric (no copies, say) pass "
                                "instead of failing")] = False,
    allow_lost_gpu_data: Annotated[bool, typer.Option(
        "--allow-lost-gpu-data", help="check a report that lost GPU data (kernel launches "
                                      "without their kernels, an nsys older than the "
                                      "CUDA it traced) instead of failing it")] = False,
    outputs: Outputs = OUTPUT_OPTIONS,
    min_severity: SeverityOpt = None,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_timeout: SchedulerTimeoutOpt = 10.0,
) -> int:
    """Fail (exit 1) when a report breaks a gate: a metric past a limit, or a regression
    against a baseline. Gates come from --min/--max and from gpugap.toml or the tool.gpugap
    table of pyproject.toml (see docs/ci.md). Gates on job.* metrics (and a baseline
    saved with --job) hold the REPORTs together, as the ranks of one job (which they
    must be, by what they record). A report that lost GPU data fails too, unless
    --allow-lost-gpu-data."""
    from gpugap.ci.baseline import load as load_baseline
    from gpugap.ci.check import evaluate
    from gpugap.ci.gates import Check, parse_gate

    cfg = project_config(config, no_config, range_name=range_, set_=set_,
                         min_severity=min_severity)
    if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
        raise UsageError(f"--tolerance must be a finite number >= 0, not {tolerance:g}")
    cfg = cfg.overridden(tolerance=tolerance,
                         allow_missing=allow_missing or cfg.allow_missing,
                         allow_lost_gpu_data=allow_lost_gpu_data or cfg.allow_lost_gpu_data)
    gates = [*cfg.gates, *(parse_gate("min", g) for g in min_ or []),
             *(parse_gate("max", g) for g in max_ or [])]
    baseline_file = baseline or cfg.baseline_file
    if tolerance is not None and baseline_file is None:
        raise UsageError("--tolerance applies to a baseline; give --baseline FILE "
                         "(or file in [tool.gpugap.baseline])")
    if not gates and baseline_file is None:
        raise UsageError("no gates to check: give --min/--max METRIC=VALUE or --baseline "
                         "FILE, or configure [tool.gpugap.gates] in pyproject.toml or "
                         "gpugap.toml (see docs/ci.md)")
    if scheduler is not None:
        from gpugap.analysis.scheduler import check_address

        check_address(scheduler)
    reports = reports_named(reports)
    name_paths(reports)
    inputs = [*reports, cfg.path, baseline_file]
    outputs.check(CHECK, inputs)
    known = load_baseline(baseline_file) if baseline_file is not None else None
    policy = cfg.policy()
    job_gates = [g for g in gates if g.metric.startswith("job.")]
    report_gates = [g for g in gates if not g.metric.startswith("job.")]
    job_baseline = known is not None and known.of_job

    if job_gates or job_baseline:          # before any report is analyzed
        one_job(reports, nsys, "a job baseline needs" if job_baseline
                else "job.* gates need")
    checked = []
    if report_gates or (known is not None and not job_baseline):
        for report in reports:
            trace = load_trace(report, nsys)
            with status(f"Checking {report.name}"):
                checked.append(evaluate(
                    trace, report_gates, range_name=cfg.range, thresholds=cfg.thresholds,
                    min_severity=cfg.min_severity, allow_missing=cfg.allow_missing,
                    baseline=None if job_baseline else known, policy=policy,
                    allow_lost_gpu_data=cfg.allow_lost_gpu_data))
    failed_reports = 0
    if job_gates or job_baseline:
        from gpugap.analysis.job import analyze_job
        from gpugap.ci.measure import job_measurements

        if cfg.range is not None or any(g.range for g in job_gates):
            raise UsageError("job.* gates cover the whole job's steady state; they take "
                             "no --range")
        with job_progress(len(reports)) as progress:
            job = analyze_job(reports, workers=workers, scheduler=scheduler,
                              scheduler_timeout=scheduler_timeout,
                              progress=progress, nsys=nsys, thresholds=cfg.thresholds)
        failed_reports = len(job.failed)
        checked.append(evaluate(
            job_measurements(job, thresholds=cfg.thresholds, min_severity=cfg.min_severity),
            job_gates, allow_missing=cfg.allow_missing,
            baseline=known if job_baseline else None, policy=policy))
    result = Check(checked, config=None if cfg.path is None else str(cfg.path),
                   baseline=None if baseline_file is None else str(baseline_file))

    outputs.write(CHECK, result, View(), inputs=inputs, terminal=lambda: render_check(result),
                  console=stdout, errors=stderr)
    if not result.passed:
        return 1
    from gpugap.errors import EXIT_PARTIAL

    return EXIT_PARTIAL if failed_reports else 0


def check_result_line(result: Check) -> Text:
    """'gpugap check passed: 29 of 29 gates held in 1 report(s)' (or failed)."""
    from rich.text import Text

    counts = result.counts()
    if result.passed:
        return Text.assemble(("gpugap check passed", "green"),
                             f": {counts['passed']} of {counts['gates']} gates held in "
                             f"{len(result.reports)} report(s)"
                             + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))
    return Text.assemble(("gpugap check failed", "bold red"),
                         f": {counts['failed']} of {counts['gates']} gates failed in "
                         f"{len(result.reports)} report(s)")


def render_check(result: Check) -> None:
    """The result first: passed or failed, each failed gate and each warning, wrapped.
    Then a table per report, fitted to the terminal (80 columns in a CI log): result,
    metric, value, baseline median, limit; the range only when a gate looks at another
    one than the report's. The result again last, for a log read from its end."""
    from rich.text import Text

    from gpugap.ci.gates import BASELINE, DATA, FAIL, fmt_value
    from gpugap.render.fit import fitted_table, print_labelled
    from gpugap.render.markdown import limit_text

    stdout.print(check_result_line(result))
    several = len(result.reports) > 1
    for report in result.reports:
        for r in report.results:
            if r.status == FAIL:
                print_labelled(stdout, "FAIL", "bold red", safe_text(r.message, MESSAGE_LIMIT))
        for w in report.warnings:
            print_labelled(stdout, "warning:", "yellow",
                           safe_text(f"{shown_path(report.report)}: {w}" if several else w,
                                     MESSAGE_LIMIT))
    style = {"pass": "green", "fail": "bold red", "skip": "yellow"}
    for report in result.reports:
        where = "whole report" if report.scope is None else \
            f"range '{safe_text(report.scope)}'"
        title = Text(f"{fit_path(shown_path(report.report), stdout.width)} ({where})")
        ranges = any(r.scope != report.scope for r in report.results)
        medians = any(r.kind == BASELINE for r in report.results)
        headers = ["result", *(["range"] if ranges else []), "metric", "value",
                   *(["median"] if medians else []), "limit"]
        rows: list[list[Cell]] = []
        for r in report.results:
            median = (r.baseline or {}).get("median") if r.kind == BASELINE else None
            rows.append([
                Text(r.status.upper(), style[r.status]),
                *([Text("whole") if r.scope is None else safe_rich(r.scope)]
                  if ranges else []),
                safe_rich(r.label if r.kind == DATA else r.metric),
                fmt_value(r.metric, r.value),
                *([fmt_value(r.metric, median) if r.kind == BASELINE else ""]
                  if medians else []),
                limit_text(r)])
        first_number = 3 if ranges else 2
        # The title on a line of its own, as wide as the terminal (a table's own title
        # wraps at the table's width).
        stdout.print(title)
        stdout.print(fitted_table(stdout.width, headers, rows, name_column=first_number - 1,
                                  right=range(first_number, len(headers))))
    stdout.print(check_result_line(result))


@baseline_app.command("save", short_help="Store the metrics of known-good reports.")
def baseline_save(
    reports: Annotated[list[Path], typer.Argument(
        help="known-good reports; several runs of one program give median and spread",
        metavar="REPORT")],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="baseline file to write (default: the file of the "
                               "tool.gpugap.baseline table)", metavar="FILE")] = None,
    range_: Annotated[list[str] | None, typer.Option(
        "--range", help="also store this NVTX range (repeatable); the ranges analyze "
                        "lists and those the config gates are always stored",
        metavar="NAME")] = None,
    min_severity: BaselineSeverityOpt = None,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    force: ForceOpt = False,
    job: Annotated[bool, typer.Option(
        "--job", help="the REPORTs are the ranks of one job: store the job's metrics "
                      "(job.*) for gpugap check --baseline")] = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_timeout: SchedulerTimeoutOpt = 10.0,
) -> int:
    """Store the metrics of REPORTs (whole report and per NVTX range) as a baseline; with
    --job, the job.* metrics of the REPORTs taken together as the ranks of one job (which
    they must be, by what they record)."""
    from gpugap.analysis.job import analyze_job
    from gpugap.ci import baseline as baselines
    from gpugap.ci.measure import job_measurements, measure, reported_range_names
    from gpugap.files import validate_outputs
    from gpugap.render.fit import print_labelled

    cfg = project_config(config, no_config, set_=set_, min_severity=min_severity)
    output = output or cfg.baseline_file
    if output is None:
        raise UsageError("where should the baseline go? give -o FILE "
                         "(or file in [tool.gpugap.baseline])")
    if scheduler is not None:
        from gpugap.analysis.scheduler import check_address

        check_address(scheduler)
    reports = reports_named(reports)
    name_paths(reports)
    validate_outputs([("-o", output)], [*reports, cfg.path], force=force)
    wanted = [*filter(None, [cfg.range]), *cfg.gated_ranges, *(range_ or [])]
    runs = []
    if job:
        if wanted:
            raise UsageError("a job baseline covers the whole job's steady state; "
                             "--range does not apply")
        one_job(reports, nsys, "--job needs")
        with job_progress(len(reports)) as progress:
            combined = analyze_job(reports, workers=workers, scheduler=scheduler,
                                   scheduler_timeout=scheduler_timeout,
                                   progress=progress, nsys=nsys, thresholds=cfg.thresholds)
        if combined.failed:
            raise UsageError("a job baseline needs every report: "
                             + "; ".join(f"{s.report}: {s.error}" for s in combined.failed[:3]))
        runs.append(job_measurements(combined, thresholds=cfg.thresholds,
                                     min_severity=cfg.min_severity))
    for report in [] if job else reports:
        trace = load_trace(report, nsys)
        with status(f"Measuring {report.name}"):
            runs.append(measure(trace, ranges=[*reported_range_names(trace), *wanted],
                                thresholds=cfg.thresholds, min_severity=cfg.min_severity))
    saved = baselines.build(runs)
    baselines.save(saved, output, force=force)
    ranges = [safe_text(s) for s in saved.scopes if s is not None]
    shown = ", ".join(ranges[:SAVED_RANGES_SHOWN]) + (
        f" and {len(ranges) - SAVED_RANGES_SHOWN} more" if len(ranges) > SAVED_RANGES_SHOWN
        else "")
    # The file on a line of its own (a path is never broken), the ranges wrapped below.
    stdout.print(safe_text(f"saved baseline {output} from {len(runs)} run(s): the whole "
                           f"report and {len(ranges)} NVTX range(s)", None),
                 soft_wrap=True, highlight=False, markup=False)
    if ranges:
        print_labelled(stdout, "ranges:", "", shown)
    return 0


@app.command("diff", short_help="Compare two reports: metrics and findings.")
@output_options(DIFF, force_help=FORCE_HELP)
def diff_command(
    before: Annotated[Path, typer.Argument(help="the report before the change",
                                           metavar="BEFORE")],
    after: Annotated[Path, typer.Argument(help="the report after the change",
                                          metavar="AFTER")],
    outputs: Outputs = OUTPUT_OPTIONS,
    range_: RangeOpt = None,
    min_severity: SeverityOpt = None,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    all_: Annotated[bool, typer.Option(
        "--all", help="list every metric, NVTX range and finding, those within the "
                      "noise too (default: only what moved)")] = False,
) -> int:
    """Compare two reports: what got better or worse first (findings fixed, new,
    changed; metrics that moved beyond their noise floor), per NVTX range too."""
    from gpugap.ci.diff import diff

    cfg = project_config(config, no_config, set_=set_, min_severity=min_severity)
    name_paths([before, after])
    inputs = [before, after, cfg.path]
    outputs.check(DIFF, inputs)
    traces = [load_trace(before, nsys), load_trace(after, nsys)]
    with status("Comparing"):
        result = diff(*traces, range_name=range_, thresholds=cfg.thresholds,
                      min_severity=cfg.min_severity, directions=cfg.directions)
    outputs.write(DIFF, result, View(), inputs=inputs,
                  terminal=lambda: render_diff(result, everything=all_),
                  console=stdout, errors=stderr)
    return 0


def render_diff(result: Diff, everything: bool = False) -> None:
    """What got better or worse first: a summary, the findings fixed, new and changed
    (worse or better by cost), the metrics that moved beyond their noise floor, the NVTX
    ranges where one did. *everything* (--all): every metric, range and finding. Each
    table fitted to the terminal (80 columns in a CI log): names wrap at their dots and
    dashes; where a table would still be too wide, 'before -> after' cells take two
    lines."""
    from rich.text import Text

    from gpugap.ci.gates import fmt_value
    from gpugap.render.fit import fitted_table, leaves_room, print_labelled
    from gpugap.render.markdown import fmt_delta
    from gpugap.render.terminal import joined
    from gpugap.units import fmt_ns

    colour = {"better": "green", "worse": "bold red", "fixed": "green", "new": "bold red"}
    width = stdout.width

    # Nanosecond counts read better as times on a terminal (JSON keeps them exact).
    def shown(metric: str, value: float | None) -> str:
        if metric.endswith("_ns") and value is not None:
            return fmt_ns(value)
        return fmt_value(metric, value)

    def shown_delta(metric: str, delta: float | None) -> str:
        if metric.endswith("_ns") and delta is not None:
            return ("+" if delta >= 0 else "-") + fmt_ns(abs(delta))
        return fmt_delta(metric, delta)

    main = result.scope(result.range)
    where = "whole report" if main.scope is None else f"range '{safe_text(main.scope)}'"
    # Rules that found nothing on either side add rows, not information.
    metrics = [m for m in main.metrics
               if not (m.metric.count(".") == 2 and not m.before and not m.after)]
    moving = [m for m in metrics if m.moved]
    by_change = {c: sum(m.change == c for m in moving) for c in ("better", "worse", "changed")}
    summary = result.summary()
    moved = {c: sum(f.change == c for f in result.findings)
             for c in ("worse", "better", "changed")}
    before, after = (fit_path(shown_path(p), width - len("gpugap diff "))
                     for p in (result.before, result.after))
    # Each report whole on a line, the scope too.
    stdout.print(joined([Text(f"gpugap diff {before}"), Text(f"-> {after}"),
                         Text(f"({where})")], width, indent=2, sep=" ", first_indent=0),
                 style="bold")
    # Better or worse first, by the time the program lost.
    if result.judgement is not None:
        verdict = result.judgement.text(result.range)
        word, _, rest = verdict.partition(": ")
        print_labelled(stdout, f"{word}:", colour.get(word, ""), safe_text(rest, MESSAGE_LIMIT))
    for w in result.warnings:           # two programs, other thresholds: read them first
        print_labelled(stdout, "warning:", "yellow", safe_text(w, MESSAGE_LIMIT))
    stdout.print(Text.assemble(
        "findings: ", (f"{summary['fixed']} fixed", "green" if summary["fixed"] else ""),
        ", ", (f"{summary['new']} new", "bold red" if summary["new"] else ""),
        f", {summary['changed']} changed ({moved['worse']} worse, {moved['better']} better"
        + (f", {moved['changed']} in count only" if moved["changed"] else "")
        + f"), {summary['unchanged']} unchanged"))
    stdout.print(Text.assemble(
        "metrics: ", (f"{by_change['better']} better", "green" if by_change["better"] else ""),
        ", ", (f"{by_change['worse']} worse", "bold red" if by_change["worse"] else ""),
        f", {by_change['changed']} changed"
        + (f", {len(moving) - sum(by_change.values())} on one side only"
           if len(moving) > sum(by_change.values()) else "")
        + f"; {len(metrics) - len(moving)} within noise"))

    findings = result.findings if everything else \
        [f for f in result.findings if f.status != "unchanged"]
    if findings:
        def status(f: FindingChange) -> Text:
            return Text("count" if f.change == "changed" else f.change,
                        colour.get(f.change, ""))

        def finding_rows(sep: str) -> list[list[Cell]]:
            return [[status(f),
                     safe_rich(f"{f.rule} [{f.cause}] in "
                               + (" > ".join(f.where) or "outside NVTX ranges")),
                     f"{f.count_before} -> {f.count_after}",
                     f"{f.cost_ms_before:g} -> {f.cost_ms_after:g}{sep}"
                     f"({f.cost_ms_delta:+.3f})"] for f in findings]

        headers = ["status", "finding", "count", "cost ms"]
        rows = finding_rows(" ")
        if not leaves_room(width, headers, rows, 1, 30):
            rows = finding_rows("\n")
        stdout.print(fitted_table(width, headers, rows, name_column=1, right=(2, 3),
                                  title="Findings" if everything else
                                  "Findings fixed, new and changed"))

    listed = metrics if everything else moving
    if listed:
        rows = [[safe_rich(m.metric), shown(m.metric, m.before), shown(m.metric, m.after),
                 shown_delta(m.metric, m.delta), Text(m.change, colour.get(m.change, ""))]
                for m in listed]
        stdout.print(fitted_table(
            width, ["metric", "before", "after", "delta", "change"], rows, name_column=0,
            right=(1, 2, 3), title=f"Metrics, {where}" if everything else
            f"Metrics beyond their noise floor, {where}"))
    ranges = [s for s in result.scopes if s.scope is not None and s is not main
              and (everything or not (s.in_before and s.in_after)
                   or any(s.get(m).moved for _, m in DIFF_RANGE_COLUMNS))]
    if ranges:
        def arrow(metric: str, before: float | None, after: float | None, sep: str) -> str:
            if before == after:
                return fmt_value(metric, after)
            return f"{fmt_value(metric, before)}{sep}-> {fmt_value(metric, after)}"

        def range_rows(sep: str) -> list[list[Cell]]:
            return [[safe_rich(s.scope if s.in_before and s.in_after else
                               f"{s.scope} ({'after' if s.in_after else 'before'} only)"),
                     *(arrow(m, s.get(m).before, s.get(m).after, sep)
                       for _, m in DIFF_RANGE_COLUMNS)] for s in ranges]

        headers = ["range", *(c for c, _ in DIFF_RANGE_COLUMNS)]
        rows = range_rows(" ")
        if not leaves_room(width, headers, rows, 0, 16):
            rows = range_rows("\n")
        hidden = sum(s.scope is not None and s is not main for s in result.scopes) \
            - len(ranges)
        stdout.print(fitted_table(width, headers, rows, name_column=0, right=range(1, 6),
                                  title="NVTX ranges (before -> after)" if everything else
                                  "NVTX ranges that moved (before -> after)"))
        if hidden:
            stdout.print(f"{hidden} more NVTX ranges within the noise; --all lists them")
    if not everything and len(listed) < len(metrics):
        stdout.print(Text("--all lists every metric, range and finding", style="dim"))


# The per-range table of a terminal diff: RANGE_COLUMNS of the Markdown, short headers
# (as analyze's NVTX table) so that six columns fit 80.
DIFF_RANGE_COLUMNS = (("busy", "gpu_busy_pct"), ("k-overlap", "kernel_overlap_pct"),
                      ("copy/comp", "copy_compute_overlap_pct"), ("conc.", "concurrency"),
                      ("findings", "findings.count"))
