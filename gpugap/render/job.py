"""The terminal view of several reports (gpugap.analysis.job.Jobs): one line per report
(its job and its own verdict), then one section per job, the result first (the late
rank and why), then one row per rank. Everything fits 80 columns: long verdicts are cut
in the table (their whole text is in each job's section and in --json) and wrap
elsewhere.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpugap.analysis.grouping import JobGroup
from gpugap.analysis.job import Job, Jobs, RankSummary
from gpugap.errors import UsageError
from gpugap.render.fit import wrap_name
from gpugap.text import MESSAGE_LIMIT, safe_rich, safe_text, shown_path, shown_paths

REPORT_WIDTH = 34        # a report's name in the table of verdicts folds past this
RANKS_SHOWN = 8          # ranks whose own verdict a job's section spells out
JOB_STYLE = {"straggler": "bold red", "balanced": "bold green"}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _names(reports: list[str]) -> dict[str, str]:
    """Each report as the job view names it: as every view does (gpugap.text.shown_path),
    or, where one of those is too wide for the table's column, each by the end of its
    path that tells it from the others."""
    names = [shown_path(r) for r in reports]
    if max(map(len, names), default=0) > REPORT_WIDTH:
        names = shown_paths(reports, relative=False)
    return {r: safe_text(n, 80) for r, n in zip(reports, names, strict=True)}


def _failure(s: RankSummary, names: dict[str, str]) -> str:
    """'REPORT: why' for a report that could not be analyzed, its path named as the view
    names it (in the error too, which names it as it was given), options as the command
    line spells them."""
    report, error = s.report, s.error or s.status
    if s.usage_error is not None:
        error = UsageError(s.usage_error).cli_message()
    name = names.get(report) or shown_path(report)
    return error.replace(report, name) if report in error else f"{name}: {error}"


def verdicts_table(jobs: Jobs, width: int = 80) -> Table:
    """One line per report: the report, its job and rank, its own verdict's headline
    (cut to what is left of *width*)."""
    rows = jobs.verdicts()
    named = _names([row["report"] for row in rows])
    names = [named[row["report"]] for row in rows]
    where = ["dup" if row["duplicate_of"] is not None else "-" if row["job"] is None
             else f"{row['job']} r{row['rank']}" for row in rows]
    # The report and the job keep their width (a name folds past REPORT_WIDTH); the
    # verdict takes what is left (two spaces between columns), cut with an ellipsis.
    report_width = min(max(map(len, [*names, "report"])), REPORT_WIDTH)
    job_width = max(map(len, [*where, "job"]))
    verdict_width = max(width - report_width - job_width - 4, 12)
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("report", overflow="fold", width=report_width)
    table.add_column("job", no_wrap=True, width=job_width)
    table.add_column("verdict", no_wrap=True, width=verdict_width)
    for row, name, job in zip(rows, names, where, strict=True):
        style = "red" if row["status"] == "error" else ""
        headline = row["headline"]
        if row["status"] == "error":
            headline = headline.replace(row["report"], name)
        if row["duplicate_of"] is not None:
            headline = f"a duplicate of {named[row['duplicate_of']]} (the same capture)"
        table.add_row(safe_rich(wrap_name(name, report_width), limit=None), job,
                      safe_rich(headline, style, limit=verdict_width))
    return table


def render_job(job: Job, console: Console, group: JobGroup | None = None,
               names: dict[str, str] | None = None) -> None:
    """One job: its verdict (the straggler and why) first, how it was formed, one row
    per rank, each rank's own verdict, where the ranks and the clock come from. *names*:
    the reports as the view names them (default: the job's alone)."""
    if names is None:
        names = _names([s.report for s in [*job.ranks, *job.failed]])
    style = JOB_STYLE.get(job.kind, "bold")
    name = f"JOB {group.name}  " if group is not None else "JOB "
    console.print(Panel(safe_rich(job.headline, limit=MESSAGE_LIMIT),
                        title=Text(f"{name}{job.kind.upper()}  {len(job.ranks)} ranks",
                                   style=style), title_align="left"))
    if group is not None:
        console.print(Text.assemble(("formed: ", "bold"), safe_rich(group.how)))
    table = Table(title="Ranks (ms per steady iteration, medians)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("rank", "iter", "p90", "busy", "comm", "exposed", "overlap", "waits"):
        table.add_column(column, justify="right", no_wrap=True)
    rows = job.table()
    for row in rows:
        mark = "*" if row["rank"] == job.straggler else ""
        table.add_row(f"{row['rank']}{mark}", _ms(row["iteration_median_ms"]),
                      _ms(row["iteration_p90_ms"]), _pct(row["gpu_busy_pct"]),
                      _ms(row["comm_ms_per_iteration"]),
                      _ms(row["exposed_comm_ms_per_iteration"]),
                      _pct(row["comm_compute_overlap_pct"]),
                      _ms(row["wait_ms_per_iteration"]))
    console.print(table)
    if job.straggler is not None:
        console.print(Text("* the straggler; waits: time inside collectives before the "
                           "last rank started them", style="dim"))
    # Each rank's own verdict: the straggler's first, then the rest (a few).
    shown = sorted(rows, key=lambda r: (r["rank"] != job.straggler, r["rank"]))[:RANKS_SHOWN]
    for row in shown:
        cause = row["top_cause"] or {}
        console.print(Text.assemble((f"rank {row['rank']}", "bold"),
                                    f" ({names.get(row['report'], row['report'])}): ",
                                    safe_rich(cause.get("headline") or "no verdict",
                                              limit=MESSAGE_LIMIT)))
    if len(rows) > len(shown):
        console.print(f"... and {len(rows) - len(shown)} more ranks (--json lists all)")
    for rank, who in sorted(job.held.items()):
        console.print(safe_rich(f"start-up: rank {rank} waited for {who}'s start-up; its "
                                "steady state begins once that rank is warm (the wait "
                                "is a one-time cost, not the steady state's)", "dim",
                                limit=MESSAGE_LIMIT))
    m = job.metrics
    console.print(safe_rich(f"ranks from {job.rank_source}; clock: {job.clock}; "
                            f"{job.collectives_matched} collectives matched over "
                            f"{job.iterations_matched} iterations; skew "
                            f"{_pct(m['job.skew_pct'])} (of the slowest iteration)",
                            "dim", limit=MESSAGE_LIMIT))
    for s in job.failed:
        console.print(Text.assemble(("not analyzed: ", "bold red"),
                                    safe_rich(_failure(s, names), limit=MESSAGE_LIMIT)))


def render_jobs(jobs: Jobs, console: Console) -> None:
    """Several reports: the table of their verdicts, then each job's section."""
    count = len(jobs.summaries)
    names = ", ".join(group.name for group, _ in jobs.jobs)
    what = (f"{len(jobs.jobs)} job{'s' if len(jobs.jobs) != 1 else ''} ({names})"
            if jobs.jobs else "no job")
    alone = len(jobs.grouping.alone)
    copies = len(jobs.grouping.duplicates)
    head = f"{count} reports: {what}"
    if alone:
        head += f", {alone} on {'its' if alone == 1 else 'their'} own"
    if copies:
        head += f", {copies} duplicate{'s' if copies != 1 else ''}"
    console.print(Text(head, style="bold"))
    console.print(verdicts_table(jobs, console.width))
    names = _names([s.report for s in jobs.summaries])
    # The whole error of each report of no job that could not be analyzed (a job's own
    # are in its section).
    for i in jobs.grouping.alone:
        s = jobs.summaries[i]
        if not s.ok:
            console.print(Text.assemble(("not analyzed: ", "bold red"), safe_rich(
                _failure(s, names), limit=MESSAGE_LIMIT)))
    if copies:
        console.print(Text("Reports marked dup are the same capture as another (the same "
                           "host, program and session, to the nanosecond, or the same "
                           "bytes): one report given twice, counted once and never a "
                           "rank of a job.", style="dim"))
    if not jobs.jobs:
        console.print(Text("No two reports are ranks of one job (a job's reports record "
                           "one launch, run one program at the same time, each rank "
                           "once): each is judged on its own; gpugap analyze REPORT "
                           "shows its findings.", style="dim"))
    elif alone:
        console.print(Text("Reports marked - form no job with the others: gpugap analyze "
                           "REPORT shows one report's findings.", style="dim"))
    for group, job in jobs.jobs:
        console.print()
        render_job(job, console, group, names)
