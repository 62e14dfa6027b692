"""The gpugap command line. Thin: parse, call the library, render, map errors to exit codes.

Exit codes: 0 done, 1 a gate/expectation failed, 2 bad usage or unreadable input,
3 nsys missing/failing, 4 no CUDA activity in the report, 5 the profiled program failed,
6 no GPU where one is needed, 7 some reports of a job could not be analyzed (the others
were), 141 the reader of stdout closed it early (`gpugap analyze R | head -1`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from gpugap.cli.coercion import defer_coercion
from gpugap.cli.collector import collect_from_here
from gpugap.cli.interrupt import Interrupted, interrupted_line, interruptible
from gpugap.cli.outputs import OUTPUT_OPTIONS, Outputs, output_options
from gpugap.errors import EXIT_MEMORY, EXIT_PIPE_CLOSED, EXIT_USAGE, GpugapError, UsageError
from gpugap.render.outputs import ANALYSIS, FORMATS, JOB, View

if TYPE_CHECKING:                   # the library is imported inside commands (start-up)
    from rich.console import Console

    from gpugap.analysis.job import Progress, RankSummary
    from gpugap.report.trace import Trace
    from gpugap.rules.model import Severity

# typer >= 0.16 (its own click) prints a Python type beside every parameter in its rich
# help ("--json <bool>", "--rule <list[str]>"), not in its plain help; older typer's rich
# help shows the metavars (and its plain help escapes brackets: "\\[required]").
_PLAIN_HELP = hasattr(typer.core.TyperOption, "display_type_rich")

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None if _PLAIN_HELP else "rich",
                  help="Find the holes in a GPU timeline (Nsight Systems reports), say why "
                       "they are there and how to fix them.")


# Spaces (and tabs) at the end of a line, before any style codes that close it.
_TRAILING = re.compile(r"[ \t]+(?=(?:\x1b\[[0-9;]*m)*\n)")


def _trimmed_console(**options: Any) -> Console:
    """A rich Console whose lines end without spaces: rich pads a table's title, a grid's
    last column and a wrapped line's end to the width, which a CI log keeps (and a diff
    of two logs shows)."""
    from rich.console import Console

    class TrimmedConsole(Console):
        def _render_buffer(self, buffer: Any) -> str:
            return _TRAILING.sub("", super()._render_buffer(buffer))

    return TrimmedConsole(**options)


class _LazyConsole:
    """A rich Console made on first use, standing in for it. Most runs print nothing
    through rich (``analyze --json`` writes its document straight to standard output;
    the spinner shows on a terminal only), and importing rich.console is a tenth of
    a small report's start-up. Whether the stream is a terminal is answered without
    rich where rich's answer is certainly no."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def _made(self) -> Console:
        if self._console is None:
            self._console = _trimmed_console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    def __enter__(self) -> Console:        # rich's Live and FileProxy take it as one
        return self._made().__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        self._made().__exit__(*exc_info)

    @property
    def is_terminal(self) -> bool:
        # Console.is_terminal says yes only for TTY_COMPATIBLE=1, FORCE_COLOR set or a
        # stream whose isatty() does.
        if self._console is None and os.environ.get("TTY_COMPATIBLE") != "1" \
                and os.environ.get("FORCE_COLOR") is None:
            stream = sys.stderr if self._options.get("stderr") else sys.stdout
            stream = getattr(stream, "rich_proxied_file", stream)     # as Console.file
            isatty = getattr(stream, "isatty", None)
            try:
                if isatty is None or not isatty():
                    return False
            except ValueError:             # closed: rich says no too
                return False
        return self._made().is_terminal


# Typed as the Console each stands for, whose every attribute it gives.
stdout = cast("Console", _LazyConsole(highlight=False))
stderr = cast("Console", _LazyConsole(stderr=True, highlight=False))

# Options shared by several commands.
NsysOpt = Annotated[str | None, typer.Option("--nsys", help="nsys executable to use "
                                             "(default: $GPUGAP_NSYS, PATH, install dirs)",
                                             metavar="PATH")]
JsonOpt = Annotated[bool, typer.Option("--json", help=FORMATS["json"].help)]
RuleOpt = Annotated[list[str] | None, typer.Option("--rule", help="run only this rule "
                                                   "(repeatable); see gpugap rules",
                                                   metavar="RULE")]
RangeOpt = Annotated[str | None, typer.Option("--range", help="restrict to this NVTX range "
                                              "(name or domain:name)", metavar="NAME")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="override a rule threshold (repeatable)", metavar="RULE.NAME=VALUE")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="read gates and thresholds from this gpugap.toml / pyproject.toml "
                     "(default: gpugap.toml here, else the nearest pyproject.toml with "
                     "a tool.gpugap table)", metavar="FILE")]
NoConfigOpt = Annotated[bool, typer.Option("--no-config", help="ignore configuration files")]
IterationOpt = Annotated[str | None, typer.Option(
    "--iteration", help="the NVTX range that marks one iteration (numbers at the end of "
                        "its instances' names ignored: 'step' matches 'step 12'); 'none': "
                        "no iterations. Default: found from the ranges or the repeating "
                        "kernel sequence", metavar="NAME")]
MinSeverityOpt = Annotated[str | None, typer.Option(
    "--min-severity", help="show findings of this severity and up: info (default), "
                           "warning, error", metavar="SEVERITY")]


def _print_version(wanted: bool) -> None:
    if wanted:
        from gpugap import __version__

        sys.stdout.write(f"gpugap {__version__}\n")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="print gpugap's version and exit")] = False) -> None:
    # No docstring: the app's help stays the one given to typer.Typer above.
    pass


# The innermost stage (status's message) an error left: running out of memory, which
# has no better words, names the stage it struck.
_STRUCK: list[str] = []


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner on stderr for long work, only for humans on a terminal."""
    try:
        if stderr.is_terminal:
            with stderr.status(message):
                yield
        else:
            yield
    except MemoryError:
        if not _STRUCK:
            _STRUCK.append(message)
        raise


def parse_thresholds(items: list[str] | None, min_gap_us: float | None = None
                     ) -> dict[str, dict[str, float]]:
    """--set RULE.NAME=VALUE (and --min-gap-us), each checked up front: a known rule
    and threshold, a finite number in its range (gpugap.rules.thresholds.check)."""
    if not items and min_gap_us is None:
        return {}
    from gpugap.rules.thresholds import from_assignments

    out = from_assignments(items or [])
    if min_gap_us is not None:
        if not min_gap_us > 0 or min_gap_us == float("inf"):
            raise UsageError(f"--min-gap-us must be a positive number, not {min_gap_us:g}")
        out.setdefault("launch-gap", {})["min_gap_us"] = float(min_gap_us)
    return out


def checked_severity(given: str | None, configured: str) -> Severity:
    """--min-severity (else the configuration's) as a Severity; UsageError naming the
    choices when it is none."""
    from gpugap.rules.model import Severity

    severity = given or configured
    if severity not in Severity.names():
        raise UsageError(f"bad --min-severity '{given}'; use one of "
                         f"{', '.join(Severity.names())}")
    return Severity(severity)


def load_trace(report: Path, nsys: str | None) -> Trace:
    from gpugap.report import load

    with status(f"Loading {report.name}"):
        return load(report, nsys=nsys, status=status)


WorkersOpt = Annotated[int | None, typer.Option(
    "--workers", min=1, help="several reports: analyze them in this many worker processes "
                             "(default: one per CPU)", metavar="N")]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", help="several reports: analyze them on this Dask cluster "
                        "(tcp://HOST:8786; needs the dist extra of gpugap); each worker "
                        "reads its report", metavar="ADDRESS")]
SchedulerTimeoutOpt = Annotated[float, typer.Option(
    "--scheduler-timeout", min=0.1, help="seconds the Dask scheduler has to answer "
                                         "(connection and handshake)", metavar="SECONDS")]


@contextmanager
def job_progress(count: int) -> Iterator[Progress | None]:
    """A progress bar per report on stderr (humans on a terminal only): yields the
    callback gpugap.analysis.job calls as each report's summary arrives."""
    if not stderr.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=stderr, transient=True) as bar:
        task = bar.add_task("Analyzing reports", total=count)

        def arrived(summary: RankSummary) -> None:
            from gpugap.text import safe_text, shown_path

            what = "ok" if summary.ok else f"{summary.status}: {summary.error}"
            bar.console.print(safe_text(f"{shown_path(summary.report)}: {what}", 200),
                              markup=False,
                              highlight=False)
            bar.advance(task)

        yield arrived


def reports_named(items: list[Path]) -> list[Path]:
    """The reports *items* name (gpugap.files.expand_reports), and a note on stderr for
    each directory among them whose subfolders hold reports too: they are not read."""
    from gpugap.files import expand_reports, folder_names, folders_with_reports

    found = expand_reports(items)
    for item in items:
        if item.is_dir():
            inside = folders_with_reports(item)
            if inside:
                stderr.print(f"gpugap: note: {item}: its subfolders are not read "
                             f"({folder_names(inside)} hold reports); pass them too to "
                             "include them", markup=False, highlight=False, soft_wrap=True)
    return found


def analyze_job_reports(reports: list[Path], *, outputs: Outputs, rules: list[str] | None,
                        thresholds: dict[str, dict[str, float]], iteration: str | None,
                        nsys: str | None, workers: int | None, scheduler: str | None,
                        scheduler_timeout: float, severity: Severity) -> int:
    """`gpugap analyze R1 R2 ...`: each report analyzed, grouped into jobs by what it
    records, each job's phases settled across its reports and combined
    (gpugap.analysis.job.group_settled)."""
    from gpugap.analysis.job import group_settled, summarize_all
    from gpugap.errors import EXIT_PARTIAL, ReportError
    from gpugap.render.job import render_jobs

    options: dict[str, Any] = {"nsys": nsys, "rules": rules, "thresholds": thresholds,
                               "iteration": iteration,
                               "details": outputs.document(JOB) is not None}
    with job_progress(len(reports)) as progress:
        summaries = summarize_all(reports, workers=workers, scheduler=scheduler,
                                  scheduler_timeout=scheduler_timeout, progress=progress,
                                  **options)
    usage = [s.usage_error for s in summaries if s.usage_error is not None]
    if usage and not any(s.ok for s in summaries):
        # An option that names what no report has (--iteration): one line, as for one
        # report; the view of reports none of which could be analyzed says no more.
        others = len(summaries) - 1
        raise UsageError(usage[0] + (
            "" if len(usage) < len(summaries) or not others else
            "; the other report has none either" if others == 1 else
            f"; the other {others} reports have none either"))
    jobs = group_settled(summaries, workers=workers, scheduler=scheduler,
                         scheduler_timeout=scheduler_timeout, **options)
    outputs.write(JOB, jobs, View(min_severity=severity), inputs=reports,
                  terminal=lambda: render_jobs(jobs, stdout), console=stdout, errors=stderr)
    failed = jobs.failed
    if len(failed) == len(summaries):
        raise ReportError(f"none of the {len(reports)} reports could be analyzed: "
                          + "; ".join(f"{s.report}: {s.error}" for s in failed[:3]))
    return EXIT_PARTIAL if failed else 0


@app.command(short_help="Diagnose a report, or the ranks of one job.")
@output_options(ANALYSIS, JOB)
def analyze(
    reports: Annotated[list[Path], typer.Argument(
        help="a .nsys-rep or its .sqlite export; several (or a directory, or a glob): "
             "grouped into jobs by what each records", metavar="REPORT")],
    outputs: Outputs = OUTPUT_OPTIONS,
    rule: RuleOpt = None,
    range_: RangeOpt = None,
    min_gap_us: Annotated[float | None, typer.Option(
        "--min-gap-us", help="launch-gap threshold in microseconds (default 100)",
        metavar="N")] = None,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    max_findings: Annotated[int, typer.Option(
        min=0, help="findings shown in the terminal (0: only how many there are)",
        metavar="N")] = 20,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    iteration: IterationOpt = None,
    min_severity: MinSeverityOpt = None,
    all_domains: Annotated[bool, typer.Option(
        "--all-domains", help="list the NVTX ranges of libraries (CUB, NCCL, cuBLAS...) "
                              "beside the program's")] = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
    scheduler_timeout: SchedulerTimeoutOpt = 10.0,
    max_events: Annotated[int | None, typer.Option(
        "--max-events", min=1, help="the timeline (--html/--svg/--png) holds at most N "
                                    "events: past it, short ones merge into spans "
                                    "(default 250000)", metavar="N")] = None,
) -> int:
    """Diagnose a report: the verdict on its steady state (or --range), where the GPU's
    time goes, and every finding with its cause, cost and fix. Several reports: each
    analyzed, one line each, grouped into jobs by what each records (rank, world size,
    launch id, program, session times); for each job its verdict (the straggler and
    what waiting for it costs the others), then one row per rank."""
    if scheduler is not None:
        from gpugap.analysis.scheduler import check_address

        check_address(scheduler)         # before any report is read
    from gpugap.text import name_paths

    found = reports_named(reports)
    name_paths(found)
    if max_events is not None and not any(f.timeline for f in outputs.asked(ANALYSIS)):
        raise UsageError("--max-events is the timeline's budget: give it with --html, "
                         "--svg or --png")
    from gpugap.rules import select

    select(rule)            # an unknown rule named before any report is read
    if len(found) > 1:
        outputs.refuse(JOB, f"takes one report, not the {len(found)} of a job")
        if range_:
            raise UsageError(f"--range takes one report, not the {len(found)} of a job")
        from gpugap.ci.config import load_config

        if config is not None and no_config:
            raise UsageError("--config and --no-config contradict each other; give one")
        cfg = load_config(config, discover=not no_config)
        severity = checked_severity(min_severity, cfg.min_severity)
        return analyze_job_reports(
            found, outputs=outputs, rules=rule, iteration=iteration, nsys=nsys, workers=workers,
            thresholds=cfg.merged_thresholds(parse_thresholds(set_, min_gap_us)),
            scheduler=scheduler, scheduler_timeout=scheduler_timeout, severity=severity)
    report = found[0]
    from gpugap.report.prefetch import start as prefetch

    prefetch(report)   # read the big tables in the background while the imports below run
    from gpugap.analysis import analyze as run_analysis
    from gpugap.ci.config import load_config
    from gpugap.errors import NoCudaActivity

    if config is not None and no_config:
        raise UsageError("--config and --no-config contradict each other; give one")
    # Rule thresholds: the project's configuration, then the command line on top.
    cfg = load_config(config, discover=not no_config)
    severity = checked_severity(min_severity, cfg.min_severity)
    thresholds = cfg.merged_thresholds(parse_thresholds(set_, min_gap_us))
    outputs.check(ANALYSIS, [report, cfg.path])
    collect_from_here()     # the analysis's imports frozen
    trace = load_trace(report, nsys)
    with status("Analyzing"):
        result = run_analysis(trace, rules=rule, thresholds=thresholds, range_name=range_,
                              require_gpu=False, iteration=iteration,
                              all_domains=all_domains)

    def terminal() -> None:
        # Imported here: a document (--json) in its place needs no rich tables.
        from gpugap.render.terminal import render

        render(result, stdout, max_findings=max_findings, min_severity=severity)

    outputs.write(ANALYSIS, result, View(trace=trace, range_name=range_,
                                         min_severity=severity, max_events=max_events),
                  inputs=[report, cfg.path], console=stdout, errors=stderr,
                  terminal=terminal,
                  files_last=True, drawing=status("Drawing the timeline"))
    if result.status == "no-cuda-activity":
        raise NoCudaActivity(result.error or "no CUDA activity")
    return 0


@app.command("rules", short_help="List the rules, their causes, thresholds and fixes.")
def list_rules(json_: JsonOpt = False,
               markdown: Annotated[bool, typer.Option(
                   "--markdown", help="print docs/rules.md")] = False,
               causes: Annotated[bool, typer.Option(
                   "--causes", help="print the catalogue of causes the findings are "
                   "named from (docs/causes.md)")] = False) -> int:
    """List the rules with their causes, thresholds (defaults) and fixes."""
    from gpugap.rules import registry

    if causes:
        from gpugap.render.rules_doc import causes_markdown

        stdout.out(causes_markdown(), highlight=False)
        return 0
    if markdown:
        from gpugap.render.rules_doc import rules_markdown

        stdout.out(rules_markdown(), highlight=False)
        return 0
    reg = registry()
    if json_:
        from gpugap.jsonout import dumps
        from gpugap.render.documents import rules_document

        stdout.out(dumps(rules_document(reg.values())))
        return 0
    from gpugap.render.rules_doc import render_rules

    render_rules(stdout)
    return 0


_ARGV: list[str] = []


def current_argv() -> list[str]:
    """The arguments main() was called with (commands that must see a literal --)."""
    return _ARGV


def _name_arguments_only(command: Any) -> None:
    """typer >= 0.16 writes a Python type beside each argument in --help (`REPORT
    <list[Path]>`) whatever its metavar: the metavar alone says what it takes, as every
    option's does (RULE, FILE, N). Duck-typed: older typer (click's parameters) has no
    display_type_rich and shows the metavar only."""
    for param in command.params:
        if param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
            param.display_type_rich = lambda ctx: None
    for sub in (getattr(command, "commands", None) or {}).values():
        _name_arguments_only(sub)


def usage_error_line(exc: Any, command: Any, argv: list[str]) -> str:
    """An option parser's usage error (click's, or typer's own) as gpugap's one line:
    `gpugap: error: no such option: --foo; see gpugap analyze --help`."""
    from gpugap.text import MESSAGE_LIMIT, safe_text

    lines = [" ".join(line.split()) for line in str(exc.format_message()).splitlines()]
    message = "; ".join(line.rstrip(".") for line in lines if line)
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        where = ctx.command_path
    else:                  # some errors come without their context: the command named
        where = "gpugap"
        for arg in argv:
            command = (getattr(command, "commands", None) or {}).get(arg)
            if command is None:
                break
            where += f" {arg}"
    return f"gpugap: error: {safe_text(message, MESSAGE_LIMIT)}; see {where} --help"


def _pipe_closed() -> int:
    """`gpugap analyze R | head -1`: the reader has what it wanted. Exit as a process that
    SIGPIPE killed would, with stdout on /dev/null so that Python's flush at exit finds
    nothing to complain about."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_PIPE_CLOSED


@contextmanager
def _checked_stdout() -> Iterator[None]:
    """Standard output through a buffered writer while gpugap runs. Unbuffered
    (PYTHONUNBUFFERED, python -u), Python's text stdout writes straight to the file and
    drops what a short write left (a full disk kept 16 KB of a JSON document, exit 0);
    a buffered writer writes the rest or raises ENOSPC, which main turns into one line."""
    import io

    original = sys.stdout
    if not isinstance(getattr(original, "buffer", None), io.FileIO):
        yield                           # buffered already, or not a file (tests' capture)
        return
    fd = original.fileno()
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
                                  encoding=original.encoding, errors=original.errors,
                                  line_buffering=bool(original.line_buffering))
    try:
        yield
        sys.stdout.flush()              # the end that did not fit shows here
    finally:
        replaced, sys.stdout = sys.stdout, original
        try:
            replaced.flush()
        except OSError:
            # What could not be written goes to /dev/null, so no later flush (this one,
            # the interpreter's at exit) fails again; main says what happened.
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            replaced.flush()
        replaced.detach()


def _stdout_failed(exc: OSError) -> int:
    """A write to standard output the system failed (disk full, I/O error): one line,
    exit 9, and stdout pointed at /dev/null so that no later flush fails again."""
    from gpugap.errors import EXIT_WRITE

    stderr.print(f"gpugap: error: cannot write the output ({exc.strerror}); what was "
                 "written is incomplete: free space where standard output goes (or write "
                 "elsewhere) and run again", soft_wrap=True, markup=False, highlight=False)
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass                            # not a file descriptor (a capture): nothing to flush
    return EXIT_WRITE


def main(argv: list[str] | None = None) -> int:
    from gpugap.errors import WRITE_FAILED_ERRNOS
    from gpugap.files import pending_outputs

    pending_outputs(forget=True)
    _STRUCK.clear()
    with interruptible():
        try:
            with _checked_stdout():
                return _main(argv)
        except OSError as exc:
            if exc.errno not in WRITE_FAILED_ERRNOS:
                raise
            return _stdout_failed(exc)


def _main(argv: list[str] | None) -> int:
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    command = typer.main.get_command(app)
    _name_arguments_only(command)
    defer_coercion(command)
    collect_from_here()
    try:
        rv = command.main(args=argv, standalone_mode=False, prog_name="gpugap")
        sys.stdout.flush()               # a closed pipe shows here, not at interpreter exit
        return rv if isinstance(rv, int) else 0
    except BrokenPipeError:
        return _pipe_closed()
    except SystemExit as exc:
        # rich and click meet a closed stdout with exit(1), the code of a failed gate.
        if isinstance(exc.__context__, BrokenPipeError):
            return _pipe_closed()
        raise
    except GpugapError as exc:
        from gpugap.text import MESSAGE_LIMIT, safe_text

        # One line whatever the message quotes (file names, report text): see gpugap.text.
        stderr.print(f"gpugap: error: {safe_text(exc.cli_message(), MESSAGE_LIMIT)}",
                     soft_wrap=True, markup=False, highlight=False)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except MemoryError:
        stage = _STRUCK.pop().lower() if _STRUCK else "working"
        stderr.print(f"gpugap: error: out of memory while {stage}; analyze a part of the "
                     "report (--range NAME, --iteration NAME), ask for fewer outputs (the "
                     "timeline's --html/--svg/--png need the most), or run where there is "
                     "more memory", soft_wrap=True, markup=False, highlight=False)
        return EXIT_MEMORY
    except Interrupted as exc:
        stderr.print(interrupted_line(exc.signum), soft_wrap=True, markup=False,
                     highlight=False)
        return 128 + exc.signum
    except (typer.Abort, KeyboardInterrupt):
        stderr.print("gpugap: aborted")
        return 130
    except Exception as exc:
        # Usage errors of the option parser (click's, or the one vendored by newer typer):
        # duck-typed so gpugap works with either.
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        if type(exc).__name__ == "NoArgsIsHelpError" and hasattr(exc, "show"):
            exc.show(file=sys.stderr)        # `gpugap` or `gpugap baseline` alone: the help
        else:
            stderr.print(usage_error_line(exc, command, _ARGV), soft_wrap=True,
                         markup=False, highlight=False)
        return EXIT_USAGE
