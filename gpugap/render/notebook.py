"""An Analysis as a Jupyter notebook shows it (``Analysis._repr_html_``): what the
terminal says first (the program, the verdict and its fix), the steady state's
breakdown, the findings as a table, then the timeline: the page of
:mod:`gpugap.render.html`, embedded whole in an iframe so that its script and style
stay its own and the notebook's stay untouched.

A job's ranks (``Job._repr_html_``) and several reports grouped into jobs
(``Jobs._repr_html_``) as the terminal shows them (gpugap.render.job): the job's
verdict first, how it was formed, one row per rank, each rank's own verdict.
"""

from __future__ import annotations

import html

from gpugap.analysis import Analysis
from gpugap.analysis.grouping import JobGroup
from gpugap.analysis.job import Job, Jobs
from gpugap.render.html import render_html
from gpugap.render.timeline import build_panels
from gpugap.report.trace import Trace
from gpugap.text import shown_path
from gpugap.units import fmt_ns

# Rows of the findings table (the rest are counted below it) and of the breakdown.
MAX_FINDINGS = 20
MAX_BUCKETS = 8
# Ranks in a job's table (the rest are counted below it: Job.frame() has them all).
MAX_RANKS = 64
TIMELINE_HEIGHT_PX = 760

_STYLE = ("<style>.gpugap-nb table{border-collapse:collapse;margin:4px 0 10px}"
          ".gpugap-nb td,.gpugap-nb th{padding:2px 8px;text-align:left;"
          "border-bottom:1px solid #ddd;vertical-align:top}"
          ".gpugap-nb .nw{white-space:nowrap}"
          ".gpugap-nb .num{text-align:right}.gpugap-nb .sev-error{color:#c0392b}"
          ".gpugap-nb .sev-warning{color:#b9770e}.gpugap-nb .verdict{font-size:1.1em;"
          "font-weight:600}</style>")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _verdict(analysis: Analysis) -> str:
    parts = [f"<h3>gpugap: {_e(shown_path(analysis.report))}"
             + (f" (range {_e(analysis.scope.range_name)})" if analysis.scope.is_range
                else "") + "</h3>"]
    if analysis.program is not None:
        parts.append(f"<p><b>Program:</b> {_e(analysis.program.line())}</p>")
    v = analysis.verdict
    if analysis.status != "ok":
        parts.append(f'<p class="verdict">{_e(analysis.status)}: {_e(analysis.error)}'
                     "</p>")
    elif v is not None:
        parts.append(f'<p class="verdict sev-{_e(v.severity)}">Verdict: {_e(v.headline)}'
                     "</p>")
        if v.fix:
            parts.append(f"<p><b>Fix:</b> {_e(v.fix)}</p>")
    return "".join(parts)


def _breakdown(analysis: Analysis) -> str:
    v = analysis.verdict
    if v is None or not v.breakdown:
        return ""
    rows = sorted(v.breakdown.items(), key=lambda kv: -kv[1])[:MAX_BUCKETS]
    body = "".join(f'<tr><td>{_e(bucket)}</td><td class="num">{pct:.1f}%</td></tr>'
                   for bucket, pct in rows)
    return (f"<h4>Where the time goes: {_e(v.scope)}"
            + (f" of GPU {v.device}" if v.device is not None else "") + "</h4>"
            f"<table><tr><th>bucket</th><th>share</th></tr>{body}</table>")


def _findings(analysis: Analysis) -> str:
    findings = analysis.findings
    if not findings:
        return "<h4>Findings</h4><p>none</p>"
    head = ("<tr><th>#</th><th>severity</th><th>rule [cause]</th><th>phase</th>"
            "<th>cost</th><th>share</th><th>what</th></tr>")
    body = "".join(
        f'<tr><td>{i}</td><td class="sev-{_e(f.severity)}">{_e(f.severity)}</td>'
        f'<td class="nw">{_e(f.rule)} [{_e(f.cause)}]</td>'
        f'<td class="nw">{_e(f.phase or "")}</td>'
        f'<td class="num nw">{_e(fmt_ns(f.cost_ns))}</td>'
        f'<td class="num">{"" if f.share_pct is None else f"{f.share_pct:.1f}%"}</td>'
        f"<td>{_e(f.message)}</td></tr>"
        for i, f in enumerate(findings[:MAX_FINDINGS], start=1))
    more = len(findings) - MAX_FINDINGS
    rest = (f"<p>... and {more} more: <code>analysis.frames()['findings']</code></p>"
            if more > 0 else "")
    return f"<h4>Findings ({len(findings)})</h4><table>{head}{body}</table>{rest}"


def _timeline(analysis: Analysis, trace: Trace) -> str:
    if analysis.status != "ok":
        return ""
    panels = build_panels(analysis, trace, range_name=analysis.scope.range_name)
    page = render_html(panels, title=f"gpugap: {shown_path(analysis.report)}")
    return (f'<iframe class="gpugap-timeline" srcdoc="{_e(page)}" '
            f'style="width:100%;height:{TIMELINE_HEIGHT_PX}px;border:1px solid #ddd" '
            'title="gpugap timeline"></iframe>')


def analysis_html(analysis: Analysis, trace: Trace, *, timeline: bool = True) -> str:
    """The notebook view of *analysis* (of *trace*): verdict, breakdown, findings and,
    with *timeline*, the interactive timeline."""
    return (f'<div class="gpugap-nb">{_STYLE}{_verdict(analysis)}{_breakdown(analysis)}'
            f"{_findings(analysis)}"
            f"{_timeline(analysis, trace) if timeline else ''}</div>")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def job_html(job: Job, group: JobGroup | None = None) -> str:
    """The notebook view of one job (of *group*, when several reports were grouped):
    its verdict, how it was formed, one row per rank (the straggler marked), the
    reports that could not be analyzed."""
    return f'<div class="gpugap-nb">{_STYLE}{_job(job, group)}</div>'


def _job(job: Job, group: JobGroup | None) -> str:
    name = f"Job {_e(group.name)}: " if group is not None else "Job: "
    parts = [f"<h3>{name}{len(job.ranks)} ranks, {_e(job.kind)}</h3>",
             f'<p class="verdict">{_e(job.headline)}</p>']
    if group is not None:
        parts.append(f"<p><b>Formed:</b> {_e(group.how)}</p>")
    head = ("<tr><th>rank</th><th>report</th><th>iteration (ms)</th><th>p90 (ms)</th>"
            "<th>busy</th><th>comm (ms)</th><th>exposed (ms)</th><th>overlap</th>"
            "<th>waits (ms)</th><th>its own verdict</th></tr>")
    rows = job.table()
    body = "".join(
        f'<tr><td class="nw">{row["rank"]}{" *" if row["rank"] == job.straggler else ""}'
        f'</td><td class="nw">{_e(shown_path(row["report"]))}</td>'
        f'<td class="num">{_ms(row["iteration_median_ms"])}</td>'
        f'<td class="num">{_ms(row["iteration_p90_ms"])}</td>'
        f'<td class="num">{_pct(row["gpu_busy_pct"])}</td>'
        f'<td class="num">{_ms(row["comm_ms_per_iteration"])}</td>'
        f'<td class="num">{_ms(row["exposed_comm_ms_per_iteration"])}</td>'
        f'<td class="num">{_pct(row["comm_compute_overlap_pct"])}</td>'
        f'<td class="num">{_ms(row["wait_ms_per_iteration"])}</td>'
        f'<td>{_e((row["top_cause"] or {}).get("headline") or "no verdict")}</td></tr>'
        for row in rows[:MAX_RANKS])
    parts.append("<h4>Ranks (medians per steady iteration)</h4>"
                 f"<table>{head}{body}</table>")
    if len(rows) > MAX_RANKS:
        parts.append(f"<p>... and {len(rows) - MAX_RANKS} more ranks: "
                     "<code>job.frame()</code></p>")
    notes = [f"ranks from {_e(job.rank_source)}; clock: {_e(job.clock)}; "
             f"{job.collectives_matched} collectives matched over "
             f"{job.iterations_matched} iterations"]
    if job.straggler is not None:
        notes.append("* the straggler; waits: time inside collectives before the last "
                     "rank started them")
    parts += [f"<p>{note}</p>" for note in notes]
    parts += [f'<p class="sev-error">not analyzed: {_e(shown_path(s.report))}: {_e(s.error)}</p>'
              for s in job.failed]
    return "".join(parts)


def jobs_html(jobs: Jobs) -> str:
    """The notebook view of several reports grouped into jobs: one row per report (its
    job, rank and own verdict), then each job's view."""
    head = "<tr><th>report</th><th>job</th><th>rank</th><th>verdict</th></tr>"
    body = "".join(
        f'<tr><td class="nw">{_e(shown_path(row["report"]))}</td>'
        f'<td>{_e(row["job"] or "-")}</td>'
        f'<td>{"-" if row["rank"] is None else row["rank"]}</td>'
        f'<td class="{"sev-error" if row["status"] == "error" else ""}">'
        f'{_e(row["headline"])}</td></tr>'
        for row in jobs.verdicts())
    names = ", ".join(group.name for group, _ in jobs.jobs)
    title = (f"{len(jobs.summaries)} reports: {len(jobs.jobs)} "
             f"job{'s' if len(jobs.jobs) != 1 else ''}" + (f" ({_e(names)})" if names else "")
             + (f", {len(jobs.grouping.alone)} of no job" if jobs.grouping.alone else ""))
    sections = "".join(_job(job, group) for group, job in jobs.jobs)
    return (f'<div class="gpugap-nb">{_STYLE}<h3>{title}</h3><table>{head}{body}</table>'
            f"{sections}</div>")
