"""The gpugap command line. Thin: parse, call the library, render, map errors to exit codes.

Exit codes: 0 done, 1 a gate/expectation failed, 2 bad usage or unreadable input,
3 nsys missing/failing, 4 no CUDA activity in the report, 5 the profiled program failed,
6 no GPU where one is needed, 7 some reports of a job could not be analyzed (the others
were).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpugap.errors import EXIT_USAGE, GpugapError, UsageError

SEVERITIES = ("info", "warning", "error")

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find the holes in a GPU timeline (Nsight Systems reports), say why "
                       "they are there and how to fix them.")

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)

# Options shared by several commands.
NsysOpt = Annotated[str | None, typer.Option("--nsys", help="nsys executable to use "
                                             "(default: $GPUGAP_NSYS, PATH, install dirs)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document to stdout")]
RuleOpt = Annotated[list[str] | None, typer.Option("--rule", help="run only this rule "
                                                   "(repeatable); see gpugap rules")]
RangeOpt = Annotated[str | None, typer.Option("--range", help="restrict to this NVTX range "
                                              "(name or domain:name)")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="override a rule threshold: RULE.NAME=VALUE (repeatable)")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="read gates and thresholds from this gpugap.toml / pyproject.toml "
                     "(default: gpugap.toml here, else the nearest pyproject.toml with "
                     "a tool.gpugap table)")]
NoConfigOpt = Annotated[bool, typer.Option("--no-config", help="ignore configuration files")]
IterationOpt = Annotated[str | None, typer.Option(
    "--iteration", help="the NVTX range that marks one iteration (numbers at the end of "
                        "its instances' names ignored: 'step' matches 'step 12'); 'none': "
                        "no iterations. Default: found from the ranges or the repeating "
                        "kernel sequence", metavar="NAME")]
MinSeverityOpt = Annotated[str | None, typer.Option(
    "--min-severity", help="show findings of this severity and up: info (default), "
                           "warning, error")]


@contextmanager
def status(message: str):
    """A spinner on stderr for long work, only for humans on a terminal."""
    if stderr.is_terminal:
        with stderr.status(message):
            yield
    else:
        yield


def parse_thresholds(items: list[str] | None, min_gap_us: float | None = None
                     ) -> dict[str, dict[str, float]]:
    """--set RULE.NAME=VALUE (and --min-gap-us), each checked up front: a known rule
    and threshold, a finite number in its range (gpugap.config.rule_threshold)."""
    if not items and min_gap_us is None:
        return {}
    from gpugap.config import parse_set

    out = parse_set(items)
    if min_gap_us is not None:
        if not min_gap_us > 0 or min_gap_us == float("inf"):
            raise UsageError(f"--min-gap-us must be a positive number, not {min_gap_us:g}")
        out.setdefault("launch-gap", {})["min_gap_us"] = float(min_gap_us)
    return out


def load_trace(report: Path, nsys: str | None):
    from gpugap.report import load

    with status(f"Loading {report.name}") if stderr.is_terminal else nullcontext():
        return load(report, nsys=nsys, status=status)


WorkersOpt = Annotated[int | None, typer.Option(
    "--workers", min=1, help="several reports: analyze them in this many worker processes "
                             "(default: one per CPU)")]
SchedulerOpt = Annotated[str | None, typer.Option(
    "--scheduler", help="several reports: analyze them on this Dask cluster "
                        "(tcp://HOST:8786; needs gpugap[dist]); each worker reads its "
                        "report", metavar="ADDRESS")]


@contextmanager
def job_progress(count: int):
    """A progress bar per report on stderr (humans on a terminal only): yields the
    callback gpugap.job calls as each report's summary arrives."""
    if not stderr.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=stderr, transient=True) as bar:
        task = bar.add_task("Analyzing reports", total=count)

        def arrived(summary) -> None:
            from gpugap.render.safe import safe_text

            what = "ok" if summary.ok else f"{summary.status}: {summary.error}"
            bar.console.print(safe_text(f"{summary.report}: {what}", 200), markup=False,
                              highlight=False)
            bar.advance(task)

        yield arrived


def analyze_job_reports(reports: list[Path], *, json_: bool, rules, thresholds,
                        iteration, nsys, workers, scheduler, severity) -> int:
    """`gpugap analyze R1 R2 ...`: the ranks of one job (gpugap.job)."""
    from gpugap import __version__
    from gpugap.errors import EXIT_PARTIAL, ReportError
    from gpugap.job import combine, summarize_all
    from gpugap.render.jsonout import dumps
    from gpugap.render.terminal import render_job

    with job_progress(len(reports)) as progress:
        summaries = summarize_all(reports, workers=workers, scheduler=scheduler,
                                  progress=progress, nsys=nsys, rules=rules,
                                  thresholds=thresholds, iteration=iteration, details=json_)
    job = combine(summaries)
    if json_:
        floor = SEVERITIES.index(severity)
        documents = []
        for s in summaries:
            if s.analysis is None:
                documents.append({"report": s.report, "status": s.status, "error": s.error})
                continue
            s.analysis["findings"] = [f for f in s.analysis["findings"]
                                      if SEVERITIES.index(f["severity"]) >= floor]
            documents.append(s.analysis)
        sys.stdout.write(dumps({"gpugap_version": __version__, "reports": documents,
                                "job": job.to_dict()}) + "\n")
        sys.stdout.flush()
    else:
        render_job(job, stdout)
    if not job.ranks:
        raise ReportError(f"none of the {len(reports)} reports could be analyzed: "
                          + "; ".join(f"{s.report}: {s.error}" for s in job.failed[:3]))
    return EXIT_PARTIAL if job.failed else 0


@app.command()
def analyze(
    reports: Annotated[list[Path], typer.Argument(
        help="a .nsys-rep or its .sqlite export; several (or a directory, or a glob) "
             "for the ranks of one job", metavar="REPORT...")],
    json_: JsonOpt = False,
    rule: RuleOpt = None,
    range_: RangeOpt = None,
    min_gap_us: Annotated[float | None, typer.Option(
        "--min-gap-us", help="launch-gap threshold in microseconds (default 100)")] = None,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    max_findings: Annotated[int, typer.Option(help="findings shown in the terminal")] = 20,
    html: Annotated[Path | None, typer.Option(
        "--html", help="write a self-contained HTML timeline with the findings drawn on it",
        metavar="FILE")] = None,
    svg: Annotated[Path | None, typer.Option(
        "--svg", help="write a static SVG of the timeline (the --range window, else the "
                      "GPU span)", metavar="FILE")] = None,
    png: Annotated[Path | None, typer.Option(
        "--png", help="write that SVG as PNG (needs chromium)", metavar="FILE")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="overwrite existing --html/--svg/--png files")] = False,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    iteration: IterationOpt = None,
    min_severity: MinSeverityOpt = None,
    all_domains: Annotated[bool, typer.Option(
        "--all-domains", help="list the NVTX ranges of libraries (CUB, NCCL, cuBLAS...) "
                              "beside the program's")] = False,
    workers: WorkersOpt = None,
    scheduler: SchedulerOpt = None,
) -> int:
    """Diagnose a report: the verdict on its steady state (or --range), where the GPU's
    time goes, and every finding with its cause, cost and fix. Several reports (the
    ranks of one job): each analyzed, then the job's verdict (the straggler and what
    waiting for it costs the others), one row per rank."""
    from gpugap.job import expand_reports

    found = expand_reports(reports)
    if len(found) > 1:
        for name, value in (("--html", html), ("--svg", svg), ("--png", png),
                            ("--range", range_)):
            if value:
                raise UsageError(f"{name} takes one report, not the {len(found)} of a job")
        from gpugap.config import load_config

        if config is not None and no_config:
            raise UsageError("--config and --no-config contradict each other; give one")
        cfg = load_config(config, discover=not no_config)
        severity = min_severity or cfg.min_severity
        if severity not in SEVERITIES:
            raise UsageError(f"bad --min-severity '{min_severity}'; use one of "
                             f"{', '.join(SEVERITIES)}")
        return analyze_job_reports(
            found, json_=json_, rules=rule, iteration=iteration, nsys=nsys, workers=workers,
            thresholds=cfg.merged_thresholds(parse_thresholds(set_, min_gap_us)),
            scheduler=scheduler, severity=severity)
    report = found[0]
    from gpugap.report.prefetch import start as prefetch

    prefetch(report)   # read the big tables in the background while the imports below run
    from gpugap.analysis import analyze as run_analysis
    from gpugap.config import load_config
    from gpugap.errors import NoCudaActivity
    from gpugap.render.html import timeline_outputs
    from gpugap.render.jsonout import dumps
    from gpugap.render.terminal import render

    if config is not None and no_config:
        raise UsageError("--config and --no-config contradict each other; give one")
    # Rule thresholds: the project's configuration, then the command line on top.
    cfg = load_config(config, discover=not no_config)
    severity = min_severity or cfg.min_severity
    if severity not in SEVERITIES:
        raise UsageError(f"bad --min-severity '{min_severity}'; use one of "
                         f"{', '.join(SEVERITIES)}")
    thresholds = cfg.merged_thresholds(parse_thresholds(set_, min_gap_us))
    outputs = timeline_outputs(html, svg, png, force=force, range_name=range_,
                               inputs=[report, cfg.path])
    trace = load_trace(report, nsys)
    with status("Analyzing"):
        result = run_analysis(trace, rules=rule, thresholds=thresholds, range_name=range_,
                              require_gpu=False, iteration=iteration,
                              all_domains=all_domains)
    if json_:
        # Plain text: rich would re-scan a large document for nothing.
        document = result.to_dict()
        floor = SEVERITIES.index(severity)
        document["findings"] = [f for f in document["findings"]
                                if SEVERITIES.index(f["severity"]) >= floor]
        sys.stdout.write(dumps(document) + "\n")
        sys.stdout.flush()
    else:
        render(result, stdout, max_findings=max_findings, min_severity=severity)
    with status("Drawing the timeline") if outputs.wanted else nullcontext():
        outputs.write(result, trace, report=lambda line: stderr.print(line, markup=False,
                                                             soft_wrap=True))
    if result.status == "no-cuda-activity":
        raise NoCudaActivity(result.error or "no CUDA activity")
    return 0


@app.command("rules")
def list_rules(json_: JsonOpt = False,
               markdown: Annotated[bool, typer.Option(
                   "--markdown", help="print docs/rules.md")] = False) -> int:
    """List the rules with their causes, thresholds (defaults) and fixes."""
    from gpugap.render.jsonout import dumps
    from gpugap.rules import registry

    if markdown:
        from gpugap.rules.docs import rules_markdown

        stdout.out(rules_markdown(), highlight=False)
        return 0
    reg = registry()
    if json_:
        stdout.out(dumps([{"id": r.id, "title": r.title, "rationale": r.rationale,
                           "fix": r.fix, "causes": dict(r.causes),
                           "thresholds": {k: {"default": t.default, "unit": t.unit,
                                              "help": t.help}
                                          for k, t in r.thresholds.items()}}
                          for r in reg.values()]))
        return 0
    for r in reg.values():
        stdout.print(f"[bold]{r.id}[/bold]: {r.title}")
        stdout.print(f"  why: {r.rationale}")
        for cause, text in r.causes.items():
            stdout.print(f"  cause [magenta]{cause}[/magenta]: {text}")
        for name, t in r.thresholds.items():
            stdout.print(f"  {r.id}.{name} = {t.default:g} {t.unit}: {t.help}")
    return 0


_ARGV: list[str] = []


def current_argv() -> list[str]:
    """The arguments main() was called with (commands that must see a literal --)."""
    return _ARGV


def main(argv: list[str] | None = None) -> int:
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="gpugap")
        return rv if isinstance(rv, int) else 0
    except GpugapError as exc:
        from gpugap.render.safe import MESSAGE_LIMIT, safe_text

        # One line whatever the message quotes (file names, report text): see render.safe.
        stderr.print(f"gpugap: error: {safe_text(exc, MESSAGE_LIMIT)}", soft_wrap=True,
                     markup=False, highlight=False)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        stderr.print("gpugap: aborted")
        return 130
    except Exception as exc:
        # Usage errors of the option parser (click's, or the one vendored by newer typer):
        # duck-typed so gpugap works with either.
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show(file=sys.stderr)
            return EXIT_USAGE
        raise


def _register_commands() -> None:
    import importlib
    import pkgutil

    from gpugap import commands

    for module in sorted(m.name for m in pkgutil.iter_modules(commands.__path__)):
        importlib.import_module(f"gpugap.commands.{module}")


_register_commands()
