"""`gpugap check`, `gpugap baseline save` and `gpugap diff`: gpugap as a CI gate.

Thin: options are merged with the project configuration (gpugap.config), the work is
gpugap.gates / gpugap.baseline / gpugap.diff, the output gpugap.render.*.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from gpugap.cli import (
    ConfigOpt,
    JsonOpt,
    NoConfigOpt,
    NsysOpt,
    RangeOpt,
    SchedulerOpt,
    SetOpt,
    WorkersOpt,
    app,
    job_progress,
    load_trace,
    parse_thresholds,
    status,
    stderr,
    stdout,
)
from gpugap.errors import UsageError
from gpugap.render.safe import MESSAGE_LIMIT, safe_rich, safe_text

ForceOpt = Annotated[bool, typer.Option(
    "--force", help="replace existing output files (never an input)")]
MarkdownOpt = Annotated[Path | None, typer.Option(
    "--markdown", help="write a Markdown summary here (default under GitHub Actions: "
                       "append it to $GITHUB_STEP_SUMMARY)")]
SeverityOpt = Annotated[str | None, typer.Option(
    "--min-severity", help="findings.* metrics count findings of this severity and up: "
                           "info (default), warning, error")]

baseline_app = typer.Typer(no_args_is_help=True, help="Save the metrics of known-good runs "
                                                      "for gpugap check --baseline.")
app.add_typer(baseline_app, name="baseline")


def project_config(config: Path | None, no_config: bool, *, range_name: str | None = None,
                   set_: list[str] | None = None, min_severity: str | None = None):
    """The configuration file merged with the command line (which wins)."""
    from gpugap.config import load_config
    from gpugap.gates import SEVERITY_RANK

    if min_severity is not None and min_severity not in SEVERITY_RANK:
        raise UsageError(f"bad --min-severity '{min_severity}'; use one of "
                         f"{', '.join(SEVERITY_RANK)}")
    if config is not None and no_config:
        raise UsageError("--config and --no-config contradict each other; give one")
    cfg = load_config(config, discover=not no_config)
    return cfg.overridden(range=range_name, min_severity=min_severity,
                          thresholds=cfg.merged_thresholds(parse_thresholds(set_)))


def write_output(path: Path, text: str, *, force: bool = False) -> None:
    """Write a file the user named (checked up front with validate_outputs)."""
    from gpugap.files import write_atomic

    write_atomic(path, text, force=force)
    stderr.print(f"wrote {safe_text(path, MESSAGE_LIMIT)}", markup=False, highlight=False,
                 soft_wrap=True)


def markdown_out(markdown: Path | None, text: str, *, force: bool = False,
                 inputs: Sequence[Path | None] = ()) -> None:
    """To --markdown, else appended to the GitHub job summary when there is one."""
    from gpugap.files import append_text
    from gpugap.render.github import step_summary

    if markdown is not None:
        write_output(markdown, text, force=force)
    elif (summary := step_summary()) is not None:
        append_text(summary, text + "\n", inputs)


def check_outputs(outputs: Sequence[tuple[str, Path | None]], inputs: Sequence[Path | None],
                  force: bool) -> None:
    """Every output option against the inputs, before any work (gpugap.files)."""
    from gpugap.files import validate_outputs

    validate_outputs(outputs, inputs, force=force)


@app.command()
def check(
    reports: Annotated[list[Path], typer.Argument(
        help="reports (.nsys-rep or .sqlite) to check; every gate applies to each")],
    min_: Annotated[list[str] | None, typer.Option(
        "--min", help="gate METRIC=VALUE: fail when the metric is below VALUE "
                      "(repeatable), e.g. --min kernel_overlap_pct=50")] = None,
    max_: Annotated[list[str] | None, typer.Option(
        "--max", help="gate METRIC=VALUE: fail when the metric is above VALUE "
                      "(repeatable), e.g. --max findings.blocking-memcpy.count=0")] = None,
    range_: RangeOpt = None,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="also fail on a regression against this baseline "
                           "(gpugap baseline save)")] = None,
    tolerance: Annotated[float | None, typer.Option(
        "--tolerance", help="allowed change before a baseline regression fails: points "
                            "for *_pct metrics, percent of the baseline otherwise "
                            "(default 5)")] = None,
    allow_missing: Annotated[bool, typer.Option(
        "--allow-missing", help="let a gate on a null metric (no copies, say) pass "
                                "instead of failing")] = False,
    allow_lost_gpu_data: Annotated[bool, typer.Option(
        "--allow-lost-gpu-data", help="check a report that lost GPU data (kernel launches "
                                      "without their kernels, an nsys older than the "
                                      "CUDA it traced) instead of failing it")] = False,
    junit: Annotated[Path | None, typer.Option(
        "--junit", help="write JUnit XML here (one test case per gate)")] = None,
    markdown: MarkdownOpt = None,
    json_: JsonOpt = False,
    min_severity: SeverityOpt = None,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    force: ForceOpt = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
) -> int:
    """Fail (exit 1) when a report breaks a gate: a metric past a limit, or a regression
    against a baseline. Gates come from --min/--max and from gpugap.toml or the tool.gpugap
    table of pyproject.toml (see docs/ci.md). Gates on job.* metrics (and a baseline
    saved with --job) hold the REPORTs together, as the ranks of one job. A report that
    lost GPU data fails too, unless --allow-lost-gpu-data."""
    from gpugap.baseline import load as load_baseline
    from gpugap.gates import Check, evaluate, parse_gate
    from gpugap.render.github import check_annotations, in_github_actions
    from gpugap.render.jsonout import dumps
    from gpugap.render.junit import check_junit
    from gpugap.render.markdown import check_markdown

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
    from gpugap.job import expand_reports

    reports = expand_reports(reports)
    inputs = [*reports, cfg.path, baseline_file]
    check_outputs([("--junit", junit), ("--markdown", markdown)], inputs, force)
    known = load_baseline(baseline_file) if baseline_file is not None else None
    policy = cfg.policy()
    job_gates = [g for g in gates if g.metric.startswith("job.")]
    report_gates = [g for g in gates if not g.metric.startswith("job.")]
    job_baseline = known is not None and known.of_job

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
        from gpugap.gates import job_measurements
        from gpugap.job import analyze_job

        if cfg.range is not None or any(g.range for g in job_gates):
            raise UsageError("job.* gates cover the whole job's steady state; they take "
                             "no --range")
        with job_progress(len(reports)) as progress:
            job = analyze_job(reports, workers=workers, scheduler=scheduler,
                              progress=progress, nsys=nsys, thresholds=cfg.thresholds)
        failed_reports = len(job.failed)
        checked.append(evaluate(
            job_measurements(job, thresholds=cfg.thresholds, min_severity=cfg.min_severity),
            job_gates, allow_missing=cfg.allow_missing,
            baseline=known if job_baseline else None, policy=policy))
    result = Check(checked, config=None if cfg.path is None else str(cfg.path),
                   baseline=None if baseline_file is None else str(baseline_file))

    if junit is not None:
        write_output(junit, check_junit(result), force=force)
    markdown_out(markdown, check_markdown(result), force=force, inputs=inputs)
    if json_:
        stdout.out(dumps(result.to_dict()), highlight=False)
    else:
        render_check(result)
    if in_github_actions():
        # Workflow commands work on either stream; keep a --json stdout parseable.
        for line in check_annotations(result):
            (stderr if json_ else stdout).out(line, highlight=False)
    if not result.passed:
        return 1
    from gpugap.errors import EXIT_PARTIAL

    return EXIT_PARTIAL if failed_reports else 0


def render_check(result) -> None:
    from rich.table import Table

    from gpugap.gates import FAIL, fmt_value
    from gpugap.render.markdown import limit_text

    style = {"pass": "green", "fail": "bold red", "skip": "yellow"}
    for report in result.reports:
        where = "whole report" if report.scope is None else \
            f"range '{safe_text(report.scope)}'"
        table = Table(title=Text(f"{safe_text(report.report)} ({where})"),
                      title_justify="left")
        table.add_column("result")
        table.add_column("range")
        table.add_column("gate", overflow="fold")
        table.add_column("value", justify="right")
        table.add_column("limit", justify="right")
        for r in report.results:
            table.add_row(Text(r.status.upper(), style[r.status]),
                          Text("whole") if r.scope is None else safe_rich(r.scope),
                          safe_rich(r.label), Text(fmt_value(r.metric, r.value)),
                          Text(limit_text(r)))
        stdout.print(table)
        for r in report.results:
            if r.status == FAIL:
                stdout.print(Text.assemble(("FAIL ", "bold red"),
                                           safe_text(r.message, MESSAGE_LIMIT)),
                             soft_wrap=True)
        for w in report.warnings:
            stdout.print(Text.assemble(("warning: ", "yellow"), safe_text(w, MESSAGE_LIMIT)),
                         soft_wrap=True)
    counts = result.counts()
    if result.passed:
        stdout.print(f"[green]gpugap check passed[/]: {counts['passed']} of {counts['gates']} "
                     f"gates held in {len(result.reports)} report(s)"
                     + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))
    else:
        stdout.print(f"[bold red]gpugap check failed[/]: {counts['failed']} of "
                     f"{counts['gates']} gates failed in {len(result.reports)} report(s)")


@baseline_app.command("save")
def baseline_save(
    reports: Annotated[list[Path], typer.Argument(
        help="known-good reports; several runs of one program give median and spread")],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="baseline file to write (default: the file of the "
                               "tool.gpugap.baseline table)")] = None,
    range_: Annotated[list[str] | None, typer.Option(
        "--range", help="also store this NVTX range (repeatable); the ranges analyze "
                        "lists and those the config gates are always stored")] = None,
    min_severity: SeverityOpt = None,
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
) -> int:
    """Store the metrics of REPORTs (whole report and per NVTX range) as a baseline; with
    --job, the job.* metrics of the REPORTs taken together as the ranks of one job."""
    from gpugap import baseline as baselines
    from gpugap.gates import job_measurements, measure, reported_range_names
    from gpugap.job import analyze_job, expand_reports

    cfg = project_config(config, no_config, set_=set_, min_severity=min_severity)
    output = output or cfg.baseline_file
    if output is None:
        raise UsageError("where should the baseline go? give -o FILE "
                         "(or file in [tool.gpugap.baseline])")
    reports = expand_reports(reports)
    check_outputs([("-o", output)], [*reports, cfg.path], force)
    wanted = [*filter(None, [cfg.range]), *cfg.gated_ranges, *(range_ or [])]
    runs = []
    if job:
        if wanted:
            raise UsageError("a job baseline covers the whole job's steady state; "
                             "--range does not apply")
        with job_progress(len(reports)) as progress:
            combined = analyze_job(reports, workers=workers, scheduler=scheduler,
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
    stdout.print(safe_text(f"saved baseline {output} from {len(runs)} run(s): whole "
                           f"report and {len(ranges)} range(s) "
                           f"({', '.join(ranges) or 'none'})", None),
                 soft_wrap=True, highlight=False, markup=False)
    return 0


@app.command("diff")
def diff_command(
    before: Annotated[Path, typer.Argument(help="the report before the change")],
    after: Annotated[Path, typer.Argument(help="the report after the change")],
    json_: JsonOpt = False,
    markdown: MarkdownOpt = None,
    range_: RangeOpt = None,
    min_severity: SeverityOpt = None,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    force: ForceOpt = False,
) -> int:
    """Compare two reports: metric deltas per NVTX range, findings new, fixed, changed."""
    from gpugap.diff import diff
    from gpugap.render.jsonout import dumps
    from gpugap.render.markdown import diff_markdown

    cfg = project_config(config, no_config, set_=set_, min_severity=min_severity)
    inputs = [before, after, cfg.path]
    check_outputs([("--markdown", markdown)], inputs, force)
    traces = [load_trace(before, nsys), load_trace(after, nsys)]
    with status("Comparing"):
        result = diff(*traces, range_name=range_, thresholds=cfg.thresholds,
                      min_severity=cfg.min_severity, directions=cfg.directions)
    markdown_out(markdown, diff_markdown(result), force=force, inputs=inputs)
    if json_:
        stdout.out(dumps(result.to_dict()), highlight=False)
    else:
        render_diff(result)
    return 0


def render_diff(result) -> None:
    from rich.table import Table

    from gpugap.gates import fmt_value
    from gpugap.render.markdown import RANGE_COLUMNS, STATUS_ICON, arrow, fmt_delta
    from gpugap.rules.base import fmt_ns

    colour = {"better": "green", "worse": "bold red"}

    # Nanosecond counts read better as times on a terminal (JSON keeps them exact).
    def shown(metric: str, value) -> str:
        if metric.endswith("_ns") and value is not None:
            return fmt_ns(value)
        return fmt_value(metric, value)

    def shown_delta(metric: str, delta) -> str:
        if metric.endswith("_ns") and delta is not None:
            return ("+" if delta >= 0 else "-") + fmt_ns(abs(delta))
        return fmt_delta(metric, delta)

    main = result.scope(result.range)
    where = "whole report" if main.scope is None else f"range '{safe_text(main.scope)}'"
    table = Table(title=Text(f"{safe_text(result.before)} -> {safe_text(result.after)} "
                             f"({where})"), title_justify="left")
    table.add_column("metric", no_wrap=True)        # names are what readers grep for
    for col in ("before", "after", "delta", "change"):
        table.add_column(col, justify="left" if col == "change" else "right")
    for m in main.metrics:
        if m.metric.count(".") == 2 and not m.before and not m.after:
            continue
        table.add_row(safe_rich(m.metric), Text(shown(m.metric, m.before)),
                      Text(shown(m.metric, m.after)), Text(shown_delta(m.metric, m.delta)),
                      Text(m.change, colour.get(m.change, "")))
    stdout.print(table)
    ranges = [s for s in result.scopes if s.scope is not None and s is not main]
    if ranges:
        table = Table(title="NVTX ranges (before -> after)", title_justify="left")
        table.add_column("range")
        for name, _ in RANGE_COLUMNS:
            table.add_column(name, justify="right")
        for s in ranges:
            table.add_row(safe_rich(s.scope), *(Text(arrow(m, s.get(m).before,
                                                           s.get(m).after).replace("→", "->"))
                                                for _, m in RANGE_COLUMNS))
        stdout.print(table)
    if result.findings:
        table = Table(title="Findings", title_justify="left")
        for col in ("status", "rule [cause]", "where", "count", "cost ms"):
            table.add_column(col, justify="right" if col in ("count", "cost ms") else "left",
                             overflow="fold")
        for f in result.findings:
            table.add_row(STATUS_ICON[f.status].split(" ")[-1],
                          safe_rich(f"{f.rule} [{f.cause}]"),
                          safe_rich(" > ".join(f.where) or "outside NVTX ranges",
                                    limit=MESSAGE_LIMIT),
                          f"{f.count_before} -> {f.count_after}",
                          f"{f.cost_ms_before:g} -> {f.cost_ms_after:g} "
                          f"({f.cost_ms_delta:+.3f})")
        stdout.print(table)
    summary = result.summary()
    stdout.print(f"findings: {summary['fixed']} fixed, {summary['new']} new, "
                 f"{summary['changed']} changed, {summary['unchanged']} unchanged")
    for w in result.warnings:
        stdout.print(Text.assemble(("warning: ", "yellow"), safe_text(w, MESSAGE_LIMIT)),
                     soft_wrap=True)
